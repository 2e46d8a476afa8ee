r"""Keras 3 training step: RealFormerBackbone "sum" vs "none", per backend.

The `keras3_fit` MLM step of `RealFormerBackbone(residual_attention="sum")`
and of the same backbone with "none" (plain BERT), built from one seed, run
in Keras' own `fit` and interleaved in one process per backend; on the
TensorFlow backend also the tf_keras `RealFormerEncoder` ("sum",
`encoder_step`'s step). Ratios are medians over `--repeats` blocks of
`--steps` steps. Peak memory: the GPU allocator's peak, or on a CPU a
subprocess per model's peak RSS less its RSS after compiling.

usage:
  python benchmarks/keras3_step.py                      # jax + tensorflow
  python benchmarks/keras3_step.py --backends=jax --sizes=small \
      --seq_lengths=128 --dtypes=float32 --steps=3 --memory=false
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import keras3_fit
import timing

SIZES = keras3_fit.SIZES


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--backends", type=timing.str_list, default="jax,tensorflow")
  p.add_argument("--sizes", type=timing.str_list, default="small,base")
  p.add_argument("--seq_lengths", type=timing.str_list, default="128,512")
  p.add_argument("--dtypes", type=timing.str_list,
                 default="float32,mixed_bfloat16")
  p.add_argument("--tokens_per_batch", type=int, default=1024)
  p.add_argument("--steps", type=int, default=6)
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--memory", default="true", choices=["true", "false"])
  p.add_argument("--score_dtype", default="float32",
                 choices=["float32", "compute"],
                 help="RealFormerBackbone(score_dtype=...) of the 'sum' model.")
  p.add_argument("--json_output", default=None)
  p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
  return p


class _Keras3Step:
  """`fit` steps of a `RealFormerBackbone` MLM model (per-step seconds)."""

  def __init__(self, mode, size, seq, dtype, batch, score_dtype):
    layers, hidden, heads, inner = SIZES[size]
    model = keras3_fit.build_mlm_model(
        "realformer", layers=layers, hidden=hidden, heads=heads, inner=inner,
        seq=seq, policy=dtype, backbone_kwargs=dict(
            residual_attention=mode, score_dtype=score_dtype))
    self.run = keras3_fit.FitSteps(model, seq, batch)


class _TfKerasStep:
  """`encoder_step`'s XLA step of the tf_keras `RealFormerEncoder("sum")`."""

  def __init__(self, size, seq, dtype, batch):
    import encoder_step  # pylint: disable=g-import-not-at-top  (TensorFlow)
    step = encoder_step.make_step(*encoder_step.build(
        "realformer", size, seq, dtype, batch, score_dtype="default"), True)
    self.run = lambda steps: timing.waited(lambda: float(step()), steps)


def _build(args, model, size, seq, dtype, batch):
  if model == "tf_keras":
    return _TfKerasStep(size, seq, dtype, batch)
  return _Keras3Step(model, size, seq, dtype, batch, args.score_dtype)


def _models(backend):
  return ("none", "sum") + (("tf_keras",) if backend == "tensorflow" else ())


