r"""Training-step time and peak memory: RealFormerEncoder vs BertEncoderV2.

A full training step (forward, backward, AdamW; an MLM loss on every 8th
position through the tied embedding) of both tf_keras encoders at one shape,
interleaved in one process; medians and the RealFormer / BERT ratio. Peak
memory is what a step adds to the weights (the GPU allocator's peak, or on a
CPU a subprocess per model's peak RSS less its RSS before the first step).

usage:
  python benchmarks/encoder_step.py                       # the full table
  python benchmarks/encoder_step.py --sizes=small --seq_lengths=128 \
      --dtypes=float32 --xla=false --steps=3              # one quick row
  python benchmarks/encoder_step.py --dump_hlo=.gpu_hlo/hlo --sizes=base \
      --seq_lengths=512 --dtypes=mixed_bfloat16 --tokens_per_batch=16384
      # each step's XLA HLO for gpu_suite.py (benchmarks/gpu_prepare.sh)
"""

import argparse
import contextlib
import gc
import itertools
import json
import os
import subprocess
import sys
from unittest import mock

import tensorflow as tf
# TF's XLA ops; `optimization_barrier` has no public alias in TF 2.20.
from tensorflow.compiler.tf2xla.python import xla
import tf_keras

from official.nlp.modeling import networks
from realformer_tf.layers import hashed_dropout
from realformer_tf.layers import residual_attention
from realformer_tf.layers import xla_kernels
from realformer_tf.networks import encoder as encoder_lib

import keras3_fit  # pylint: disable=g-bad-import-order  (benchmarks/)
import timing  # pylint: disable=g-bad-import-order

SIZES = keras3_fit.SIZES


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--sizes", type=timing.str_list, default="small,base")
  p.add_argument("--seq_lengths", type=timing.str_list, default="128,512")
  p.add_argument("--dtypes", type=timing.str_list,
                 default="float32,mixed_bfloat16", help="Keras policies.")
  p.add_argument("--xla", type=timing.str_list, default="false,true",
                 help="jit_compile settings.")
  p.add_argument("--tokens_per_batch", type=int, default=1024,
                 help="Batch size = tokens_per_batch // seq_length (>= 1).")
  p.add_argument("--steps", type=int, default=8, help="Timed steps a model.")
  p.add_argument("--warmup", type=int, default=2, help="Untimed steps.")
  p.add_argument("--memory", default="true", choices=["true", "false"])
  p.add_argument("--json_output", default=None)
  p.add_argument("--score_dtype", default="float32",
                 choices=["float32", "compute", "auto", "default"],
                 help="RealFormerEncoder(score_dtype=...); 'default' passes "
                 "none.")
  p.add_argument("--recompute", action="store_true",
                 help="RealFormerEncoder(recompute=True).")
  p.add_argument("--dropout", default="hashed", choices=["hashed", "library"],
                 help="RealFormerEncoder's dropout: its HashedDropout or "
                 "tf_keras' Dropout (as BertEncoderV2).")
  p.add_argument("--softmax", default="tf", choices=["tf", "kept"],
                 help="'kept': under XLA the attention probabilities are "
                 "kept for the backward pass (kept_probs_softmax), not "
                 "recomputed; dump names get '-keptprobs'.")
  p.add_argument("--dump_hlo", default=None,
                 help="Write each model's jit-compiled step as HLO to "
                 "DIR/<model>_<size>_s<seq>_b<batch>_<dtype>.hlo.pb instead "
                 "of timing.")
  p.add_argument("--dump_models", type=timing.str_list,
                 default="bert,realformer")
  p.add_argument("--_memory_child", default=None, help=argparse.SUPPRESS)
  return p


@tf.custom_gradient
def _kept(logits):
  probs, = xla.optimization_barrier(tf.nn.softmax(logits, axis=-1))

  def grad(d_probs):
    return (d_probs - tf.reduce_sum(d_probs * probs, -1, keepdims=True)) * probs

  return probs, grad


