r"""What `score_dtype="compute"` costs in accuracy, per mixed-precision policy.

For each policy (mixed_bfloat16, mixed_float16), residual mode ("sum",
"mean") and depth (12, 24, 36 layers), builds one random "trained-like"
RealFormer encoder three times with the same weights: under the float32
policy (reference), under the mixed policy with `score_dtype="float32"` and
with `score_dtype="compute"`, and prints max |delta| of the attention
probabilities (over all layers) and of `sequence_output`:

  mixed/f32: mixed policy, float32 running sum, vs the float32 policy (the
             error mixed precision has anyway);
  compute:   mixed policy, running sum in the compute dtype, vs the float32
             policy;
  max|S|:    largest running score sum (float16's largest finite is 65504).

"Trained-like": random weights (BERT init, stddev 0.02) except the query and
key kernels, drawn so that each layer's own logits have a standard deviation
of about `--logit_std` (peaky attention, as in trained BERT), not the ~0 of a
fresh init.

usage:
  python benchmarks/score_dtype_accuracy.py                 # the README table
  python benchmarks/score_dtype_accuracy.py --layers=12 --policies=mixed_bfloat16
"""

import itertools
import math

import numpy as np
import tensorflow as tf
import tf_keras

from realformer_tf.networks import encoder as encoder_lib

import timing  # pylint: disable=g-bad-import-order  (benchmarks/)


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--policies", type=timing.str_list,
                 default="mixed_bfloat16,mixed_float16")
  p.add_argument("--modes", type=timing.str_list, default="sum,mean",
                 help="residual_attention modes.")
  p.add_argument("--layers", type=timing.str_list, default="12,24,36",
                 help="Depths.")
  p.add_argument("--hidden_size", type=int, default=256)
  p.add_argument("--num_heads", type=int, default=4)
  p.add_argument("--seq_length", type=int, default=128)
  p.add_argument("--batch_size", type=int, default=2)
  p.add_argument("--logit_std", type=float, default=3.0,
                 help="Std of each layer's own logits.")
  return p


def _encoder(args, policy, mode, layers, score_dtype, inputs):
  """Builds (and calls once, which builds the blocks) under `policy`."""
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    encoder = encoder_lib.RealFormerEncoder(
        vocab_size=1000, hidden_size=args.hidden_size, num_layers=layers,
        num_attention_heads=args.num_heads,
        inner_dim=4 * args.hidden_size, max_sequence_length=args.seq_length,
        type_vocab_size=2, residual_attention=mode, score_dtype=score_dtype,
        return_attention_scores=True)
    encoder(inputs)
    return encoder
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")


def _inputs(args):
  rng = np.random.default_rng(0)
  shape = (args.batch_size, args.seq_length)
  ids = rng.integers(1, 1000, size=shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[:, args.seq_length - args.seq_length // 8:] = 0
  return dict(input_word_ids=ids * mask, input_mask=mask,
              input_type_ids=np.zeros(shape, np.int32))


def _trained_like(args, encoder):
  """Q/K kernels with logit std ~ args.logit_std on LayerNormed inputs."""
  rng = np.random.default_rng(1)
  # score = q.k / sqrt(d) with q, k ~ N(0, hidden * s^2) per entry: its std is
  # hidden * s^2, so s = sqrt(logit_std / hidden).
  stddev = math.sqrt(args.logit_std / args.hidden_size)
  for block in encoder.transformer_layers:
    att = block._attention_layer  # pylint: disable=protected-access
    for dense in (att._query_dense, att._key_dense):  # pylint: disable=protected-access
      kernel = dense.kernel
      kernel.assign(rng.normal(0, stddev, kernel.shape).astype(np.float32))


def _row(args, policy, mode, layers):
  inputs = _inputs(args)
  ref = _encoder(args, "float32", mode, layers, "float32", inputs)
  _trained_like(args, ref)
  want = ref(inputs)
  row = dict(policy=policy, mode=mode, layers=layers)
  for score_dtype in ("float32", "compute"):
    enc = _encoder(args, policy, mode, layers, score_dtype, inputs)
    enc.set_weights(ref.get_weights())
    got = enc(inputs)
    f32 = lambda t: tf.cast(t, tf.float32).numpy()
    probs = max(np.nanmax(np.abs(f32(a) - f32(b)))
                for a, b in zip(want["attention_scores"], got["attention_scores"]))
    seq = np.abs(f32(want["sequence_output"]) - f32(got["sequence_output"]))
    finite = all(np.all(np.isfinite(f32(t))) for t in tf.nest.flatten(got))
    row[score_dtype] = dict(probs=probs, seq=np.nanmax(seq), finite=finite)
  row["max_s"] = max(np.abs(s.numpy()).max() for s in want["residual_scores"])
  return row


def main():
  args = _parser().parse_args()
  print(f"hidden {args.hidden_size}, {args.num_heads} heads, seq "
        f"{args.seq_length}, batch {args.batch_size}, logit std "
        f"{args.logit_std}; max |delta| vs the float32 policy\n")
  print("| policy | mode | layers | probs mixed/f32 | probs compute | "
        "seq_output mixed/f32 | seq_output compute | max abs S | finite "
        "(compute) |")
  print("|---|---|---|---|---|---|---|---|---|")
  for policy, mode, layers in itertools.product(
      args.policies, args.modes, [int(l) for l in args.layers]):
    r = _row(args, policy, mode, layers)
    print(f"| {policy} | {mode} | {layers} | {r['float32']['probs']:.4f} | "
          f"{r['compute']['probs']:.4f} | {r['float32']['seq']:.4f} | "
          f"{r['compute']['seq']:.4f} | {r['max_s']:.0f} | "
          f"{r['compute']['finite']} |", flush=True)
    tf_keras.backend.clear_session()


if __name__ == "__main__":
  main()
