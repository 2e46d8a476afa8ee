"""A decoder-only RealFormer backbone on keras-hub (GPT-2 layout)."""

import keras
from keras import ops
import keras_hub

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_block
from realformer_tf.keras3 import residual_attention as ra


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBackbone(backbone_lib.ArgumentsAttributes,
                                keras_hub.models.Backbone):
  """GPT-2's backbone with RealFormer's residual self-attention scores.

  keras-hub's `GPT2Backbone` (keras_hub/src/models/gpt2/gpt2_backbone.py)
  with its inputs (`token_ids`, `padding_mask`), output (the normalized
  sequence `[batch, seq, hidden_dim]`), layer attribute names
  (`token_embedding`: a `ReversibleEmbedding` whose transpose gives the
  logits, `position_embedding`, `embeddings_add`, `embeddings_dropout`,
  `transformer_layers`, `layer_norm`) and initializers; its blocks are
  `RealFormerDecoderBlock(cross_attention=False)` chained through their
  self-attention scores instead of keras-hub's `TransformerDecoder`, whose
  attention neither takes nor returns scores. The padding mask masks keys
  (inside the softmax only), as `GPT2Backbone`'s `decoder_padding_mask`.

  Args:
    vocabulary_size: Number of tokens.
    num_layers: Number of decoder blocks.
    num_heads: Attention heads per block; must divide `hidden_dim`.
    hidden_dim: Width of the blocks.
    intermediate_dim: Width of the feed-forward layers.
    dropout: Dropout rate of embeddings, attention and feed-forward outputs
      and attention probabilities.
    max_sequence_length: Length of the learned position embedding (the
      longest sequence, prompt plus generation).
    residual_attention: "sum" (RealFormer), "mean" or "none" (GPT-2).
    norm_first: Pre-LN (GPT-2, default) or Post-LN (the paper's BERT).
    layer_norm_epsilon: Epsilon of every LayerNorm.
    intermediate_activation: Feed-forward activation.
    score_dtype: "float32" or "compute"; see `ResidualMultiHeadAttention`.
    dtype: dtype policy of the layers (e.g. "mixed_bfloat16").
    **kwargs: `keras_hub.models.Backbone` arguments (name, trainable).

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
               residual_attention="sum", norm_first=True,
               layer_norm_epsilon=1e-5, intermediate_activation="gelu",
               score_dtype="float32", dtype=None, **kwargs):
    ra.validate_residual_attention(residual_attention)
    if num_layers < 1:
      raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
    # === Layers ===
    self.token_embedding = keras.layers.ReversibleEmbedding(
        input_dim=vocabulary_size, output_dim=hidden_dim,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
        dtype=dtype, name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        sequence_length=max_sequence_length,
        initializer=keras.initializers.RandomNormal(stddev=0.02),
        dtype=dtype, name="position_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype,
                                           name="embeddings_add")
    self.embeddings_dropout = keras.layers.Dropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.transformer_layers = [
        decoder_block.RealFormerDecoderBlock(
            num_attention_heads=num_heads, inner_dim=intermediate_dim,
            inner_activation=intermediate_activation, output_dropout=dropout,
            attention_dropout=dropout, norm_first=norm_first,
            norm_epsilon=layer_norm_epsilon,
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.02),
            residual_attention=residual_attention, cross_attention=False,
            layer_index=i, score_dtype=score_dtype, dtype=dtype,
            name=f"transformer_layer_{i}") for i in range(num_layers)]
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
    self._set_config(
        vocabulary_size=vocabulary_size, num_layers=num_layers,
        num_heads=num_heads, hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim, dropout=dropout,
        max_sequence_length=max_sequence_length,
        residual_attention=residual_attention, norm_first=norm_first,
        layer_norm_epsilon=layer_norm_epsilon,
        intermediate_activation=keras.activations.serialize(
            keras.activations.get(intermediate_activation)),
        score_dtype=score_dtype)
