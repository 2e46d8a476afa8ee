"""Keras 3 RealFormer encoder block: `(hidden, scores) -> (hidden, scores)`.

The Keras 3 face of `realformer_tf.layers.encoder_block.RealFormerEncoderBlock`
(same constructor names, call, sub-layer attributes and weight names), with
`keras` and `keras.ops` only.
"""

import keras
from keras import ops

from realformer_tf.keras3 import residual_attention as ra


def clone_initializer(initializer):
  """A fresh copy, so sub-layers don't share one (stateless, same draws)
  initializer; as `keras.layers.MultiHeadAttention._get_common_kwargs_for_sublayer`."""
  return initializer.__class__.from_config(initializer.get_config())


def check_positive_int(name, value, what):
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
    raise ValueError(f"{name}: {what} must be a positive int, got {value!r}.")
  return value


def block_width(name, input_shape, num_heads):
  """The known width of a `[batch, seq, width]` input that `num_heads` divide."""
  if len(input_shape) != 3 or input_shape[-1] is None:
    raise ValueError(f"{name}: expects hidden of shape [batch, seq, width] "
                     f"with a known width, got {tuple(input_shape)}.")
  width = input_shape[-1]
  if width % num_heads:
    raise ValueError(f"{name}: width {width} is not divisible by "
                     f"num_attention_heads={num_heads}.")
  return width


def layer_norm(name, epsilon):
  # float32 under mixed precision, as the tf_keras block (Model Garden).
  return keras.layers.LayerNormalization(axis=-1, epsilon=epsilon,
                                         dtype="float32", name=name)


def feed_forward(width, inner_dim, activation, initializer, dtype_policy):
  """`(intermediate, activation, output)` layers of the feed-forward part."""
  activation_dtype = dtype_policy
  if dtype_policy.name == "mixed_bfloat16":
    activation_dtype = "float32"  # As Model Garden: bf16 GELU hurts convergence.
  dense = lambda size, name: keras.layers.EinsumDense(
      "abc,cd->abd", output_shape=(None, size), bias_axes="d",
      kernel_initializer=clone_initializer(initializer), dtype=dtype_policy,
      name=name)
  return (dense(inner_dim, "intermediate"),
          keras.layers.Activation(activation, dtype=activation_dtype,
                                  name="intermediate_activation"),
          dense(width, "output"))