def kept_probs_softmax(logits, axis=-1):
  """`softmax(logits)` over the last axis; under XLA its probabilities sit
  behind an optimization barrier and the gradient is taken from them."""
  if axis not in (-1, len(logits.shape) - 1):
    raise ValueError(f"kept_probs_softmax: axis={axis}; only the last axis")
  if xla_kernels.in_xla_context():
    return _kept(logits)
  return tf.nn.softmax(logits, axis=axis)


def kept_probs_in_encoder():
  """Within: the tf_keras face's attention softmax is `kept_probs_softmax`."""
  return mock.patch.object(residual_attention.TF_OPS, "softmax",
                           kept_probs_softmax)


def build(model, size, seq, dtype, batch, score_dtype="float32",
          recompute=False, residual_attention_mode="sum"):
  """(encoder, inputs, labels): `model` ("bert" or "realformer") built on a
  tiny batch (so a memory baseline is the weights alone)."""
  tf_keras.mixed_precision.set_global_policy(dtype)
  layers, hidden, heads, inner = SIZES[size]
  kwargs = dict(vocab_size=keras3_fit.VOCAB, hidden_size=hidden,
                num_layers=layers, num_attention_heads=heads, inner_dim=inner,
                max_sequence_length=max(512, seq), type_vocab_size=2)
  if model == "bert":
    encoder = networks.BertEncoderV2(**kwargs)
  else:
    if score_dtype != "default":
      kwargs["score_dtype"] = score_dtype
    encoder = encoder_lib.RealFormerEncoder(
        residual_attention=residual_attention_mode, recompute=recompute,
        **kwargs)
  ids, mask, labels = keras3_fit.mlm_inputs(seq, batch)
  inputs = dict(input_word_ids=tf.constant(ids), input_mask=tf.constant(mask),
                input_type_ids=tf.zeros_like(tf.constant(ids)))
  encoder({k: v[:1, :8] for k, v in inputs.items()})
  tf_keras.mixed_precision.set_global_policy("float32")
  return encoder, inputs, tf.constant(labels)


def make_step(encoder, inputs, labels, xla_compile, loss_scale=False):
  """A `tf.function` training step (AdamW) returning its loss."""
  optimizer = tf_keras.optimizers.AdamW(1e-4, weight_decay=0.01)
  if loss_scale:
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  table = encoder.get_embedding_table()

  def step():
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)
      every_8th = tf.cast(out["sequence_output"][:, ::8], table.dtype)
      logits = tf.cast(tf.einsum("bsh,vh->bsv", every_8th, table), tf.float32)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels, logits)) + tf.reduce_mean(
              tf.cast(out["pooled_output"], tf.float32))
    variables = encoder.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  return tf.function(step, jit_compile=xla_compile)