def _gpu_peak(backend, reset=False):
  """The accelerator allocator's peak bytes, or None on a CPU."""
  if backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    device = jax.devices()[0]
    if device.platform == "cpu":
      return None
    return device.memory_stats().get("peak_bytes_in_use")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not tf.config.list_physical_devices("GPU"):
    return None
  if reset:
    tf.config.experimental.reset_memory_stats("GPU:0")
  return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def _device(backend):
  if backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    return jax.devices()[0].device_kind
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def _time_child(args, backend, size, seq, dtype):
  batch = max(1, args.tokens_per_batch // seq)
  steps = {m: _build(args, m, size, seq, dtype, batch)
           for m in _models(backend)}
  for step in steps.values():
    step.run(max(1, args.warmup))  # compiles
  medians = {m: [] for m in steps}
  peaks = dict.fromkeys(steps, 0)
  for i in range(args.repeats):
    for m in timing.alternate(steps, i):
      _gpu_peak(backend, reset=True)
      medians[m].append(statistics.median(steps[m].run(args.steps)))
      peaks[m] = max(peaks[m], _gpu_peak(backend) or 0)
  row = dict(backend=backend, device=_device(backend), size=size, seq=seq,
             batch=batch, dtype=dtype)
  for m in steps:
    row[f"{m}_ms"] = 1000 * statistics.median(medians[m])
  ratio = lambda a, b: statistics.median(
      x / y for x, y in zip(medians[a], medians[b]))
  row["time_ratio"] = ratio("sum", "none")
  if "tf_keras" in steps:
    row["keras3_vs_tf_keras"] = ratio("sum", "tf_keras")
  if any(peaks.values()):
    row.update({f"{m}_peak_mb": peaks[m] / 2**20 for m in steps})
  return row


def _memory_child(args, backend, model, size, seq, dtype):
  batch = max(1, args.tokens_per_batch // seq)
  step = _build(args, model, size, seq, dtype, batch)
  step.run(1)  # compiles; what compiling holds is not the step's
  before = timing.rss_bytes("VmRSS")
  step.run(args.warmup + 1)
  return timing.rss_bytes("VmHWM") - before


def _spawn(args, spec, backend):
  argv = [sys.executable, os.path.abspath(__file__), f"--_child={spec}"]
  for key in ("tokens_per_batch", "steps", "warmup", "repeats", "score_dtype"):
    argv.append(f"--{key}={getattr(args, key)}")
  env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
  out = subprocess.run(argv, capture_output=True, text=True, env=env,
                       check=False)
  if out.returncode:
    sys.exit(f"{spec} failed (rc {out.returncode}):\n{out.stderr[-4000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])


def _print_table(rows):
  header = ("backend", "device", "size", "seq", "batch", "dtype", "none ms",
            "sum ms", "sum/none", "tf_keras ms", "keras3/tf_keras",
            "none MB", "sum MB", "mem sum/none")
  print("| " + " | ".join(header) + " |")
  print("|" + "---|" * len(header))
  for r in rows:
    tfk = (f"{r['tf_keras_ms']:.1f} | {r['keras3_vs_tf_keras']:.3f}"
           if "tf_keras_ms" in r else "- | -")
    mem = (f"{r['none_peak_mb']:.0f} | {r['sum_peak_mb']:.0f} | "
           f"{r['sum_peak_mb'] / max(r['none_peak_mb'], 1e-9):.3f}"
           if "none_peak_mb" in r else "- | - | -")
    print(f"| {r['backend']} | {r['device']} | {r['size']} | {r['seq']} | "
          f"{r['batch']} | {r['dtype']} | {r['none_ms']:.1f} | "
          f"{r['sum_ms']:.1f} | {r['time_ratio']:.3f} | {tfk} | {mem} |",
          flush=True)


def main():
  args = _parser().parse_args()
  if args._child:  # pylint: disable=protected-access
    kind, backend, *rest = args._child.split(":")  # pylint: disable=protected-access
    if kind == "time":
      size, seq, dtype = rest
      print(json.dumps(_time_child(args, backend, size, int(seq), dtype)))
    else:
      model, size, seq, dtype = rest
      print(json.dumps(_memory_child(args, backend, model, size, int(seq),
                                     dtype)))
    return
  for size in args.sizes:
    if size not in SIZES:
      sys.exit(f"--sizes: unknown size {size!r}; known: {sorted(SIZES)}")
  rows = []
  for backend in args.backends:
    for size in args.sizes:
      for seq in args.seq_lengths:
        for dtype in args.dtypes:
          spec = f"{backend}:{size}:{seq}:{dtype}"
          row = _spawn(args, "time:" + spec, backend)
          if args.memory == "true" and "none_peak_mb" not in row:
            for m in _models(backend):
              row[f"{m}_peak_mb"] = _spawn(
                  args, f"memory:{backend}:{m}:{size}:{seq}:{dtype}",
                  backend) / 2**20
          rows.append(row)
          print(json.dumps(row), file=sys.stderr, flush=True)
  print(f"\nscore_dtype={args.score_dtype}; median over {args.repeats} "
        f"blocks of {args.steps} interleaved steps (after {args.warmup} "
        "warm-up steps); sum/none = RealFormerBackbone('sum') / "
        "RealFormerBackbone('none'); keras3/tf_keras = "
        "RealFormerBackbone('sum') / tf_keras RealFormerEncoder('sum'), "
        "TensorFlow backend")
  _print_table(rows)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
