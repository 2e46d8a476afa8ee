"""A decoder-only RealFormer backbone on keras-hub (GPT-2 layout)."""

import keras
from keras import ops
import keras_hub

from realformer_tf.core import arguments
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_block
from realformer_tf.keras3 import embeddings
from realformer_tf.keras3 import hashed_dropout


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBackbone(backbone_lib.BackboneConfig,
                                keras_hub.models.Backbone):
  """GPT-2's backbone with RealFormer's residual self-attention scores.

  keras-hub's `GPT2Backbone` with its inputs, output, layer attribute names
  and initializers; its blocks are `RealFormerDecoderBlock(cross_attention=
  False)` chained through their self-attention scores (keras-hub's
  `TransformerDecoder` takes no scores). The padding mask masks keys.

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
    normalize_first: Pre-LN (GPT-2, default) or Post-LN (the paper's BERT).
    layer_norm_epsilon: Epsilon of every LayerNorm.
    activation: Feed-forward activation; default GPT-2's tanh GELU,
      "gelu_approximate".
    score_dtype: "auto" (default), "float32" or "compute"; see
      `ResidualMultiHeadAttention`.
    attention_implementation: "auto", "reference" or "pallas"; see
      `ResidualMultiHeadAttention`.
    dtype: dtype policy of the layers (e.g. "mixed_bfloat16").
    **kwargs: `keras_hub.models.Backbone` arguments (name, trainable). The
      names of the encoder backbone (and the tf_keras face's, with a
      DeprecationWarning); docs/names.md.

  Example:

  >>> backbone = RealFormerDecoderBackbone(
  ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
  ...     intermediate_dim=32, max_sequence_length=8)
  >>> out = backbone({"token_ids": np.ones((1, 8), "int32"),
  ...                 "padding_mask": np.ones((1, 8), "int32")})
  >>> tuple(out.shape)
  (1, 8, 16)
  """

  ARGUMENTS = backbone_lib.backbone_spec(
      "vocab_size", "num_layers", "num_attention_heads", "hidden_size",
      "inner_dim", "output_dropout", "max_sequence_length",
      "residual_attention", "norm_first", "norm_epsilon", "inner_activation",
      "score_dtype", "attention_implementation",
      # GPT2Backbone's defaults.
      output_dropout=0.1, max_sequence_length=1024, norm_first=True,
      norm_epsilon=1e-5, inner_activation=backbone_lib.GELU_APPROXIMATE)

  def __init__(self, *args, dtype=None, **kwargs):
    self._config, kwargs = self._bind(args, kwargs)
    c = self._config
    vocabulary_size, hidden_dim, dropout, layer_norm_epsilon = (
        c[k] for k in ("vocab_size", "hidden_size", "output_dropout",
                       "norm_epsilon"))
    # === Layers ===
    self.token_embedding = embeddings.ReversibleEmbedding(
        input_dim=vocabulary_size, output_dim=hidden_dim,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01),
        dtype=dtype, name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        sequence_length=c["max_sequence_length"],
        initializer=keras.initializers.RandomNormal(stddev=0.02),
        dtype=dtype, name="position_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype,
                                           name="embeddings_add")
    self.embeddings_dropout = hashed_dropout.HashedDropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.transformer_layers = [
        decoder_block.RealFormerDecoderBlock(
            **arguments.DECODER_BLOCK.named(arguments.KERAS3, dict(
                self._block_arguments(i), cross_attention=False,
                kernel_initializer=keras.initializers.RandomNormal(
                    stddev=0.02))),
            dtype=dtype, name=f"transformer_layer_{i}")
        for i in range(c["num_layers"])]
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

    self._set_attributes()
