"""XLA-only fast forms of two steps of residual attention.

Each computes what its reference form computes (same sums and gradients),
only inside an XLA cluster, where it fuses; outside, the reference is used.
"""

from typing import Sequence

import tensorflow as tf
import tf_keras

# [B, S, N, H] keys, [B, T, N, H] queries -> [B, N, T, S] scores (Keras'
# MultiHeadAttention equation for one attention axis).
SCORES_EQUATION = "bsnh,btnh->bnts"


def in_xla_context() -> bool:
  """Whether ops built now run inside an XLA cluster.

  Asked as tf_keras' BatchNormalization asks it: TensorFlow's exported form
  of the private `control_flow_util.GraphOrParentsInXlaContext`."""
  return tf.__internal__.get_enclosing_xla_context() is not None


def query_key_scores(query, key, score_dtype) -> tf.Tensor:
  """`query @ key^T` `[B, N, T, S]` in `score_dtype`, of `[B, *, N, H]` heads.

  The reference form is `cast(einsum(...))`. Under XLA with low-precision
  operands and float32 scores, one dot with a float32 result instead, so
  XLA folds the running sum's add into the GEMM (no separate convert).
  """
  if score_dtype == query.dtype:
    return tf.einsum(SCORES_EQUATION, key, query)
  if in_xla_context():
    return _dot_with_float32_output(tf.transpose(query, [0, 2, 1, 3]),
                                    tf.transpose(key, [0, 2, 1, 3]))
  return tf.cast(tf.einsum(SCORES_EQUATION, key, query), score_dtype)


@tf.custom_gradient
def _dot_with_float32_output(query, key):
  """`query @ key^T` of two low-precision `[B, N, *, H]` tensors, as float32.

  HLO `dot(bf16, bf16) -> f32`. Only XLA has a kernel for this op (TF's
  CPU/GPU kernels reject a float32 `Tout` for bfloat16 inputs). The gradient
  casts the float32 score gradient to the operands' dtype first, exactly what
  `cast(einsum(...))`'s gradient does.
  """
  scores = tf.raw_ops.BatchMatMulV3(x=query, y=key, Tout=tf.float32,
                                    adj_y=True)

  def grad(d_scores):
    d_scores = tf.cast(d_scores, query.dtype)
    return (tf.matmul(d_scores, key),
            tf.matmul(d_scores, query, transpose_a=True))

  return scores, grad


def fused_projection(inputs, dense_layers: Sequence[tf_keras.layers.Layer],
                     use_bias: bool) -> Sequence[tf.Tensor]:
  """The outputs of `EinsumDense` layers of one equation, from one einsum.

  For self-attention's Q, K and V: the `[dim, N, H]` kernels (and biases) are
  concatenated along the head size at call time, so one GEMM runs instead
  of three while checkpoints keep the three layers' weight names. Under XLA
  only: without it the concat and split are weight-sized copies.
  """
  outputs = tf.einsum(dense_layers[0].equation, inputs,
                      tf.concat([layer.kernel for layer in dense_layers], -1))
  if use_bias:
    outputs += tf.concat([layer.bias for layer in dense_layers], axis=-1)
  sizes = [layer.kernel.shape[-1] for layer in dense_layers]
  return tf.split(outputs, sizes, axis=-1)
