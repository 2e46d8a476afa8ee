"""`RealFormerBackbone`: keras-hub's `BertBackbone` with residual attention.

Same constructor arguments, inputs (`token_ids`, `segment_ids`,
`padding_mask`), outputs (`sequence_output`, `pooled_output`), embedding and
pooler layers (names included) as keras-hub's `BertBackbone`
(keras_hub/src/models/bert/bert_backbone.py), so keras-hub's `BertTokenizer`,
`BertMaskedLMPreprocessor` and `BertTextClassifierPreprocessor` feed it
unchanged. What `BertBackbone` cannot do, and is written here: its
`TransformerEncoder` blocks return the hidden states only
(keras_hub/src/layers/modeling/transformer_encoder.py, `call`), so no
attention scores can pass from one block to the next; the blocks here are
our Keras 3 `RealFormerEncoderBlock`s, threading the running score sum.

Written with `keras`, `keras.ops` and `keras_hub` only: runs under the
TensorFlow, JAX and PyTorch backends.
"""

import keras
from keras import ops
from keras_hub import layers as position_embedding  # .PositionEmbedding
from keras_hub import models as hub_backbone  # .Backbone
from keras_hub.src.models.bert import bert_backbone
from keras_hub.src.utils import keras_utils

from realformer_tf.keras3 import encoder_block

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
        f"intermediate_activation={name!r} is not a Keras activation name "
        f"(e.g. {GELU_APPROXIMATE!r}, 'gelu', 'relu').") from None


