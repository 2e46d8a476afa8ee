"""A decoder-only RealFormer backbone on keras-hub (GPT-2 layout)."""

import keras
from keras import ops
import keras_hub

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_block
from realformer_tf.keras3 import embeddings
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import residual_attention as ra


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBackbone(backbone_lib.BackboneBase,
                                keras_hub.models.Backbone):
  """GPT-2's backbone with RealFormer's residual self-attention scores.

  keras-hub's `GPT2Backbone` (inputs, output, attribute names,
  initializers) with `RealFormerDecoderBlock(cross_attention=False)`s
  chained through their self-attention scores.

  Args (keras-hub's names; docs/names.md):
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
      dropout (also on the attention probabilities), max_sequence_length,
      layer_norm_epsilon, dtype: as `GPT2Backbone`.
    residual_attention: "sum" (RealFormer), "mean" or "none" (GPT-2).
    normalize_first: Pre-LN (GPT-2, default) or Post-LN.
    activation: Default GPT-2's "gelu_approximate".
    score_dtype, attention_implementation: As `ResidualMultiHeadAttention`.
    **kwargs: `name`, `trainable`.

  Example:

  >>> backbone = RealFormerDecoderBackbone(
  ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
  ...     intermediate_dim=32, max_sequence_length=8)
  >>> out = backbone({"token_ids": np.ones((1, 8), "int32"),
  ...                 "padding_mask": np.ones((1, 8), "int32")})
  >>> tuple(out.shape)
  (1, 8, 16)
  """

  def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim,
               intermediate_dim, dropout=0.1, max_sequence_length=1024,
               residual_attention="sum", normalize_first=True,
               layer_norm_epsilon=1e-5,
               activation=backbone_lib.GELU_APPROXIMATE, score_dtype="auto",
               attention_implementation="auto", dtype=None, **kwargs):
    ra.refuse_unknown(self, kwargs, backbone_lib.BASE_KEYWORDS)
    ra.check_arguments(
        self, vocabulary_size=vocabulary_size, num_layers=num_layers,
        num_heads=num_heads, hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim, dropout=dropout,
        max_sequence_length=max_sequence_length,
        residual_attention=residual_attention,
        layer_norm_epsilon=layer_norm_epsilon, score_dtype=score_dtype,
        attention_implementation=attention_implementation)
    backbone_lib.get_activation(activation)  # Names an unknown one.
    # === Layers ===
    self.token_embedding = embeddings.ReversibleEmbedding(
        input_dim=vocabulary_size, output_dim=hidden_dim,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
        dtype=dtype, name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        sequence_length=max_sequence_length,
        initializer=keras.initializers.RandomNormal(stddev=0.02),
        dtype=dtype, name="position_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype,
                                           name="embeddings_add")
    self.embeddings_dropout = hashed_dropout.HashedDropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.transformer_layers = [
        decoder_block.RealFormerDecoderBlock(
            num_heads=num_heads, intermediate_dim=intermediate_dim,
            activation=backbone_lib.get_activation(activation),
            dropout=dropout, attention_dropout=dropout,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
            residual_attention=residual_attention, layer_index=i,
            score_dtype=score_dtype,
            attention_implementation=attention_implementation,
            cross_attention=False, dtype=dtype,
            name=f"transformer_layer_{i}")
        for i in range(num_layers)]
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm")

    # === Functional Model ===
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32",
                               name="padding_mask")
    tokens = self.token_embedding(token_ids)
    x = self.embeddings_add((tokens, self.position_embedding(tokens)))
    x = self.embeddings_dropout(x)
    key_mask = ops.expand_dims(padding_mask, axis=1)  # [batch, 1, keys]
    scores = None
    for layer in self.transformer_layers:
      x, scores = layer(x, self_scores=scores, self_attention_mask=key_mask)
    sequence_output = self.layer_norm(x)
    super().__init__(
        inputs={"token_ids": token_ids, "padding_mask": padding_mask},
        outputs=sequence_output, dtype=dtype, **kwargs)

    # === Config ===
    self.vocabulary_size = vocabulary_size
    self.num_layers = num_layers
    self.num_heads = num_heads
    self.hidden_dim = hidden_dim
    self.intermediate_dim = intermediate_dim
    self.dropout = dropout
    self.max_sequence_length = max_sequence_length
    self.residual_attention = residual_attention
    self.normalize_first = normalize_first
    self.layer_norm_epsilon = layer_norm_epsilon
    self.activation = activation
    self.score_dtype = score_dtype
    self.attention_implementation = attention_implementation
