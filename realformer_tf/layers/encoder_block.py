"""The RealFormer encoder block, and the config and sub-layers every block shares."""

from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.projects.bigbird import recompute_grad
from official.projects.bigbird import recomputing_dropout
from realformer_tf import utils
from realformer_tf.layers import keras3_seam
from realformer_tf.layers import residual_attention as ra


def serialize_activation(activation) -> Any:
  """An activation (name or function) as Model Garden's layers write it."""
  return tf_utils.serialize_activation(tf_keras.activations.get(activation),
                                       use_legacy_format=True)


class ArgumentsConfigLayer(tf_keras.layers.Layer):
  """A layer whose config is its constructor's arguments (networks/ use it).

  A subclass' `__init__` normalizes its arguments, then passes every one of
  them, named, in a dict (plus the base layer's `kwargs`) to this
  constructor; `get_config` returns them after the base layer's config,
  initializers and activations serialized as Model Garden's layers do.
  """

  def __init__(self, arguments: Dict[str, Any]):
    arguments = {k: v for k, v in arguments.items()
                 if k not in ("self", "__class__")}
    super().__init__(**arguments.pop("kwargs"))
    self._config = arguments

  def __call__(self, *args, **kwargs):
    keras3_seam.reject_keras3_arguments(self, args, kwargs)
    return super().__call__(*args, **kwargs)

  def get_config(self):
    config = super().get_config()
    for key, value in self._config.items():
      if isinstance(value, tf_keras.initializers.Initializer):
        value = tf_utils.serialize_initializer(value, use_legacy_format=True)
      elif key.endswith("activation"):
        value = serialize_activation(value)
      config[key] = value
    return config


def block_width(name: str, input_shape, num_heads: int) -> int:
  """The known width of a `[batch, seq, width]` input that `num_heads` divide."""
  input_shape = tf.TensorShape(input_shape)
  if input_shape.rank != 3 or input_shape[-1] is None:
    raise ValueError(f"{name}: expects hidden of shape [batch, seq, width] "
                     f"with a known width, got {input_shape}.")
  utils.check_heads_divide(input_shape[-1], num_heads, name)
  return input_shape[-1]


def layer_norm(name: str, epsilon: float) -> tf_keras.layers.Layer:
  # float32 for numeric stability under mixed precision, as Model Garden.
  return tf_keras.layers.LayerNormalization(
      name=name, axis=-1, epsilon=epsilon, dtype=tf.float32)


def attention_layer(name: str, input_shape, num_heads: int, initializer,
                    **kwargs) -> ra.ResidualMultiHeadAttention:
  """A `ResidualMultiHeadAttention` for `[batch, seq, width]` inputs.

  Its weights are created now rather than on first call, so that Keras'
  SavedModel loader restores them like every other weight.
  """
  width = tf.TensorShape(input_shape)[-1]
  layer = ra.ResidualMultiHeadAttention(
      num_heads=num_heads, key_dim=width // num_heads,
      kernel_initializer=tf_utils.clone_initializer(initializer), name=name,
      **kwargs)
  layer._build_from_signature(  # pylint: disable=protected-access
      query=input_shape, value=input_shape)
  return layer


