"""Keras 3 RealFormer encoder block: `(hidden, scores) -> (hidden, scores)`.

The tf_keras block's sub-layers and weight names in keras-hub's argument
names and dtype rules (LayerNorm and activation in the compute dtype).
"""

import keras
from keras import ops
from keras_hub.src.utils import keras_utils

from realformer_tf.core import block as core_block
from realformer_tf.core import options
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import residual_attention as ra

# GELU's tanh form, keras-hub's BERT's and our tf_keras encoder's; Keras'
# "gelu" is the exact (erf) form.
GELU_APPROXIMATE = "gelu_approximate"


def get_activation(name):
  """A Keras activation from its name; "gelu_approximate" = GELU's tanh form
  (keras-hub's `gelu_approximate`, which `keras.activations.get` lacks)."""
  if name == GELU_APPROXIMATE:
    return keras_utils.gelu_approximate
  try:
    return keras.activations.get(name)
  except ValueError:
    raise ValueError(
        f"activation={name!r} is not a Keras activation name "
        f"(e.g. {GELU_APPROXIMATE!r}, 'gelu', 'relu').") from None


def clone_initializer(initializer):
  """A fresh copy, so sub-layers don't share one (stateless, same draws)
  initializer, as `keras.layers.MultiHeadAttention` does."""
  return initializer.__class__.from_config(initializer.get_config())


def attention_layer(block, name, query_shape, value_shape, residual=True):
  """A built `ResidualMultiHeadAttention` of `block`'s arguments."""
  layer = ra.ResidualMultiHeadAttention(
      num_heads=block.num_heads, key_dim=query_shape[-1] // block.num_heads,
      dropout=block.attention_dropout,
      use_bias=getattr(block, "use_bias", True),
      kernel_initializer=clone_initializer(
          getattr(block, "attention_initializer", None) or
          block.kernel_initializer),
      residual_attention=block.residual_attention if residual else "none",
      layer_index=block.layer_index, score_dtype=block.score_dtype,
      attention_implementation=block.attention_implementation,
      dtype=block.dtype_policy, name=name)
  layer.build(query_shape, value_shape)
  return layer


def layer_norm(block, name, shape):
  # In the policy's compute dtype, as keras-hub's blocks.
  layer = keras.layers.LayerNormalization(
      axis=-1, epsilon=block.layer_norm_epsilon, dtype=block.dtype_policy,
      name=name)
  layer.build(shape)
  return layer


class BlockBase(ra.KeepsArgumentDtypes, keras.layers.Layer):
  """The arguments both blocks take (documented on `RealFormerEncoderBlock`):
  checked, attributes of their names, and in the config."""

  def __init__(self, num_heads, intermediate_dim, activation="gelu",
               dropout=0.0, attention_dropout=0.0, normalize_first=False,
               layer_norm_epsilon=1e-12, kernel_initializer="glorot_uniform",
               residual_attention="sum", layer_index=0, score_dtype="auto",
               attention_implementation="auto", **kwargs):
    ra.refuse_unknown(self, kwargs)
    ra.check_arguments(
        self, num_heads=num_heads, intermediate_dim=intermediate_dim,
        dropout=dropout, attention_dropout=attention_dropout,
        layer_norm_epsilon=layer_norm_epsilon,
        residual_attention=residual_attention, layer_index=layer_index,
        score_dtype=score_dtype,
        attention_implementation=attention_implementation)
    super().__init__(**kwargs)

    # === Config ===
    self.num_heads = num_heads
    self.intermediate_dim = intermediate_dim
    self.activation = get_activation(activation)
    self.dropout = dropout
    self.attention_dropout = attention_dropout
    self.normalize_first = normalize_first
    self.layer_norm_epsilon = layer_norm_epsilon
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.residual_attention = residual_attention
    self.layer_index = layer_index
    self.score_dtype = score_dtype
    self.attention_implementation = attention_implementation

  def get_config(self):
    return {
        **super().get_config(),
        "num_heads": self.num_heads,
        "intermediate_dim": self.intermediate_dim,
        "activation": keras.activations.serialize(self.activation),
        "dropout": self.dropout,
        "attention_dropout": self.attention_dropout,
        "normalize_first": self.normalize_first,
        "layer_norm_epsilon": self.layer_norm_epsilon,
        "kernel_initializer": keras.initializers.serialize(
            self.kernel_initializer),
        "residual_attention": self.residual_attention,
        "layer_index": self.layer_index,
        "score_dtype": self.score_dtype,
        "attention_implementation": self.attention_implementation,
    }


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerEncoderBlock(BlockBase):
  """Transformer encoder block with residual attention, for Keras 3.

  Post-LN (BERT) by default, Pre-LN with `normalize_first=True`. Sub-layers
  carry the tf_keras block's names, so weights map one to one.

  Args: the tf_keras block's in keras-hub's names (docs/names.md), and
    attention_implementation: As `ResidualMultiHeadAttention`.

  Call arguments:
    hidden: `[batch, seq, width]`.
    scores: The previous block's running sum, or None for the first block.
    attention_mask: `[batch, seq, seq]`, 1 = attend.
    training, return_attention_probs: As the attention layer's.

  Returns:
    `(hidden, scores)` or `(hidden, scores, probs)`.
  """

  def compute_mask(self, inputs, previous_mask=None):
    return previous_mask  # `hidden`'s Keras mask passes on.

  def build(self, input_shape):
    input_shape = tuple(input_shape)
    options.block_width(self.name, input_shape, self.num_heads)
    self._attention_layer = attention_layer(self, "self_attention",
                                            input_shape, input_shape)
    dropout = lambda name: hashed_dropout.HashedDropout(
        self.dropout, dtype=self.dtype_policy, name=name)
    self._attention_dropout = dropout("self_attention_dropout")
    self._attention_layer_norm = layer_norm(self, "self_attention_layer_norm",
                                            input_shape)
    dense = lambda size, name: keras.layers.EinsumDense(
        "abc,cd->abd", output_shape=(None, size), bias_axes="d",
        kernel_initializer=clone_initializer(self.kernel_initializer),
        dtype=self.dtype_policy, name=name)
    self._intermediate_dense = dense(self.intermediate_dim, "intermediate")
    self._intermediate_dense.build(input_shape)
    self._intermediate_activation_layer = keras.layers.Activation(
        self.activation, dtype=self.dtype_policy,
        name="intermediate_activation")
    self._output_dense = dense(input_shape[-1], "output")
    self._output_dense.build(input_shape[:-1] + (self.intermediate_dim,))
    self._output_dropout = dropout("output_dropout")
    self._output_layer_norm = layer_norm(self, "output_layer_norm",
                                         input_shape)

  def call(self,
           hidden,
           scores=None,
           attention_mask=None,
           training=None,
           return_attention_probs=False):
    hidden = ra.to_dtype_if_float(
        hidden, keras.backend.standardize_dtype(self.compute_dtype))
    results = {}

    def attention(inputs):
      output, *results["attention"] = self._attention_layer(
          inputs, prev_scores=scores, attention_mask=attention_mask,
          training=training, return_attention_probs=return_attention_probs)
      return output

    hidden = core_block.residual_sublayers(
        ops, hidden, core_block.encoder_sublayers(self, attention, training),
        self.normalize_first)
    return (hidden, *results["attention"])
