"""Keras 3 RealFormer encoder block: `(hidden, scores) -> (hidden, scores)`.

The Keras 3 face of `layers.encoder_block.RealFormerEncoderBlock` (same
sub-layers and weight names), in keras-hub's argument names and dtype rules:
under a mixed policy LayerNorm and activation run in the compute dtype, as in
keras-hub's `TransformerEncoder`.
"""

import keras
from keras import ops
from keras_hub.src.utils import keras_utils

from realformer_tf.core import arguments
from realformer_tf.core import block as core_block
from realformer_tf.core import options
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import residual_attention as ra

# keras-hub's BERT (bert_backbone.py, `activation=gelu_approximate`) and our
# tf_keras encoder (`hidden_activation: gelu`, Model Garden's tanh form) both
# use the tanh approximation; Keras' own "gelu" is the exact (erf) form.
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
  initializer; as `keras.layers.MultiHeadAttention._get_common_kwargs_for_sublayer`."""
  return initializer.__class__.from_config(initializer.get_config())


class SpecConfig:
  """Layer mixin: the Keras 3 side of `core.arguments`.

  `_bind(args, kwargs)` binds `ARGUMENTS` in keras-hub's names and refuses
  any other keyword, naming the closest; `get_config` writes them back. The
  class' signature is its arguments' (`Spec.signature`). List it before the
  Keras base.
  """
  ARGUMENTS = arguments.Spec()
  _BASE_KEYWORDS = ra.LAYER_KEYWORDS
  _KEYWORD_ONLY = ()
  _deserialize = {"initializer": keras.initializers.get,
                  "activation": get_activation}
  _serialize = {"initializer": keras.initializers.serialize,
                "activation": keras.activations.serialize}

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    cls.__signature__ = cls.ARGUMENTS.signature(arguments.KERAS3,
                                                cls._KEYWORD_ONLY)

  def _bind(self, args, kwargs):
    return self.ARGUMENTS.bind(arguments.KERAS3, type(self).__name__, args,
                               kwargs, self._deserialize,
                               base=self._BASE_KEYWORDS)

  def get_config(self):
    return {**super().get_config(),
            **self.ARGUMENTS.config(arguments.KERAS3, self._config,
                                    self._serialize)}


def attention_layer(block, name, query_shape, value_shape, residual=True):
  """A built `ResidualMultiHeadAttention` of `block`'s arguments."""
  c = block._config  # pylint: disable=protected-access
  heads = c["num_attention_heads"]
  layer = ra.ResidualMultiHeadAttention(
      num_heads=heads, key_dim=query_shape[-1] // heads,
      dropout=c["attention_dropout"], use_bias=c.get("use_bias", True),
      kernel_initializer=clone_initializer(
          c.get("attention_initializer") or c["kernel_initializer"]),
      residual_attention=c["residual_attention"] if residual else "none",
      layer_index=c["layer_index"], score_dtype=c["score_dtype"],
      attention_implementation=c["attention_implementation"],
      dtype=block.dtype_policy, name=name)
  layer.build(query_shape, value_shape)
  return layer


def layer_norm(block, name, shape):
  # In the policy's compute dtype, as keras-hub's blocks.
  layer = keras.layers.LayerNormalization(
      axis=-1, epsilon=block._config["norm_epsilon"],  # pylint: disable=protected-access
      dtype=block.dtype_policy, name=name)
  layer.build(shape)
  return layer


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerEncoderBlock(SpecConfig, ra.KeepsArgumentDtypes,
                             keras.layers.Layer):
  """Transformer encoder block with residual attention, for Keras 3.

  Post-LN (BERT, the paper's backbone) by default, Pre-LN with
  `normalize_first=True`; `residual_attention` picks RealFormer
  ("sum"/"mean") or plain attention ("none"). Sub-layers carry the tf_keras
  block's names, so weights map one to one (keras-hub's
  `TransformerEncoder` has no place for the scores).

  Args (keras-hub's names; docs/names.md maps them to the tf_keras block's):
    num_heads, intermediate_dim, activation, dropout (after the attention
      and feed-forward outputs), attention_dropout (on the probabilities),
      normalize_first, layer_norm_epsilon, kernel_initializer,
      residual_attention, layer_index, score_dtype: as the tf_keras block.
    attention_implementation: "auto", "reference" or "pallas"; see
      `ResidualMultiHeadAttention`.

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
  ARGUMENTS = arguments.BLOCK

  def __init__(self, *args, **kwargs):
    self._config, kwargs = self._bind(args, kwargs)
    super().__init__(**kwargs)
    self.supports_masking = True

  def build(self, input_shape):
    c = self._config
    input_shape = tuple(input_shape)
    options.block_width(self.name, input_shape, c["num_attention_heads"])
    self._attention_layer = attention_layer(self, "self_attention",
                                            input_shape, input_shape)
    dropout = lambda name: hashed_dropout.HashedDropout(
        c["output_dropout"], dtype=self.dtype_policy, name=name)
    self._attention_dropout = dropout("self_attention_dropout")
    self._attention_layer_norm = layer_norm(self, "self_attention_layer_norm",
                                            input_shape)
    dense = lambda size, name: keras.layers.EinsumDense(
        "abc,cd->abd", output_shape=(None, size), bias_axes="d",
        kernel_initializer=clone_initializer(c["kernel_initializer"]),
        dtype=self.dtype_policy, name=name)
    self._intermediate_dense = dense(c["inner_dim"], "intermediate")
    self._intermediate_dense.build(input_shape)
    self._intermediate_activation_layer = keras.layers.Activation(
        c["inner_activation"], dtype=self.dtype_policy,
        name="intermediate_activation")
    self._output_dense = dense(input_shape[-1], "output")
    self._output_dense.build(input_shape[:-1] + (c["inner_dim"],))
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
        self._config["norm_first"])
    return (hidden, *results["attention"])