class ArgumentsConfig:
  """Layer mixin: the config is the constructor's arguments, `self._config`.

  As the tf_keras `encoder_block.ArgumentsConfigLayer`: the subclass'
  `__init__` sets `self._config` to its normalized arguments, by name;
  `get_config` returns them after the base layer's config, initializers and
  activations serialized. List it before the Keras base class.
  """

  def get_config(self):
    config = super().get_config()
    for key, value in self._config.items():
      if isinstance(value, keras.initializers.Initializer):
        value = keras.initializers.serialize(value)
      elif key.endswith("activation"):
        value = keras.activations.serialize(value)
      config[key] = value
    return config


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerEncoderBlock(ArgumentsConfig, ra.KeepsArgumentDtypes,
                             keras.layers.Layer):
  """Transformer encoder block with residual attention, for Keras 3.

  Post-LN (BERT, the paper's backbone) by default, Pre-LN with
  `norm_first=True`; `residual_attention` picks RealFormer ("sum"/"mean") or
  plain attention ("none"). Sub-layers carry the tf_keras block's attribute
  and weight names (`_attention_layer` "self_attention",
  `_attention_layer_norm`, `_intermediate_dense` "intermediate",
  `_output_dense` "output", `_output_layer_norm`), so weights map one to
  one. keras-hub's `TransformerEncoder`
  (keras_hub/src/layers/modeling/transformer_encoder.py) has no place for
  the scores, and its sub-layer names differ; hence a block of its own.

  Args: those of `realformer_tf.layers.RealFormerEncoderBlock` but
    `recompute` (Model Garden's `recompute_grad` is TensorFlow's).

  Call arguments:
    hidden: `[batch, seq, width]`.
    scores: Running score sum of the previous block, `[batch, heads, seq,
      seq]`, or None for the first block.
    attention_mask: `[batch, seq, seq]`, 1 = attend.
    training: Whether dropout is active.
    return_attention_probs: Also return the attention probabilities.

  Returns:
    `(hidden, scores)` or `(hidden, scores, probs)`.
  """

  def __init__(self,
               num_attention_heads,
               inner_dim,
               inner_activation="gelu",
               output_dropout=0.0,
               attention_dropout=0.0,
               norm_first=False,
               norm_epsilon=1e-12,
               kernel_initializer="glorot_uniform",
               residual_attention="sum",
               layer_index=0,
               score_dtype="float32",
               **kwargs):
    super().__init__(**kwargs)
    if not isinstance(layer_index, int) or layer_index < 0:
      raise ValueError(
          f"{self.name}: layer_index must be an int >= 0, got {layer_index!r}.")
    self._config = dict(
        num_attention_heads=check_positive_int(
            self.name, num_attention_heads, "num_attention_heads"),
        inner_dim=check_positive_int(self.name, inner_dim, "inner_dim"),
        inner_activation=keras.activations.get(inner_activation),
        output_dropout=float(output_dropout),
        attention_dropout=float(attention_dropout),
        norm_first=bool(norm_first), norm_epsilon=float(norm_epsilon),
        kernel_initializer=keras.initializers.get(kernel_initializer),
        residual_attention=ra.validate_residual_attention(residual_attention),
        layer_index=layer_index,
        score_dtype=ra.validate_score_dtype(score_dtype))
    self.supports_masking = True

  def build(self, input_shape):
    c = self._config
    input_shape = tuple(input_shape)
    width = block_width(self.name, input_shape, c["num_attention_heads"])
    self._attention_layer = ra.ResidualMultiHeadAttention(
        num_heads=c["num_attention_heads"],
        key_dim=width // c["num_attention_heads"],
        dropout=c["attention_dropout"],
        kernel_initializer=clone_initializer(c["kernel_initializer"]),
        residual_attention=c["residual_attention"],
        layer_index=c["layer_index"], score_dtype=c["score_dtype"],
        dtype=self.dtype_policy, name="self_attention")
    self._attention_layer.build(input_shape)
    dropout = lambda name: keras.layers.Dropout(
        c["output_dropout"], dtype=self.dtype_policy, name=name)
    self._attention_dropout = dropout("self_attention_dropout")
    self._attention_layer_norm = layer_norm("self_attention_layer_norm",
                                            c["norm_epsilon"])
    self._attention_layer_norm.build(input_shape)
    (self._intermediate_dense, self._intermediate_activation_layer,
     self._output_dense) = feed_forward(width, c["inner_dim"],
                                        c["inner_activation"],
                                        c["kernel_initializer"],
                                        self.dtype_policy)
    self._intermediate_dense.build(input_shape)
    self._output_dense.build(input_shape[:-1] + (c["inner_dim"],))
    self._output_dropout = dropout("output_dropout")
    self._output_layer_norm = layer_norm("output_layer_norm",
                                         c["norm_epsilon"])
    self._output_layer_norm.build(input_shape)

  def call(self,
           hidden,
           scores=None,
           attention_mask=None,
           training=None,
           return_attention_probs=False):
    hidden = ra.to_dtype_if_float(
        hidden, keras.backend.standardize_dtype(self.compute_dtype))
    source = hidden
    if self._config["norm_first"]:
      hidden = self._attention_layer_norm(hidden)
    attention_output, scores, probs = self._attention_layer(
        hidden, prev_scores=scores, attention_mask=attention_mask,
        training=training, return_attention_probs=True)
    attention_output = self._attention_dropout(attention_output,
                                               training=training)
    if self._config["norm_first"]:
      attention_output = ops.add(source, attention_output)
      residual = attention_output
      attention_output = self._output_layer_norm(attention_output)
    else:
      attention_output = self._attention_layer_norm(
          ops.add(ops.cast(source, attention_output.dtype), attention_output))
      residual = attention_output

    inner = self._intermediate_dense(attention_output)
    inner = self._intermediate_activation_layer(inner)
    layer_output = self._output_dense(inner)
    layer_output = self._output_dropout(layer_output, training=training)
    if self._config["norm_first"]:
      layer_output = ops.add(residual,
                             ops.cast(layer_output, residual.dtype))
    else:
      # LayerNorm output is float32 under mixed precision; add in float32.
      layer_output = self._output_layer_norm(
          ops.add(ops.cast(layer_output, "float32"), residual))
    if return_attention_probs:
      return layer_output, scores, probs
    return layer_output, scores
