"""Multi-head attention with RealFormer's residual attention scores.

The tf_keras face of `core.attention`'s Eq. 5, on TensorFlow ops (`TF_OPS`).
`score_dtype` picks the dtype of `S_l` under mixed precision (docs/layers.md).
"""

import types
from typing import Callable, Tuple

import tensorflow as tf
import tf_keras

from official.nlp.modeling.layers import attention as mg_attention
from realformer_tf.core import arguments
from realformer_tf.core import attention as core_attention
from realformer_tf.core import options
from realformer_tf.layers import hashed_dropout
from realformer_tf.layers import keras3_seam
from realformer_tf.layers import xla_kernels

RESIDUAL_MODES = options.RESIDUAL_MODES
validate_residual_attention = options.validate_residual_attention
validate_score_dtype = options.validate_score_dtype

# The core's ops namespace (`keras.ops` names) in TensorFlow ops.
TF_OPS = types.SimpleNamespace(
    multiply=tf.multiply, add=tf.add, subtract=tf.subtract,
    divide=tf.divide, cast=tf.cast, einsum=tf.einsum,
    stop_gradient=tf.stop_gradient, expand_dims=tf.expand_dims,
    less_equal=tf.less_equal, arange=tf.range,
    max=lambda x, axis, keepdims: tf.reduce_max(x, axis, keepdims),
    softmax=lambda x, axis: tf.nn.softmax(x, axis=axis),
    dtype=lambda x: x.dtype.name,
    query_key_scores=xla_kernels.query_key_scores,
    # And `analysis.metrics`' names.
    where=tf.where, log=tf.math.log, not_equal=tf.not_equal,
    maximum=tf.maximum, abs=tf.abs, stack=tf.stack, transpose=tf.transpose,
    sum=lambda x, axis=None, keepdims=False: tf.reduce_sum(x, axis, keepdims))


def resolve_score_dtype(score_dtype: str, compute_dtype) -> str:
  """The dtype name of the running score sum for a layer computing in `compute_dtype`."""
  return options.resolve_score_dtype(score_dtype,
                                     tf.as_dtype(compute_dtype).name)


def attention_bias_from_mask(mask, dtype) -> tf.Tensor:
  """0/1 attention mask (1 = attend) -> additive bias of `dtype` (0 or very
  negative). Built once per stack at `[batch, 1, 1, to_len]`, it fuses into
  the softmax under XLA."""
  dtype = tf.as_dtype(dtype).name
  return core_attention.mask_bias(TF_OPS, mask, dtype,
                                  options.mask_adder(dtype))


