r"""A TF-XLA softmax candidate: the attention probabilities kept, not recomputed.

Under XLA the TF-XLA `RealFormerEncoder`'s backward pass recomputes the
softmax's `P` from its logits; BertEncoderV2's keeps it. `kept_probs_softmax`
puts `P` behind an XLA optimization barrier and takes its gradient from that
kept `P` (TF's `SoftmaxGrad`), so the compiled step has BERT's structure. It
moves more bytes, so only a GPU can say whether it is faster (issue 49): it
is one variant of `gpu_suite.py`, row `xla_realformer-default-keptprobs`.

This script is `encoder_step.py`'s command line with the candidate in the
encoder; `--dump_hlo` names its dumps `realformer-<score dtype>-keptprobs_*`
(`gpu_prepare.sh` dumps it beside the others):

  python benchmarks/kept_probs.py --dump_hlo=.gpu_hlo/hlo --dump_models=realformer \
      --score_dtype=default --sizes=base --seq_lengths=512 \
      --dtypes=mixed_bfloat16 --tokens_per_batch=16384

Outside XLA it is `tf.nn.softmax` (there is no barrier to keep anything
behind, and TF's own kernel is faster).
"""

import os
import shutil
import tempfile
from unittest import mock

from absl import app
from absl import flags

import tensorflow as tf
# TF's XLA ops; `optimization_barrier` has no public alias in TF 2.20.
from tensorflow.compiler.tf2xla.python import xla

from realformer_tf.layers import residual_attention
from realformer_tf.layers import xla_kernels

import encoder_step  # pylint: disable=g-bad-import-order  (benchmarks/, beside this file)

FLAGS = flags.FLAGS


@tf.custom_gradient
def _kept(logits):
  probs, = xla.optimization_barrier(tf.nn.softmax(logits, axis=-1))

  def grad(d_probs):
    return (d_probs - tf.reduce_sum(d_probs * probs, -1, keepdims=True)) * probs

  return probs, grad


def kept_probs_softmax(logits, axis=-1):
  """`softmax(logits)` over the last axis; under XLA its `P` is kept for the
  backward pass instead of recomputed."""
  if axis not in (-1, len(logits.shape) - 1):
    raise ValueError(f"kept_probs_softmax: axis={axis}; only the last axis")
  if xla_kernels.in_xla_context():
    return _kept(logits)
  return tf.nn.softmax(logits, axis=axis)


def in_encoder():
  """Within: the tf_keras face's attention softmax is `kept_probs_softmax`
  (the core's ops namespace of `residual_attention`); restored after."""
  return mock.patch.object(residual_attention.TF_OPS, "softmax",
                           kept_probs_softmax)


def main(argv):
  """`encoder_step.main` with the candidate; dumps get "-keptprobs"."""
  with tempfile.TemporaryDirectory() as tmp, in_encoder():
    final, FLAGS.dump_hlo = FLAGS.dump_hlo, (tmp if FLAGS.dump_hlo else None)
    encoder_step.main(argv)
    for name in os.listdir(tmp):
      model, rest = name.split("_", 1)
      shutil.move(os.path.join(tmp, name),
                  os.path.join(final, f"{model}-keptprobs_{rest}"))


if __name__ == "__main__":
  app.run(main)