class ArgumentsAttributes:
  """keras-hub's config convention, written once for both backbones.

  keras-hub's backbones keep each constructor argument as an attribute of its
  name and return them all from `get_config`
  (keras_hub/src/models/bert/bert_backbone.py); `_set_config(**arguments)`
  does both. `_renamed` names the attribute of an argument whose own name is
  a layer's. List it before the keras-hub base class.
  """
  _renamed = {}

  def _set_config(self, **arguments):
    self._arguments = arguments
    for name, value in arguments.items():
      setattr(self, self._renamed.get(name, name), value)

  def get_config(self):
    return {**super().get_config(), **self._arguments}


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerBackbone(ArgumentsAttributes, hub_backbone.Backbone):
  """A BERT encoder with RealFormer's residual attention (He et al., 2020).

  Args:
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
      dropout, max_sequence_length, num_segments, dtype: as `BertBackbone`.
    residual_attention: "sum" (RealFormer), "mean" (running mean, for models
      deeper than ~24 layers) or "none": then, with the default activation,
      this is `BertBackbone` exactly (`weights.load_bert_backbone` copies
      one's weights in).
    norm_first: False = Post-LN (BERT, RealFormer), True = Pre-LN.
    final_layer_norm: LayerNorm the last block's output; None = `norm_first`
      (as our tf_keras `RealFormerEncoder`).
    norm_epsilon: LayerNorm epsilon of the blocks (the embeddings' is 1e-12
      as in BERT).
    score_dtype: dtype of the running score sum under mixed precision:
      "float32" or "compute" (the policy's compute dtype).
    intermediate_activation: Activation name of the feed-forward layer.
      "gelu_approximate" (default, the tanh form) is what both weight sources
      were trained with: keras-hub's `BertBackbone` (which hard-codes it)
      and our tf_keras `RealFormerEncoder` (`hidden_activation: gelu`).
      Keras' "gelu" is the exact form, which neither uses.

  Example:

  >>> backbone = RealFormerBackbone(vocabulary_size=100, num_layers=2,
  ...     num_heads=2, hidden_dim=16, intermediate_dim=32,
  ...     max_sequence_length=8)
  >>> out = backbone({"token_ids": np.ones((1, 4), "int32"),
  ...                 "segment_ids": np.zeros((1, 4), "int32"),
  ...                 "padding_mask": np.ones((1, 4), "int32")})
  >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
  ((1, 4, 16), (1, 16))
  """
  # `final_layer_norm` is the LayerNorm layer (None without one).
  _renamed = {"final_layer_norm": "use_final_layer_norm"}

  def __init__(self,
               vocabulary_size,
               num_layers,
               num_heads,
               hidden_dim,
               intermediate_dim,
               dropout=0.1,
               max_sequence_length=512,
               num_segments=2,
               residual_attention="sum",
               norm_first=False,
               final_layer_norm=None,
               norm_epsilon=1e-12,
               score_dtype="float32",
               intermediate_activation=GELU_APPROXIMATE,
               dtype=None,
               **kwargs):
    if num_layers < 1:
      raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
    if hidden_dim % num_heads:
      raise ValueError(f"hidden_dim={hidden_dim} is not divisible by "
                       f"num_heads={num_heads}.")
    if final_layer_norm is None:
      final_layer_norm = norm_first
    init = bert_backbone.bert_kernel_initializer
    # === Layers (BertBackbone's, same names) ===
    self.token_embedding = keras.layers.ReversibleEmbedding(
        input_dim=vocabulary_size, output_dim=hidden_dim,
        embeddings_initializer=init(), dtype=dtype, name="token_embedding")
    self.position_embedding = position_embedding.PositionEmbedding(
        initializer=init(), sequence_length=max_sequence_length, dtype=dtype,
        name="position_embedding")
    self.segment_embedding = keras.layers.Embedding(
        input_dim=num_segments, output_dim=hidden_dim,
        embeddings_initializer=init(), dtype=dtype, name="segment_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
    self.embeddings_layer_norm = keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, dtype=dtype, name="embeddings_layer_norm")
    self.embeddings_dropout = keras.layers.Dropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.transformer_layers = [
        encoder_block.RealFormerEncoderBlock(
            num_attention_heads=num_heads, inner_dim=intermediate_dim,
            inner_activation=get_activation(intermediate_activation),
            output_dropout=dropout, attention_dropout=dropout,
            norm_first=norm_first, norm_epsilon=norm_epsilon,
            kernel_initializer=init(), residual_attention=residual_attention,
            layer_index=i, score_dtype=score_dtype, dtype=dtype,
            name=f"transformer_layer_{i}") for i in range(num_layers)]
    self.final_layer_norm = None
    if final_layer_norm:
      self.final_layer_norm = keras.layers.LayerNormalization(
          axis=-1, epsilon=norm_epsilon, dtype=dtype, name="final_layer_norm")
    self.pooled_dense = keras.layers.Dense(
        hidden_dim, kernel_initializer=init(), activation="tanh", dtype=dtype,
        name="pooled_dense")

    # === Functional Model ===
    ids = lambda name: keras.Input(shape=(None,), dtype="int32", name=name)
    inputs = {name: ids(name)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    tokens = self.token_embedding(inputs["token_ids"])
    x = self.embeddings_add((tokens, self.position_embedding(tokens),
                             self.segment_embedding(inputs["segment_ids"])))
    x = self.embeddings_dropout(self.embeddings_layer_norm(x))
    # [batch, 1, seq]: one padding mask row for every query, as keras-hub's
    # `merge_padding_and_attention_mask`; it enters each softmax only.
    attention_mask = ops.expand_dims(inputs["padding_mask"], axis=1)
    scores = None
    for block in self.transformer_layers:
      x, scores = block(x, scores=scores, attention_mask=attention_mask)
    if self.final_layer_norm is not None:
      x = self.final_layer_norm(x)
    super().__init__(
        inputs=inputs,
        outputs={"sequence_output": x,
                 "pooled_output": self.pooled_dense(x[:, 0, :])},
        dtype=dtype, **kwargs)

    # === Config ===
    self._set_config(
        # BertBackbone's arguments,
        vocabulary_size=vocabulary_size, num_layers=num_layers,
        num_heads=num_heads, hidden_dim=hidden_dim, dropout=dropout,
        intermediate_dim=intermediate_dim, num_segments=num_segments,
        max_sequence_length=max_sequence_length,
        # then ours.
        residual_attention=residual_attention, norm_first=norm_first,
        final_layer_norm=final_layer_norm, norm_epsilon=norm_epsilon,
        score_dtype=score_dtype,
        intermediate_activation=intermediate_activation)
    self.cls_token_index = 0
