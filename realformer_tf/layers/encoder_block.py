"""The RealFormer encoder block, and what every tf_keras block and network shares.

Arguments in Model Garden's names (docs/names.md), checked by
`core.arguments.check`, the same rule as the Keras 3 face's.
"""

from typing import Any, Optional, Tuple

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.projects.bigbird import recompute_grad
from realformer_tf.compat import tf_keras as compat_tf_keras
from realformer_tf.core import arguments
from realformer_tf.core import block as core_block
from realformer_tf.core import options
from realformer_tf.layers import hashed_dropout
from realformer_tf.layers import keras3_seam
from realformer_tf.layers import residual_attention as ra


def serialize_activation(activation) -> Any:
  """An activation (name or function) as Model Garden's layers write it."""
  return tf_utils.serialize_activation(tf_keras.activations.get(activation),
                                       use_legacy_format=True)


def serialize_initializer(initializer) -> Any:
  """An initializer (or None) as Model Garden's layers write it."""
  return tf_utils.serialize_initializer(initializer, use_legacy_format=True)


def take_aliases(owner: str, kwargs, inner_dim, inner_activation,
                 output_dropout, attention_dropout) -> Tuple[Any, ...]:
  """The four arguments, each replaced by its Model Garden other name in
  `kwargs` (popped), as `BertEncoderV2` does; a TypeError without inner_dim."""
  inner_dim = kwargs.pop("intermediate_size", inner_dim)
  if inner_dim is None:
    raise TypeError(f"{owner} needs inner_dim.")
  inner_activation = kwargs.pop("intermediate_activation", inner_activation)
  return (inner_dim, kwargs.pop("activation", inner_activation),
          kwargs.pop("dropout_rate", output_dropout),
          kwargs.pop("attention_dropout_rate", attention_dropout))


def recomputed(forward, hidden, tensors):
  """`forward(hidden, **tensors)` under Model Garden's `recompute_grad`, which
  takes and returns tensors only: None inputs and outputs are left out."""
  names = [name for name, value in tensors.items() if value is not None]

  def positional(hidden, *values):
    outputs = forward(hidden, **dict(zip(names, values)))
    return [x for x in outputs if x is not None]

  return recompute_grad.recompute_grad(positional)(
      tf.convert_to_tensor(hidden),
      *[tf.convert_to_tensor(tensors[name]) for name in names])


def block_width(name: str, input_shape, num_heads: int) -> int:
  """The known width of a `[batch, seq, width]` input that `num_heads` divide."""
  input_shape = tf.TensorShape(input_shape)
  return options.block_width(
      name, input_shape.as_list() if input_shape.rank else (), num_heads)


def layer_norm(name: str, epsilon: float) -> tf_keras.layers.Layer:
  # float32 for numeric stability under mixed precision, as Model Garden.
  return tf_keras.layers.LayerNormalization(
      name=name, axis=-1, epsilon=epsilon, dtype=tf.float32)


def attention_layer(name: str, input_shape, num_heads: int, initializer,
                    **kwargs) -> ra.ResidualMultiHeadAttention:
  """A `ResidualMultiHeadAttention` for `[batch, seq, width]` inputs, its
  weights created now (`compat.tf_keras.build_attention`)."""
  width = tf.TensorShape(input_shape)[-1]
  layer = ra.ResidualMultiHeadAttention(
      num_heads=num_heads, key_dim=width // num_heads,
      kernel_initializer=tf_utils.clone_initializer(initializer), name=name,
      **kwargs)
  compat_tf_keras.build_attention(layer, input_shape)
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