def feed_forward(width: int, inner_dim: int, activation, initializer
                 ) -> Tuple[tf_keras.layers.Layer, ...]:
  """`(intermediate, activation, output)` layers of the feed-forward part."""
  policy = tf_keras.mixed_precision.global_policy()
  if policy.name == "mixed_bfloat16":
    policy = tf.float32  # As Model Garden: bf16 GELU hurts convergence.
  dense = lambda size, name: tf_keras.layers.EinsumDense(
      "abc,cd->abd", output_shape=(None, size), bias_axes="d",
      kernel_initializer=tf_utils.clone_initializer(initializer), name=name)
  return (dense(inner_dim, "intermediate"),
          tf_keras.layers.Activation(activation, dtype=policy),
          dense(width, "output"))


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerEncoderBlock(tf_keras.layers.Layer):
  """Transformer encoder block: `(hidden, scores) -> (hidden, scores)`.

  Post-LN (BERT, the paper's backbone) by default, Pre-LN with
  `norm_first=True`; `residual_attention` picks RealFormer ("sum"/"mean") or
  plain attention ("none"). Sub-layers carry the same attribute and weight
  names as Model Garden's `TransformerEncoderBlock`, so checkpoints of one
  restore into the other.

  Args:
    num_attention_heads, inner_dim, inner_activation, output_dropout (BERT's
      `hidden_dropout_prob`), attention_dropout, norm_first, norm_epsilon,
      kernel_initializer, **kwargs: As Model Garden's `TransformerEncoderBlock`.
    residual_attention: "sum", "mean" or "none"; see
      `ResidualMultiHeadAttention`.
    layer_index: 0-based depth of the block; used by "mean".
    score_dtype: "float32" or "compute"; see `ResidualMultiHeadAttention`.
    recompute: Recompute the block's forward pass during backprop, keeping
      only its inputs, so long sequences fit: Model Garden's XLA-compatible
      `official/projects/bigbird/recompute_grad.py` with its stateless
      `RecomputingDropout`, whose masks repeat in the recomputation.

  Example:

  >>> block = RealFormerEncoderBlock(num_attention_heads=2, inner_dim=32,
  ...                                inner_activation="gelu")
  >>> x = tf.random.normal([2, 6, 16])
  >>> x, scores = block(x)               # first layer: no scores yet
  >>> x, scores = block(x, scores=scores)
  >>> scores.shape
  TensorShape([2, 2, 6, 6])
  """

  def __init__(self, num_attention_heads: int, inner_dim: int,
               inner_activation: Any = "gelu", output_dropout: float = 0.0,
               attention_dropout: float = 0.0, norm_first: bool = False,
               norm_epsilon: float = 1e-12,
               kernel_initializer: Any = "glorot_uniform",
               residual_attention: str = "sum", layer_index: int = 0,
               score_dtype: str = "float32", recompute: bool = False,
               **kwargs):
    super().__init__(**kwargs)
    # Model Garden's TransformerEncoderBlock attribute names.
    self._num_heads = num_attention_heads
    self._inner_dim = inner_dim
    self._inner_activation = inner_activation
    self._output_dropout_rate = output_dropout
    self._attention_dropout_rate = attention_dropout
    self._norm_first = norm_first
    self._norm_epsilon = norm_epsilon
    self._kernel_initializer = tf_keras.initializers.get(kernel_initializer)
    self._residual_attention = ra.validate_residual_attention(
        residual_attention)
    self._layer_index = layer_index
    self._score_dtype = ra.validate_score_dtype(score_dtype)
    self._recompute = bool(recompute)

  def __call__(self, *args, **kwargs):
    keras3_seam.reject_keras3_arguments(self, args, kwargs)
    return super().__call__(*args, **kwargs)

  def get_config(self):
    config = super().get_config()
    config.update(
        num_attention_heads=self._num_heads, inner_dim=self._inner_dim,
        inner_activation=serialize_activation(self._inner_activation),
        output_dropout=self._output_dropout_rate,
        attention_dropout=self._attention_dropout_rate,
        norm_first=self._norm_first, norm_epsilon=self._norm_epsilon,
        kernel_initializer=tf_utils.serialize_initializer(
            self._kernel_initializer, use_legacy_format=True),
        residual_attention=self._residual_attention,
        layer_index=self._layer_index, score_dtype=self._score_dtype,
        recompute=self._recompute)
    return config

  def build(self, input_shape):
    width = block_width(self.name, input_shape, self._num_heads)
    self._attention_layer = attention_layer(
        "self_attention", input_shape, self._num_heads,
        self._kernel_initializer, dropout=self._attention_dropout_rate,
        residual_attention=self._residual_attention,
        layer_index=self._layer_index, score_dtype=self._score_dtype,
        recompute=self._recompute)
    # Weightless, so checkpoints are unaffected by the choice.
    dropout = (recomputing_dropout.RecomputingDropout if self._recompute
               else tf_keras.layers.Dropout)
    self._attention_dropout = dropout(self._output_dropout_rate)
    self._attention_layer_norm = layer_norm("self_attention_layer_norm",
                                            self._norm_epsilon)
    (self._intermediate_dense, self._intermediate_activation_layer,
     self._output_dense) = feed_forward(width, self._inner_dim,
                                        self._inner_activation,
                                        self._kernel_initializer)
    self._output_dropout = dropout(self._output_dropout_rate)
    self._output_layer_norm = layer_norm("output_layer_norm",
                                         self._norm_epsilon)
    super().build(input_shape)

  def call(self,
           hidden,
           scores=None,
           attention_mask=None,
           training=None,
           output_range: Optional[int] = None,
           return_attention_probs: bool = False,
           attention_bias=None):
    """`(hidden, scores)`, or `(hidden, scores, probs)`.

    `hidden` `[batch, seq, width]`; `scores` the previous block's running sum
    `[batch, heads, seq, seq]` (None in the first block); `attention_mask`
    `[batch, seq, seq]` (1 = attend) and/or `attention_bias` `[batch, 1, 1 or
    seq, seq]` (`ra.attention_bias_from_mask`); `output_range`: outputs for
    the first positions only (e.g. [CLS] in the last layer).
    """
    if not (self._recompute and training):
      return self._forward(hidden, scores, attention_mask, attention_bias,
                           training, output_range, return_attention_probs)
    # recompute_grad differentiates tensor arguments only: pass the present
    # ones positionally and rebuild the call inside.
    present = [t is not None for t in (scores, attention_mask, attention_bias)]
    tensors = [tf.convert_to_tensor(t)
               for t in (scores, attention_mask, attention_bias)
               if t is not None]

    def forward(hidden, *tensors):
      it = iter(tensors)
      args = [next(it) if p else None for p in present]
      return self._forward(hidden, *args, training=training,
                           output_range=output_range,
                           return_attention_probs=return_attention_probs)

    return recompute_grad.recompute_grad(forward)(
        tf.convert_to_tensor(hidden), *tensors)

  def _forward(self, hidden, scores, attention_mask, attention_bias, training,
               output_range, return_attention_probs):
    norm_first = self._norm_first
    source = hidden
    query = hidden
    if norm_first:
      hidden = self._attention_layer_norm(hidden)
      query = hidden
    if output_range:
      source = source[:, :output_range, :]
      query = hidden[:, :output_range, :]
      if attention_mask is not None:
        attention_mask = attention_mask[:, :output_range, :]
      if scores is not None:
        scores = scores[:, :, :output_range, :]
      if attention_bias is not None and attention_bias.shape[2] != 1:
        attention_bias = attention_bias[:, :, :output_range, :]

    attention_output, scores, probs = self._attention_layer(
        query=query, value=None if query is hidden else hidden,
        attention_mask=attention_mask,
        prev_scores=scores, training=training, return_attention_probs=True,
        attention_bias=attention_bias)
    attention_output = self._attention_dropout(attention_output,
                                               training=training)
    if norm_first:
      attention_output = source + attention_output
      residual = attention_output
      attention_output = self._output_layer_norm(attention_output)
    else:
      attention_output = self._attention_layer_norm(
          tf.cast(source, attention_output.dtype) + attention_output)
      residual = attention_output

    inner = self._intermediate_dense(attention_output)
    inner = self._intermediate_activation_layer(inner)
    layer_output = self._output_dense(inner)
    layer_output = self._output_dropout(layer_output, training=training)
    if norm_first:
      layer_output = residual + tf.cast(layer_output, residual.dtype)
    else:
      # LayerNorm output is float32 under mixed precision; add in float32.
      layer_output = self._output_layer_norm(
          tf.cast(layer_output, tf.float32) + residual)
    if return_attention_probs:
      return layer_output, scores, probs
    return layer_output, scores
