r"""Training-step time and peak memory: RealFormerEncoder vs BertEncoderV2.

Residual attention adds one elementwise add per layer and no multiplication,
so a RealFormer step should cost what a Post-LN BERT step costs. This times a
full training step (forward + backward + AdamW update) of both encoders at the
same shape, interleaved in one process (A, B, B, A, ... so drift and noise hit
both alike), and reports medians and the RealFormer/BERT ratio.

Peak memory: on a GPU, TF's allocator peak (`get_memory_info`) around each
model's steps. On a CPU TF keeps no allocator statistics, so each model runs
in its own subprocess and reports its peak RSS (VmHWM) during its training
steps minus the RSS before the first step. Either way the models are built on
a tiny batch, so the figure is what a step adds to the weights: activations,
gradients, optimizer slots and the step's workspace.

Usage:
  python benchmarks/encoder_step.py                       # the full table
  python benchmarks/encoder_step.py --sizes=small --seq_lengths=128 \
      --dtypes=float32 --xla=false --steps=3              # one quick row
  python benchmarks/encoder_step.py --sizes=small --seq_lengths=4096 \
      --tokens_per_batch=4096 --dtypes=float32 --xla=false --recompute \
      --steps=1 --warmup=1                                # long sequences
  python benchmarks/encoder_step.py --dump_hlo=/tmp/hlo --sizes=base \
      --seq_lengths=512 --dtypes=mixed_bfloat16 --tokens_per_batch=16384 \
      --score_dtype=compute   # XLA HLO of each step, for xla_gpu_step

`--dump_hlo DIR` times nothing: per row and model it writes the XLA HLO of
the jit-compiled step to `DIR/<model>_<size>_s<seq>_b<batch>_<dtype>.hlo.pb`
(the input of ../shared/tools/xla_gpu_step) and prints the op counts of the
optimized HLO that XLA compiles for this machine (`.opcounts.json` beside it).

`--dropout=library` runs RealFormerEncoder with tf_keras' `Dropout` where
its `HashedDropout` would hash (inside XLA), as BertEncoderV2 does: the
dropout's own share of a step (dump names get "-librarydropout").
"""

import collections
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import networks
from realformer_tf.layers import hashed_dropout
from realformer_tf.networks import encoder as encoder_lib