class BlockBase(keras3_seam.RejectsKeras3, tf_keras.layers.Layer):
  """The arguments both blocks take (Model Garden's names; documented on
  `RealFormerEncoderBlock`): checked, attributes, and in the config."""

  def __init__(self, num_attention_heads: int, inner_dim: Optional[int] = None,
               inner_activation="gelu", output_dropout: float = 0.0,
               attention_dropout: float = 0.0, norm_first: bool = False,
               norm_epsilon: float = 1e-12, kernel_initializer="glorot_uniform",
               residual_attention: str = "sum", layer_index: int = 0,
               score_dtype: str = "auto", recompute: bool = False, **kwargs):
    (inner_dim, inner_activation, output_dropout,
     attention_dropout) = take_aliases(type(self).__name__, kwargs, inner_dim,
                                       inner_activation, output_dropout,
                                       attention_dropout)
    arguments.check(
        type(self).__name__, num_attention_heads=num_attention_heads,
        inner_dim=inner_dim, output_dropout=output_dropout,
        attention_dropout=attention_dropout, norm_epsilon=norm_epsilon,
        residual_attention=residual_attention, layer_index=layer_index,
        score_dtype=score_dtype)
    super().__init__(**kwargs)
    # === Config === (Model Garden's TransformerEncoderBlock's names)
    self._num_heads = num_attention_heads
    self._inner_dim = inner_dim
    self._inner_activation = inner_activation
    self._output_dropout_rate = output_dropout
    self._attention_dropout_rate = attention_dropout
    self._norm_first = bool(norm_first)
    self._norm_epsilon = norm_epsilon
    self._kernel_initializer = tf_keras.initializers.get(kernel_initializer)
    self._residual_attention = residual_attention
    self._layer_index = layer_index
    self._score_dtype = score_dtype
    self._recompute = bool(recompute)

  def get_config(self):
    return {
        **super().get_config(),
        "num_attention_heads": self._num_heads,
        "inner_dim": self._inner_dim,
        "inner_activation": serialize_activation(self._inner_activation),
        "output_dropout": self._output_dropout_rate,
        "attention_dropout": self._attention_dropout_rate,
        "norm_first": self._norm_first,
        "norm_epsilon": self._norm_epsilon,
        "kernel_initializer": serialize_initializer(self._kernel_initializer),
        "residual_attention": self._residual_attention,
        "layer_index": self._layer_index,
        "score_dtype": self._score_dtype,
        "recompute": self._recompute,
    }


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerEncoderBlock(BlockBase):
  """Transformer encoder block: `(hidden, scores) -> (hidden, scores)`.

  Post-LN (BERT) by default, Pre-LN with `norm_first=True`. Sub-layers keep
  the attribute and weight names of Model Garden's `TransformerEncoderBlock`,
  so checkpoints of one restore into the other.

  Args:
    num_attention_heads, inner_dim, inner_activation, output_dropout,
      attention_dropout, norm_first, norm_epsilon, kernel_initializer,
      **kwargs: As Model Garden's `TransformerEncoderBlock`.
    residual_attention, layer_index, score_dtype: As
      `ResidualMultiHeadAttention`.
    recompute: Recompute the forward pass during backprop, keeping only the
      inputs (bigbird's `recompute_grad`, stateless dropout).

  Example:

  >>> block = RealFormerEncoderBlock(num_attention_heads=2, inner_dim=32,
  ...                                inner_activation="gelu")
  >>> x = tf.random.normal([2, 6, 16])
  >>> x, scores = block(x)               # first layer: no scores yet
  >>> x, scores = block(x, scores=scores)
  >>> scores.shape
  TensorShape([2, 2, 6, 6])
  """

  def build(self, input_shape):
    width = block_width(self.name, input_shape, self._num_heads)
    self._attention_layer = attention_layer(
        "self_attention", input_shape, self._num_heads,
        self._kernel_initializer, dropout=self._attention_dropout_rate,
        residual_attention=self._residual_attention,
        layer_index=self._layer_index, score_dtype=self._score_dtype,
        recompute=self._recompute)
    # Weightless, so checkpoints are unaffected by the choice.
    self._attention_dropout = hashed_dropout.dropout_layer(
        self._output_dropout_rate, self._recompute)
    self._attention_layer_norm = layer_norm("self_attention_layer_norm",
                                            self._norm_epsilon)
    (self._intermediate_dense, self._intermediate_activation_layer,
     self._output_dense) = feed_forward(width, self._inner_dim,
                                        self._inner_activation,
                                        self._kernel_initializer)
    self._output_dropout = hashed_dropout.dropout_layer(
        self._output_dropout_rate, self._recompute)
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
    """`(hidden, scores)`, or `(hidden, scores, probs)`; `scores` in is the
    previous block's running sum (None in the first), `attention_mask`
    `[batch, seq, seq]` and/or `attention_bias` `[batch, 1, 1 or seq, seq]`;
    `output_range`: outputs for the first positions only."""
    forward = lambda hidden, **tensors: self._forward(
        hidden, **tensors, training=training, output_range=output_range,
        return_attention_probs=return_attention_probs)
    tensors = dict(scores=scores, attention_mask=attention_mask,
                   attention_bias=attention_bias)
    if not (self._recompute and training):
      return forward(hidden, **tensors)
    return tuple(recomputed(forward, hidden, tensors))

  def _forward(self, hidden, scores=None, attention_mask=None,
               attention_bias=None, training=None, output_range=None,
               return_attention_probs=False):
    crop = None
    if output_range:
      crop = lambda x: x[:, :output_range, :]
      if attention_mask is not None:
        attention_mask = attention_mask[:, :output_range, :]
      if scores is not None:
        scores = scores[:, :, :output_range, :]
      if attention_bias is not None and attention_bias.shape[2] != 1:
        attention_bias = attention_bias[:, :, :output_range, :]
    results = {}

    def attention(inputs):
      output, results["scores"], results["probs"] = self._attention_layer(
          query=crop(inputs) if crop else inputs,
          value=inputs if crop else None, attention_mask=attention_mask,
          prev_scores=scores, training=training, return_attention_probs=True,
          attention_bias=attention_bias)
      return output

    hidden = core_block.residual_sublayers(
        ra.TF_OPS, hidden,
        core_block.encoder_sublayers(self, attention, training),
        self._norm_first, crop)
    if return_attention_probs:
      return hidden, results["scores"], results["probs"]
    return hidden, results["scores"]