def _step(args, name, size, seq, dtype, xla_compile):
  batch = max(1, args.tokens_per_batch // seq)
  encoder, inputs, labels = build(name, size, seq, dtype, batch,
                                  args.score_dtype, args.recompute)
  return make_step(encoder, inputs, labels, xla_compile,
                   dtype == "mixed_float16"), batch


def _gpu():
  return bool(tf.config.list_physical_devices("GPU"))


def _run_row(args, size, seq, dtype, xla_compile):
  models = {}
  for name in args.dump_models:
    models[name], batch = _step(args, name, size, seq, dtype, xla_compile)
  for step in models.values():
    timing.waited(lambda s=step: s().numpy(), args.warmup)
  times = {name: [] for name in models}
  peaks = dict.fromkeys(models, 0)
  for i in range(args.steps):
    for name in timing.alternate(models, i):
      if _gpu():
        tf.config.experimental.reset_memory_stats("GPU:0")
      times[name] += timing.waited(lambda n=name: models[n]().numpy(), 1)
      if _gpu():
        peaks[name] = max(peaks[name], tf.config.experimental.get_memory_info(
            "GPU:0")["peak"])
  row = dict(size=size, seq=seq, dtype=dtype, xla=xla_compile, batch=batch,
             device="GPU" if _gpu() else "CPU", score_dtype=args.score_dtype,
             recompute=args.recompute, dropout=args.dropout,
             softmax=args.softmax)
  for name in times:
    row[f"{name}_ms"] = timing.median_ms(times[name])
  row["time_ratio"] = row["realformer_ms"] / row["bert_ms"]
  if args.memory == "true":
    if not _gpu():
      for name in peaks:
        peaks[name] = _memory_in_subprocess(args, name, size, seq, dtype,
                                            xla_compile)
    row["bert_peak_mb"] = peaks["bert"] / 2**20
    row["realformer_peak_mb"] = peaks["realformer"] / 2**20
    row["memory_ratio"] = peaks["realformer"] / max(peaks["bert"], 1)
  return row


def _memory_in_subprocess(args, name, size, seq, dtype, xla_compile):
  argv = [sys.executable, os.path.abspath(__file__),
          f"--_memory_child={name}:{size}:{seq}:{dtype}:{xla_compile}"] + [
              f"--{k}={getattr(args, k)}" for k in (
                  "tokens_per_batch", "warmup", "score_dtype", "dropout",
                  "softmax")] + (["--recompute"] if args.recompute else [])
  out = subprocess.run(argv, capture_output=True, text=True, check=True,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  return int(out.stdout.strip().splitlines()[-1])


def _memory_child(args):
  name, size, seq, dtype, xla_compile = args._memory_child.split(":")  # pylint: disable=protected-access
  step, _ = _step(args, name, size, int(seq), dtype, xla_compile == "True")
  step.get_concrete_function()  # tracing memory is not the step's
  before = timing.rss_bytes("VmRSS")
  timing.waited(lambda: step().numpy(), args.warmup + 1)
  print(timing.rss_bytes("VmHWM") - before)


def _dump_hlo(args, size, seq, dtype):
  """Writes each model's jit-compiled step as serialized HLO."""
  os.makedirs(args.dump_hlo, exist_ok=True)
  for name in args.dump_models:
    step, batch = _step(args, name, size, seq, dtype, True)
    if name == "realformer":
      name += (f"-{args.score_dtype}" + ("-recompute" if args.recompute else "")
               + ("-librarydropout" if args.dropout == "library" else "")
               + ("-keptprobs" if args.softmax == "kept" else ""))
    path = os.path.join(args.dump_hlo,
                        f"{name}_{size}_s{seq}_b{batch}_{dtype}.hlo.pb")
    with open(path, "wb") as f:
      f.write(step.experimental_get_compiler_ir()(stage="hlo_serialized"))
    print(path, flush=True)
    tf_keras.backend.clear_session()
    gc.collect()


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


def main(argv=None):
  args = _parser().parse_args(argv)
  with contextlib.ExitStack() as stack:
    if args.dropout == "library":  # tf_keras' Dropout where HashedDropout is
      stack.enter_context(mock.patch.object(
          hashed_dropout.HashedDropout, "call", tf_keras.layers.Dropout.call))
    if args.softmax == "kept":
      stack.enter_context(kept_probs_in_encoder())
    if args._memory_child:  # pylint: disable=protected-access
      return _memory_child(args)
    for size in args.sizes:
      if size not in SIZES:
        sys.exit(f"--sizes: unknown size {size!r}; known: {sorted(SIZES)}")
    if args.dump_hlo:
      for size, seq, dtype in itertools.product(args.sizes, args.seq_lengths,
                                                args.dtypes):
        _dump_hlo(args, size, int(seq), dtype)
      return
    rows = []
    for size, seq, dtype, xla_compile in itertools.product(
        args.sizes, args.seq_lengths, args.dtypes, args.xla):
      rows.append(_run_row(args, size, int(seq), dtype,
                           xla_compile.lower() == "true"))
      tf_keras.backend.clear_session()  # the row's models and executables
      gc.collect()
      print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
  print(f"\ndevice: {rows[0]['device']}; median of {args.steps} interleaved "
        f"steps after {args.warmup} warm-up steps; ratio = RealFormer / BERT; "
        f"RealFormer score_dtype={args.score_dtype}, "
        f"recompute={args.recompute}, dropout={args.dropout}, "
        f"softmax={args.softmax}")
  _print_table(rows)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(rows, f, indent=2)


if __name__ == "__main__":
  main()