def residual_dot_product_attention(
    query, key, value, prev_scores=None, bias=None, mode: str = "sum",
    layer_index: int = 0, score_dtype="float32",
    dropout: Callable[[tf.Tensor], tf.Tensor] = tf.identity
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """`core.attention.residual_dot_product_attention` in TensorFlow ops."""
  return core_attention.residual_dot_product_attention(
      TF_OPS, query, key, value, prev_scores, bias, mode=mode,
      layer_index=layer_index, score_dtype=tf.as_dtype(score_dtype).name,
      dropout=dropout)


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class ResidualMultiHeadAttention(keras3_seam.RejectsKeras3,
                                 mg_attention.CachedAttention):
  """`MultiHeadAttention` that takes and returns pre-softmax attention scores.

  Model Garden's `CachedAttention` with its weight names, so checkpoints of
  either load as is.

  Args:
    num_heads, key_dim, **kwargs: As `tf_keras.layers.MultiHeadAttention`,
      but `attention_axes` must be None (the sequence axis).
    residual_attention: "sum" (RealFormer), "mean" (softmax of `S_l /
      (layer_index + 1)`) or "none" (plain attention).
    layer_index: 0-based depth of this layer in its stack; used by "mean".
    score_dtype: "auto", "float32" or "compute" (`core.options`).
    recompute: Model Garden's `RecomputingDropout`, whose masks repeat in
      `recompute_grad`'s second forward pass.

  Call arguments: Keras' (`query`, `value`, `key`, `attention_mask` `[batch,
  from_len, to_len]`, `training`, `use_causal_mask`), not
  `return_attention_scores` nor ragged inputs, and:
    prev_scores: `[batch, num_heads, from_len, to_len]` running sum of the
      previous layer, or None.
    return_attention_probs: Also return the softmax probabilities.
    attention_bias: Additive bias broadcastable to the scores
      (`attention_bias_from_mask`, built once per stack).
    cache, decode_loop_step: As `CachedAttention` (updated in place).
  Masks enter the softmax only.

  Returns:
    `(output [batch, from_len, dim], scores)` or `(output, scores, probs)`;
    `scores`: the unmasked running sum (of `score_dtype`).

  Example:

  >>> layer = ResidualMultiHeadAttention(num_heads=2, key_dim=8)
  >>> x = tf.random.normal([3, 5, 16])
  >>> out, scores = layer(x, x)
  >>> out, scores = layer(x, x, prev_scores=scores)
  >>> out.shape, scores.shape
  (TensorShape([3, 5, 16]), TensorShape([3, 2, 5, 5]))
  """

  def __init__(self, num_heads: int, key_dim: int,
               residual_attention: str = "sum", layer_index: int = 0,
               score_dtype: str = "auto", recompute: bool = False, **kwargs):
    axes = kwargs.get("attention_axes")
    if axes is not None and tuple(tf.nest.flatten(axes)) != (1,):
      # The running sum has one attention axis, the sequence.
      raise ValueError(
          f"ResidualMultiHeadAttention attends over the sequence axis only; "
          f"attention_axes must be None, got {kwargs['attention_axes']!r}.")
    arguments.check(type(self).__name__, residual_attention=residual_attention,
                    layer_index=layer_index, score_dtype=score_dtype)
    super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
    self.residual_attention = residual_attention
    self.layer_index = layer_index
    self.score_dtype = score_dtype
    self.recompute = bool(recompute)
    self._probs_dropout = hashed_dropout.dropout_layer(
        self._dropout, self.recompute, dtype=self.dtype_policy)

  def get_config(self):
    return {
        **super().get_config(),
        "residual_attention": self.residual_attention,
        "layer_index": self.layer_index,
        "score_dtype": self.score_dtype,
        "recompute": self.recompute,
    }

  def call(self, query, value=None, key=None, attention_mask=None,
           prev_scores=None, training=None, return_attention_probs=False,
           attention_bias=None, use_causal_mask=False, cache=None,
           decode_loop_step=None, return_attention_scores=False):
    if return_attention_scores:
      raise ValueError(
          f"{self.name}: return_attention_scores is not supported: the layer "
          "returns (output, scores) always, where scores is the pre-softmax "
          "running sum; pass return_attention_probs=True for the softmax "
          "probabilities.")
    if isinstance(query, tf.RaggedTensor) or isinstance(value, tf.RaggedTensor):
      raise ValueError(f"{self.name}: ragged inputs are not supported.")
    self._check_rank("query", query, 3, "[batch, from_len, dim]")
    self._check_rank("attention_mask", attention_mask, 3,
                     "[batch, from_len, to_len]")
    self._check_rank("attention_bias", attention_bias, 4, "(broadcastable to "
                     "[batch, num_heads, from_len, to_len])")
    # `value is query` only survives without mixed precision: Keras casts
    # the first argument alone.
    self_attention = (value is None or value is query) and key is None
    if value is None:
      value = query
    if not self._built_from_signature:
      self._build_from_signature(query=query, value=value, key=key)
    if key is None:
      key = value
    score_dtype = resolve_score_dtype(self.score_dtype, self.compute_dtype)
    # With a cache the keys start before the queries: causal mask below.
    attention_mask = self._compute_attention_mask(
        query, value, key=key, attention_mask=attention_mask,
        use_causal_mask=use_causal_mask and cache is None)

    dense = (self._query_dense, self._key_dense, self._value_dense)
    # The first call builds the three layers (their weights' names).
    if (self_attention and self._activity_regularizer is None and
        xla_kernels.in_xla_context() and all(layer.built for layer in dense)):
      query, key, value = xla_kernels.fused_projection(query, dense,
                                                       self._use_bias)
    else:
      query = self._query_dense(query)    # [B, T, N, H]
      key = self._key_dense(key)          # [B, S, N, H]
      value = self._value_dense(value)    # [B, S, N, H]
    if cache is not None:
      key, value = self._update_cache(key, value, cache, decode_loop_step)
      if use_causal_mask:
        attention_mask = _offset_causal_mask(query, key, attention_mask,
                                             decode_loop_step)
    biases = []
    if attention_mask is not None:
      # [B, T, S] -> [B, 1, T, S]; the mask never enters `scores`.
      biases.append(attention_bias_from_mask(
          tf.expand_dims(attention_mask, axis=1), score_dtype))
    if attention_bias is not None:
      biases.append(tf.cast(attention_bias, score_dtype))
    if prev_scores is not None and self.residual_attention != "none":
      self._check_prev_scores(prev_scores, query, key)
    output, scores, probs = residual_dot_product_attention(
        query, key, value, prev_scores=prev_scores,
        bias=tf.add_n(biases) if biases else None,
        mode=self.residual_attention, layer_index=self.layer_index,
        score_dtype=score_dtype,
        dropout=lambda probs: self._probs_dropout(probs, training=training))
    output = self._output_dense(output)
    if return_attention_probs:
      return output, scores, probs
    return output, scores

  def _check_rank(self, name, tensor, rank, shape):
    if tensor is not None and tf.TensorShape(tensor.shape).rank != rank:
      raise ValueError(f"{self.name}: {name} must have rank {rank} {shape}, "
                       f"got shape {tensor.shape}.")

  def _check_prev_scores(self, prev_scores, query, key):
    """Raises a ValueError naming both shapes when they cannot be added."""
    prev_shape = tf.TensorShape(prev_scores.shape)
    if prev_shape.rank is not None:
      self._check_rank("prev_scores", prev_scores, 4,
                       "[batch, num_heads, from_len, to_len]")
    shape = tf.TensorShape([query.shape[0], query.shape[2], query.shape[1],
                            key.shape[1]])
    if not prev_shape.is_compatible_with(shape):
      raise ValueError(
          f"{self.name}: prev_scores has shape {prev_shape}, but this layer's "
          f"scores have shape {shape} [batch, num_heads, from_len, to_len].")


def _offset_causal_mask(query, key, attention_mask, decode_loop_step):
  """Boolean `[B or 1, T, S]` causal mask AND `attention_mask`, the first
  query at `decode_loop_step` (padded decoding) or after the cached keys."""
  query_len, key_len = tf.shape(query)[1], tf.shape(key)[1]
  offset = (key_len - query_len if decode_loop_step is None
            else decode_loop_step)
  causal = core_attention.causal_mask(TF_OPS, query_len, key_len, offset)
  if attention_mask is None:
    return causal
  return tf.cast(attention_mask, tf.bool) & causal
