"""A candidate for the TF-XLA encoder's softmax: probabilities kept, not recomputed.

Issue 36 item 4 (TF-XLA `RealFormerEncoder` at or below `BertEncoderV2` in
the waited time). On an H200 (2026-11-28, benchmarks/README.md) our step
spends 46.3 ms in kernels against BERT's 44.7; 8.2 ms of ours are twelve
Triton fusions (0.68 ms each), the softmax's backward. The deviceless H200
compile (`gpu_aot.py --dump_dir`) says why: the forward fuses the softmax
with the dropout and writes only the dropped probabilities, so XLA's
backward fusion recomputes `P` from `QK^T + S_{l-1} + mask` (max, exp, sum,
divide: 2 x 201 MB read and two more row reductions) before the gradient's
own row sum. BertEncoderV2's forward writes `P` (a `triton_softmax`
fusion) and its backward reads it (about 0.4 ms a layer).

`kept_probs_softmax` puts `P` behind an XLA optimization barrier and takes
its gradient from that kept `P` (`(dP - sum(dP * P)) * P`, TF's
`SoftmaxGrad`), so the backward cannot recompute it: the compiled step then
has BERT's structure (a `triton_softmax` forward, an elementwise backward
and one row sum). It moves more bytes (deviceless: 113.8 GB against 105.3,
1,189 kernels against 1,178), so only a GPU can say whether it is faster;
`encoder_step.py --softmax=keptprobs` builds the step with it and
`gpu_prepare.sh` dumps it as `xla_realformer-default-keptprobs`, the row the
next GPU call runs beside `xla_realformer-default` and `xla_bert`. If it
wins there, it moves into `realformer_tf/layers/xla_kernels.py`, an XLA-only
fast form like the others; until then the encoder is unchanged.

Outside XLA it is `tf.nn.softmax` (there is no barrier to keep anything
behind, and TF's own kernel is faster).
"""

from unittest import mock

import tensorflow as tf
# TF's XLA ops; `optimization_barrier` has no public alias in TF 2.20.
from tensorflow.compiler.tf2xla.python import xla

from realformer_tf.layers import residual_attention
from realformer_tf.layers import xla_kernels


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
