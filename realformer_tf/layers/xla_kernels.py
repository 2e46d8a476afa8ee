"""XLA-only fast forms of two steps of residual attention.

Each computes what its reference form computes (same sums and gradients),
only inside an XLA cluster, where it fuses; outside, the reference is used.
"""

from typing import Sequence

import tensorflow as tf
import tf_keras

from realformer_tf.core import attention as core_attention

SCORES_EQUATION = core_attention.SCORES_EQUATION


def in_xla_context() -> bool:
  """Whether ops built now run inside an XLA cluster (as tf_keras'
  BatchNormalization asks it)."""
  return tf.__internal__.get_enclosing_xla_context() is not None


def query_key_scores(query, key, score_dtype) -> tf.Tensor:
  """`query @ key^T` `[B, N, T, S]` in `score_dtype`, of `[B, *, N, H]` heads:
  `cast(einsum(...))`, or under XLA one dot with a float32 result, so XLA
  folds the running sum's add into the GEMM."""
  if score_dtype == query.dtype:
    return tf.einsum(SCORES_EQUATION, key, query)
  if in_xla_context():
    return _dot_with_float32_output(tf.transpose(query, [0, 2, 1, 3]),
                                    tf.transpose(key, [0, 2, 1, 3]))
  return tf.cast(tf.einsum(SCORES_EQUATION, key, query), score_dtype)


@tf.custom_gradient
def _dot_with_float32_output(query, key):
  """`query @ key^T` of two low-precision `[B, N, *, H]` tensors, as float32
  (XLA only: TF's kernels reject a float32 `Tout` for bfloat16). The
  gradient is `cast(einsum(...))`'s."""
  scores = tf.raw_ops.BatchMatMulV3(x=query, y=key, Tout=tf.float32,
                                    adj_y=True)

  def grad(d_scores):
    d_scores = tf.cast(d_scores, query.dtype)
    return (tf.matmul(d_scores, key),
            tf.matmul(d_scores, query, transpose_a=True))

  return scores, grad


def fused_projection(inputs, dense_layers: Sequence[tf_keras.layers.Layer],
                     use_bias: bool) -> Sequence[tf.Tensor]:
  """The outputs of `EinsumDense` layers of one equation (self-attention's Q,
  K, V) from one einsum of their concatenated kernels: one GEMM, the weight
  names kept. Under XLA only (outside, the concat is a weight-sized copy)."""
  outputs = tf.einsum(dense_layers[0].equation, inputs,
                      tf.concat([layer.kernel for layer in dense_layers], -1))
  if use_bias:
    outputs += tf.concat([layer.bias for layer in dense_layers], axis=-1)
  sizes = [layer.kernel.shape[-1] for layer in dense_layers]
  return tf.split(outputs, sizes, axis=-1)