SIZES = {  # layers, hidden, heads, intermediate (paper Table 1)
    "small": (4, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["small", "base"], "Model sizes.")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths.")
flags.DEFINE_list("dtypes", ["float32", "mixed_bfloat16"], "Keras policies.")
flags.DEFINE_list("xla", ["false", "true"], "jit_compile settings.")
flags.DEFINE_integer("tokens_per_batch", 1024,
                     "Batch size = tokens_per_batch // seq_length (>= 1).")
flags.DEFINE_integer("steps", 8, "Timed steps per model.")
flags.DEFINE_integer("warmup", 2, "Untimed steps per model (tracing, XLA).")
flags.DEFINE_bool("memory", True, "Also measure peak memory.")
flags.DEFINE_string("json_output", None, "Also write the rows as JSON here.")
flags.DEFINE_enum("score_dtype", "float32",
                  ["float32", "compute", "auto", "default"],
                  "RealFormerEncoder(score_dtype=...); 'default' passes none, "
                  "so the encoder's own default applies.")
flags.DEFINE_bool("recompute", False, "RealFormerEncoder(recompute=...).")
flags.DEFINE_enum("dropout", "hashed", ["hashed", "library"],
                  "RealFormerEncoder's dropout under XLA: 'hashed' (its "
                  "HashedDropout) or 'library' (tf_keras' Dropout, as "
                  "BertEncoderV2 and this encoder before HashedDropout).")
flags.DEFINE_string("dump_hlo", None,
                    "Write each model's jit-compiled step as HLO here "
                    "instead of timing.")
flags.DEFINE_list("dump_models", ["bert", "realformer"],
                  "Models --dump_hlo writes: one per process keeps a "
                  "BERT-Base dump's memory to one model.")
# Internal: run one model in this process and print its peak memory.
flags.DEFINE_string("_memory_child", None, "model:size:seq:dtype:xla")


def _library_dropout():
  """--dropout=library: HashedDropout calls as tf_keras' Dropout everywhere."""
  hashed_dropout.HashedDropout.call = tf_keras.layers.Dropout.call


def _build(model, size, seq, dtype):
  tf_keras.mixed_precision.set_global_policy(dtype)
  layers, hidden, heads, inner = SIZES[size]
  kwargs = dict(vocab_size=30522, hidden_size=hidden, num_layers=layers,
                num_attention_heads=heads, inner_dim=inner,
                max_sequence_length=512, type_vocab_size=2)
  if model == "bert":
    encoder = networks.BertEncoderV2(
        max_sequence_length=max(512, seq),
        **{k: v for k, v in kwargs.items() if k != "max_sequence_length"})
  else:
    if FLAGS.score_dtype != "default":
      kwargs["score_dtype"] = FLAGS.score_dtype
    encoder = encoder_lib.RealFormerEncoder(
        residual_attention="sum", recompute=FLAGS.recompute, max_sequence_length=max(512, seq),
        **{k: v for k, v in kwargs.items() if k != "max_sequence_length"})
  batch = max(1, FLAGS.tokens_per_batch // seq)
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, 30000, size=(batch, seq)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[:, seq - seq // 8:] = 0  # some padding, as in real batches
  inputs = dict(input_word_ids=tf.constant(ids * mask),
                input_mask=tf.constant(mask),
                input_type_ids=tf.zeros_like(tf.constant(ids)))
  # Build with a tiny batch, so the memory baseline is the weights alone.
  encoder({k: v[:1, :8] for k, v in inputs.items()})
  optimizer = tf_keras.optimizers.AdamW(learning_rate=1e-4,
                                        weight_decay=0.01)
  if dtype == "mixed_float16":
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  return encoder, optimizer, inputs, batch


def _make_step(encoder, optimizer, inputs, xla):
  table = encoder.get_embedding_table()

  def step():
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)
      # An MLM-like loss: logits against the tied embedding table.
      seq = tf.cast(out["sequence_output"][:, ::8], table.dtype)
      logits = tf.cast(tf.einsum("bsh,vh->bsv", seq, table), tf.float32)
      loss = tf.reduce_mean(tf.reduce_logsumexp(logits, -1)) + tf.reduce_mean(
          tf.cast(out["pooled_output"], tf.float32))
    variables = encoder.trainable_variables
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss

  return tf.function(step, jit_compile=xla)


def _time(step):
  start = time.perf_counter()
  step().numpy()  # .numpy() waits for the device
  return time.perf_counter() - start


def _gpu():
  return bool(tf.config.list_physical_devices("GPU"))


def _run_row(size, seq, dtype, xla):
  models = {}
  for name in FLAGS.dump_models:
    encoder, optimizer, inputs, batch = _build(name, size, seq, dtype)
    models[name] = _make_step(encoder, optimizer, inputs, xla)
  tf_keras.mixed_precision.set_global_policy("float32")
  for _ in range(FLAGS.warmup):
    for step in models.values():
      step().numpy()
  times = {"bert": [], "realformer": []}
  peaks = {"bert": 0, "realformer": 0}
  for i in range(FLAGS.steps):
    order = ("bert", "realformer") if i % 2 == 0 else ("realformer", "bert")
    for name in order:
      if _gpu():
        tf.config.experimental.reset_memory_stats("GPU:0")
      times[name].append(_time(models[name]))
      if _gpu():
        peaks[name] = max(peaks[name], tf.config.experimental.get_memory_info(
            "GPU:0")["peak"])
  row = dict(size=size, seq=seq, dtype=dtype, xla=xla, batch=batch,
             device="GPU" if _gpu() else "CPU",
             score_dtype=FLAGS.score_dtype, recompute=FLAGS.recompute,
             dropout=FLAGS.dropout)
  for name in times:
    row[f"{name}_ms"] = 1000 * statistics.median(times[name])
  row["time_ratio"] = row["realformer_ms"] / row["bert_ms"]
  if FLAGS.memory:
    if not _gpu():
      for name in peaks:
        peaks[name] = _memory_in_subprocess(name, size, seq, dtype, xla)
    row["bert_peak_mb"] = peaks["bert"] / 2**20
    row["realformer_peak_mb"] = peaks["realformer"] / 2**20
    row["memory_ratio"] = peaks["realformer"] / max(peaks["bert"], 1)
  return row


def _memory_in_subprocess(name, size, seq, dtype, xla):
  spec = f"{name}:{size}:{seq}:{dtype}:{str(xla).lower()}"
  out = subprocess.run(
      [sys.executable, os.path.abspath(__file__), f"--_memory_child={spec}",
       f"--tokens_per_batch={FLAGS.tokens_per_batch}",
       f"--warmup={FLAGS.warmup}", f"--score_dtype={FLAGS.score_dtype}",
       f"--recompute={str(FLAGS.recompute).lower()}",
       f"--dropout={FLAGS.dropout}"],
      capture_output=True, text=True, check=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return int(out.stdout.strip().splitlines()[-1])


def _memory_child(spec):
  name, size, seq, dtype, xla = spec.split(":")
  encoder, optimizer, inputs, _ = _build(name, size, int(seq), dtype)
  step = _make_step(encoder, optimizer, inputs, xla == "true")
  step.get_concrete_function()  # trace first: tracing memory is not the step's
  before = _proc_status_bytes("VmRSS")
  for _ in range(FLAGS.warmup + 1):
    step().numpy()
  print(_proc_status_bytes("VmHWM") - before)


def _dump_hlo(size, seq, dtype):
  """Writes each model's jit-compiled step as HLO; returns optimized-HLO op counts."""
  os.makedirs(FLAGS.dump_hlo, exist_ok=True)
  counts = {}
  for name in FLAGS.dump_models:
    encoder, optimizer, inputs, batch = _build(name, size, seq, dtype)
    step = _make_step(encoder, optimizer, inputs, True)
    if name == "realformer":
      name += (f"-{FLAGS.score_dtype}" + ("-recompute" if FLAGS.recompute else "")
               + ("-librarydropout" if FLAGS.dropout == "library" else ""))
    stem = os.path.join(FLAGS.dump_hlo, f"{name}_{size}_s{seq}_b{batch}_{dtype}")
    with open(stem + ".hlo.pb", "wb") as f:
      f.write(step.experimental_get_compiler_ir()(stage="hlo_serialized"))
    optimized = step.experimental_get_compiler_ir()(stage="optimized_hlo")
    ops = collections.Counter()
    for line in optimized.splitlines():
      # Instructions of the entry and fused computations: "%x = type op(".
      parts = line.split(" = ", 1)
      words = parts[1].split("(", 1)[0].split() if len(parts) == 2 else []
      if len(words) >= 2 and line.lstrip().startswith(("%", "ROOT %")):
        ops[words[-1]] += 1
    counts[name] = dict(ops.most_common())
    with open(stem + ".opcounts.json", "w") as f:
      json.dump(counts[name], f, indent=1)
    print(stem, {k: ops[k] for k in ("fusion", "dot", "convolution",
                                     "custom-call", "convert", "transpose",
                                     "copy") if k in ops}, flush=True)
    tf_keras.mixed_precision.set_global_policy("float32")
    tf_keras.backend.clear_session()
    gc.collect()
  return counts


def _proc_status_bytes(key):
  """Current (VmRSS) or peak (VmHWM) resident memory of this process.

  VmHWM, unlike `getrusage`'s ru_maxrss, is not inherited from the parent
  across fork + exec, so a child measures only itself.
  """
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1]) * 1024  # kB
  raise RuntimeError(f"{key} not in /proc/self/status")


def _print_table(rows):
  header = ("size", "seq", "batch", "dtype", "xla", "bert ms", "rf ms",
            "time ratio", "bert MB", "rf MB", "mem ratio")
  print("| " + " | ".join(header) + " |")
  print("|" + "---|" * len(header))
  for r in rows:
    mem = (f"{r['bert_peak_mb']:.0f} | {r['realformer_peak_mb']:.0f} | "
           f"{r['memory_ratio']:.3f}") if "memory_ratio" in r else "- | - | -"
    print(f"| {r['size']} | {r['seq']} | {r['batch']} | {r['dtype']} | "
          f"{r['xla']} | {r['bert_ms']:.1f} | {r['realformer_ms']:.1f} | "
          f"{r['time_ratio']:.3f} | {mem} |", flush=True)


def main(_):
  if FLAGS.dropout == "library":  # once, for every model this process builds
    _library_dropout()
  if FLAGS._memory_child:  # pylint: disable=protected-access
    _memory_child(FLAGS._memory_child)  # pylint: disable=protected-access
    return
  for size in FLAGS.sizes:
    if size not in SIZES:
      raise app.UsageError(f"--sizes: unknown size {size!r}; "
                           f"known: {sorted(SIZES)}")
  if FLAGS.dump_hlo:
    for size, seq, dtype in itertools.product(
        FLAGS.sizes, FLAGS.seq_lengths, FLAGS.dtypes):
      _dump_hlo(size, int(seq), dtype)
    return
  rows = []
  for size, seq, dtype, xla in itertools.product(
      FLAGS.sizes, FLAGS.seq_lengths, FLAGS.dtypes, FLAGS.xla):
    row = _run_row(size, int(seq), dtype, xla.lower() == "true")
    # Free the row's models, traced steps and XLA executables before the next.
    tf_keras.backend.clear_session()
    gc.collect()
    rows.append(row)
    print(json.dumps(row), file=sys.stderr, flush=True)
  print(f"\ndevice: {rows[0]['device']}; median of {FLAGS.steps} interleaved "
        f"steps after {FLAGS.warmup} warm-up steps; ratio = RealFormer / BERT; "
        f"RealFormer score_dtype={FLAGS.score_dtype}, "
        f"recompute={FLAGS.recompute}, dropout={FLAGS.dropout}")
  _print_table(rows)
  if FLAGS.json_output:
    with open(FLAGS.json_output, "w") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  app.run(main)
