r"""Keras 3 training step: RealFormerBackbone "sum" vs "none", per backend.

Residual attention adds one elementwise add per layer and no multiplication,
so a `RealFormerBackbone(residual_attention="sum")` step should cost what the
same backbone with `residual_attention="none"` (plain BERT) costs, on every
Keras backend. This times a full training step (forward, backward, AdamW) of
both, built from one seed at the shapes of `encoder_step.py`, interleaved in
one process per backend (A B, B A, ... so drift hits both alike). On the
TensorFlow backend it also times the tf_keras `RealFormerEncoder` ("sum") on
the same step, so the Keras 3 face can be compared with the Model Garden one.

Steps run in Keras' own loop, as users run it: `model.fit` on in-memory
arrays (the same batch repeated, `steps_per_epoch`), with a callback that
waits for each step's results before stopping its clock (`keras3_fit.make_step_timer`).
(`train_on_batch` syncs the model state every call on JAX, so it measured
114.8 ms where `fit` takes 105.4 ms for keras-hub BERT on an H200.) After a
`--warmup` `fit` per model (compiling), each of `--repeats` blocks runs one
`fit` of `--steps` steps per model, the order alternating between blocks; a
block's ratio is the ratio of its per-step medians, and the table reports
the median over blocks (the median of 3 by default).

Peak memory: on a GPU the allocator's peak (JAX `memory_stats`, TF
`get_memory_info`); on a CPU the peak RSS (VmHWM) of a subprocess per model
minus its RSS after building and compiling, i.e. what the steps add on top of
the weights.

The loss is MLM-like: logits of every 8th position against the tied token
embedding (`ReversibleEmbedding(reverse=True)`, as keras-hub's masked LM
heads), sparse cross-entropy against random labels. Padding: the last 1/8 of
each sequence.

Usage:
  python benchmarks/keras3_step.py                      # jax + tensorflow
  python benchmarks/keras3_step.py --backends=jax --sizes=small \
      --seq_lengths=128 --dtypes=float32 --steps=3      # one quick row
  python benchmarks/keras3_step.py --backends=jax --sizes=base \
      --seq_lengths=512 --tokens_per_batch=16384 --dtypes=mixed_bfloat16
      # BERT-Base, seq 512, batch 32, bf16 (the GPU row of benchmarks/README)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import keras3_fit

SIZES = {  # layers, hidden, heads, intermediate (as encoder_step.py)
    "small": (4, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


def _parser():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--backends", default="jax,tensorflow")
  p.add_argument("--sizes", default="small,base")
  p.add_argument("--seq_lengths", default="128,512")
  p.add_argument("--dtypes", default="float32,mixed_bfloat16")
  p.add_argument("--tokens_per_batch", type=int, default=1024)
  p.add_argument("--steps", type=int, default=6)
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--repeats", type=int, default=3)
  p.add_argument("--memory", default="true", choices=["true", "false"])
  p.add_argument("--score_dtype", default="float32",
                 choices=["float32", "compute"],
                 help="RealFormerBackbone(score_dtype=...) of the 'sum' model.")
  p.add_argument("--json_output", default=None)
  p.add_argument("--xla_cost", action="store_true",
                 help="JAX only: instead of timing, print XLA's cost analysis "
                 "(flops, bytes accessed) of each model's compiled gradient "
                 "step: a device-independent proxy where no GPU is at hand.")
  p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
  return p


def _proc_status_bytes(key):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f"{key} not in /proc/self/status")


class _Keras3Step:
  """`fit` steps of a `RealFormerBackbone` MLM model (one step per call)."""

  def __init__(self, mode, size, seq, dtype, batch, score_dtype="float32"):
    layers, hidden, heads, inner = SIZES[size]
    self._model = keras3_fit.build_mlm_model(
        "realformer", layers=layers, hidden=hidden, heads=heads, inner=inner,
        seq=seq, policy=dtype, backbone_kwargs=dict(
            residual_attention=mode, score_dtype=score_dtype))
    self._fit = keras3_fit.FitSteps(self._model, seq, batch)

  def run(self, steps):
    """Per-step seconds of one `fit` of `steps` steps."""
    return self._fit(steps)


class _TfKerasStep:
  """The same step for the tf_keras `RealFormerEncoder` (TensorFlow only)."""

  def __init__(self, size, seq, dtype, batch):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tf_keras  # pylint: disable=g-import-not-at-top
    from realformer_tf.networks import encoder as encoder_lib  # pylint: disable=g-import-not-at-top
    tf_keras.mixed_precision.set_global_policy(dtype)
    layers, hidden, heads, inner = SIZES[size]
    encoder = encoder_lib.RealFormerEncoder(
        vocab_size=keras3_fit.VOCAB, hidden_size=hidden, num_layers=layers,
        num_attention_heads=heads, inner_dim=inner, type_vocab_size=2,
        max_sequence_length=max(512, seq), residual_attention="sum")
    ids, mask, labels = keras3_fit.mlm_inputs(seq, batch)
    inputs = dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
                  input_type_ids=tf.zeros_like(tf.constant(ids)))
    encoder({k: v[:1, :8] for k, v in inputs.items()})
    tf_keras.mixed_precision.set_global_policy("float32")
    optimizer = tf_keras.optimizers.AdamW(1e-4, weight_decay=0.01)
    table = encoder.get_embedding_table()
    labels = tf.constant(labels)

    @tf.function(jit_compile=True)
    def step():
      with tf.GradientTape() as tape:
        out = encoder(inputs, training=True)["sequence_output"][:, ::8]
        logits = tf.cast(tf.einsum("bsh,vh->bsv", tf.cast(out, table.dtype),
                                   table), tf.float32)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels, logits))
      variables = encoder.trainable_variables
      optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
      return loss

    self._step = step

  def run(self, steps):
    """Per-step seconds of `steps` calls of the step (each synced)."""
    times = []
    for _ in range(steps):
      start = time.perf_counter()
      float(self._step())
      times.append(time.perf_counter() - start)
    return times


def _build(args, backend, model, size, seq, dtype, batch):
  if model == "tf_keras":
    return _TfKerasStep(size, seq, dtype, batch)
  return _Keras3Step(model, size, seq, dtype, batch, args.score_dtype)


def _models(backend):
  return ("none", "sum") + (("tf_keras",) if backend == "tensorflow" else ())


def _xla_cost_child(args, size, seq, dtype):
  """XLA's cost analysis of each model's jitted loss-and-gradient (JAX)."""
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  batch = max(1, args.tokens_per_batch // seq)
  row = dict(backend="jax", device=_device("jax"), size=size, seq=seq,
             batch=batch, dtype=dtype)
  for mode in ("none", "sum"):
    model = _Keras3Step(mode, size, seq, dtype, batch,
                        args.score_dtype)._model  # pylint: disable=protected-access
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ids, mask, labels = keras3_fit.mlm_inputs(seq, batch)
    x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}

    def loss(trainable, non_trainable, x, y, model=model, loss_fn=loss_fn):
      logits, _ = model.stateless_call(trainable, non_trainable, x,
                                       training=True)
      return loss_fn(y, logits)

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    compiled = jax.jit(jax.value_and_grad(loss)).lower(
        trainable, non_trainable, x, labels).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    row[f"{mode}_gflops"] = cost["flops"] / 1e9
    row[f"{mode}_gbytes"] = cost["bytes accessed"] / 1e9
  row["flops_ratio"] = row["sum_gflops"] / row["none_gflops"]
  row["bytes_ratio"] = row["sum_gbytes"] / row["none_gbytes"]
  return row


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
  steps = {m: _build(args, backend, m, size, seq, dtype, batch)
           for m in _models(backend)}
  for step in steps.values():
    step.run(max(1, args.warmup))  # compiles
  ratios = {m: [] for m in steps if m != "none"}
  medians = {m: [] for m in steps}
  peaks = {m: 0 for m in steps}
  for i in range(args.repeats):
    # Keras 3 models: one `fit` of --steps steps per model per block, the
    # order alternating between blocks so drift hits all alike.
    order = list(steps) if i % 2 == 0 else list(reversed(list(steps)))
    for m in order:
      _gpu_peak(backend, reset=True)
      medians[m].append(statistics.median(steps[m].run(args.steps)))
      peaks[m] = max(peaks[m], _gpu_peak(backend) or 0)
    ratios["sum"].append(medians["sum"][-1] / medians["none"][-1])
    if "tf_keras" in steps:
      ratios["tf_keras"].append(medians["sum"][-1] / medians["tf_keras"][-1])
  row = dict(backend=backend, device=_device(backend), size=size, seq=seq,
             batch=batch, dtype=dtype)
  for m in steps:
    row[f"{m}_ms"] = 1000 * statistics.median(medians[m])
  row["time_ratio"] = statistics.median(ratios["sum"])
  if "tf_keras" in ratios:
    row["keras3_vs_tf_keras"] = statistics.median(ratios["tf_keras"])
  if any(peaks.values()):
    row.update({f"{m}_peak_mb": peaks[m] / 2**20 for m in steps})
  return row


def _memory_child(args, backend, model, size, seq, dtype):
  batch = max(1, args.tokens_per_batch // seq)
  step = _build(args, backend, model, size, seq, dtype, batch)
  step.run(1)  # compiles; what compiling holds is not the step's
  before = _proc_status_bytes("VmRSS")
  step.run(args.warmup + 1)
  return _proc_status_bytes("VmHWM") - before


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
    if kind == "xla_cost":
      size, seq, dtype = rest
      print(json.dumps(_xla_cost_child(args, size, int(seq), dtype)))
    elif kind == "time":
      size, seq, dtype = rest
      print(json.dumps(_time_child(args, backend, size, int(seq), dtype)))
    else:
      model, size, seq, dtype = rest
      print(json.dumps(_memory_child(args, backend, model, size, int(seq),
                                     dtype)))
    return
  for size in args.sizes.split(","):
    if size not in SIZES:
      sys.exit(f"--sizes: unknown size {size!r}; known: {sorted(SIZES)}")
  rows = []
  if args.xla_cost:
    print("XLA cost analysis of the jitted loss-and-gradient (JAX); "
          f"ratio = sum (score_dtype={args.score_dtype}) / none\n| size | seq | batch | dtype | none GFLOP | "
          "sum GFLOP | flops ratio | none GB | sum GB | bytes ratio |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
      for seq in args.seq_lengths.split(","):
        for dtype in args.dtypes.split(","):
          row = _spawn(args, f"xla_cost:jax:{size}:{seq}:{dtype}", "jax")
          rows.append(row)
          print(f"| {size} | {seq} | {row['batch']} | {dtype} | "
                f"{row['none_gflops']:.1f} | {row['sum_gflops']:.1f} | "
                f"{row['flops_ratio']:.4f} | {row['none_gbytes']:.2f} | "
                f"{row['sum_gbytes']:.2f} | {row['bytes_ratio']:.4f} |",
                flush=True)
    return
  for backend in args.backends.split(","):
    for size in args.sizes.split(","):
      for seq in args.seq_lengths.split(","):
        for dtype in args.dtypes.split(","):
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
        f"blocks of {args.steps} interleaved "
        f"steps (after {args.warmup} warm-up steps); sum/none = "
        "RealFormerBackbone('sum') / RealFormerBackbone('none'); "
        "keras3/tf_keras = RealFormerBackbone('sum') / tf_keras "
        "RealFormerEncoder('sum'), TensorFlow backend")
  _print_table(rows)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
