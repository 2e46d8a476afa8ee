"""RealFormer encoder: Model Garden's `BertEncoderV2` contract + residual attention."""

from typing import Optional

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers as mg_layers
from realformer_tf import utils
from realformer_tf.compat import tf_keras as compat_tf_keras
from realformer_tf.core import arguments
from realformer_tf.layers import encoder_block
from realformer_tf.layers import hashed_dropout
from realformer_tf.layers import keras3_seam
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import score_stack

@tf_keras.utils.register_keras_serializable(package="RealFormer")
def approx_gelu(x):
  """GELU with the tanh approximation used by BERT and RealFormer's TF1 code."""
  return tf_keras.activations.gelu(x, approximate=True)


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerEncoder(keras3_seam.RejectsKeras3,
                        tf_keras.layers.Layer):
  """Bi-directional Transformer encoder with residual attention (RealFormer).

  Same constructor arguments (aliases included), inputs, outputs and
  checkpoint layout as Model Garden's `networks.BertEncoderV2`, plus those
  below. Not an `EncoderScaffold`: its attribute names are not
  BertEncoderV2's, whose checkpoints must restore here.

  Args:
    residual_attention: "sum" (RealFormer), "mean" (for models deeper than
      ~24 layers) or "none" (plain BERT).
    norm_first: False = Post-LN (BERT, RealFormer), True = Pre-LN.
    final_layer_norm: LayerNorm the last layer's output; default
      `norm_first` (pass False to match `BertEncoderV2(norm_first=True)`).
    norm_epsilon: LayerNorm epsilon of the Transformer blocks.
    return_attention_scores: Also output `attention_scores` (each layer's
      softmax probabilities, as `BertEncoderV2`) and `residual_scores` (each
      layer's unmasked running score sum).
    score_dtype: "auto", "float32" or "compute" (docs/layers.md).
    recompute: Recompute each block's forward pass during backprop.

  Example:

  >>> encoder = RealFormerEncoder(vocab_size=100, hidden_size=32, num_layers=2,
  ...                             num_attention_heads=4, inner_dim=64)
  >>> ids = tf.constant([[5, 6, 7, 0]])
  >>> out = encoder(dict(input_word_ids=ids, input_mask=tf.sign(ids),
  ...                    input_type_ids=tf.zeros_like(ids)))
  >>> out["sequence_output"].shape, out["pooled_output"].shape
  (TensorShape([1, 4, 32]), TensorShape([1, 32]))
  """

  def __init__(self, vocab_size: int, hidden_size: int = 768,
               num_layers: int = 12, num_attention_heads: int = 12,
               max_sequence_length: int = 512, type_vocab_size: int = 16,
               inner_dim: int = 3072, inner_activation=approx_gelu,
               output_dropout: float = 0.1, attention_dropout: float = 0.1,
               initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
               output_range: Optional[int] = None,
               embedding_width: Optional[int] = None,
               embedding_layer: Optional[tf_keras.layers.Layer] = None,
               norm_first: bool = False, with_dense_inputs: bool = False,
               return_attention_scores: bool = False,
               return_word_embeddings: bool = False,
               residual_attention: str = "sum",
               final_layer_norm: Optional[bool] = None,
               norm_epsilon: float = 1e-12, score_dtype: str = "auto",
               recompute: bool = False, **kwargs):
    (inner_dim, inner_activation, output_dropout,
     attention_dropout) = encoder_block.take_aliases(
         type(self).__name__, kwargs, inner_dim, inner_activation,
         output_dropout, attention_dropout)
    arguments.check(
        type(self).__name__, vocab_size=vocab_size, hidden_size=hidden_size,
        num_layers=num_layers, num_attention_heads=num_attention_heads,
        max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, inner_dim=inner_dim,
        output_dropout=output_dropout, attention_dropout=attention_dropout,
        residual_attention=residual_attention, norm_epsilon=norm_epsilon,
        score_dtype=score_dtype)
    utils.check_heads_divide(hidden_size, num_attention_heads, "hidden_size")
    super().__init__(**kwargs)
    # === Config ===
    self._vocab_size = vocab_size
    self._hidden_size = hidden_size
    self._num_layers = num_layers
    self._num_attention_heads = num_attention_heads
    self._max_sequence_length = max_sequence_length
    self._type_vocab_size = type_vocab_size
    self._inner_dim = inner_dim
    self._inner_activation = inner_activation
    self._output_dropout = output_dropout
    self._attention_dropout = attention_dropout
    self._initializer = initializer = tf_keras.initializers.get(initializer)
    self._output_range = output_range
    self._embedding_width = embedding_width = embedding_width or hidden_size
    self._embedding_layer_argument = embedding_layer
    self._norm_first = bool(norm_first)
    self._with_dense_inputs = bool(with_dense_inputs)
    self._return_attention_scores = bool(return_attention_scores)
    self._return_word_embeddings = bool(return_word_embeddings)
    self._residual_attention = residual_attention
    self._norm_epsilon = norm_epsilon
    self._score_dtype = score_dtype
    self._recompute = bool(recompute)

    def init():
      return tf_utils.clone_initializer(initializer)

    # Attribute names below are BertEncoderV2's: object-based checkpoints
    # match variables by them.
    self._embedding_layer = embedding_layer or mg_layers.OnDeviceEmbedding(
        vocab_size=vocab_size, embedding_width=embedding_width,
        initializer=init(), name="word_embeddings")
    self._position_embedding_layer = mg_layers.PositionEmbedding(
        initializer=init(), max_length=max_sequence_length,
        name="position_embedding")
    self._type_embedding_layer = mg_layers.OnDeviceEmbedding(
        vocab_size=type_vocab_size, embedding_width=embedding_width,
        initializer=init(), use_one_hot=True, name="type_embeddings")
    self._embedding_norm_layer = tf_keras.layers.LayerNormalization(
        name="embeddings/layer_norm", axis=-1, epsilon=1e-12, dtype=tf.float32)
    self._embedding_dropout = hashed_dropout.HashedDropout(
        rate=output_dropout, name="embedding_dropout")
    self._embedding_projection = None
    if embedding_width != hidden_size:
      self._embedding_projection = tf_keras.layers.EinsumDense(
          "...x,xy->...y", output_shape=hidden_size, bias_axes="y",
          kernel_initializer=init(), name="embedding_projection")
    # Unused; object-based checkpoints of BertEncoderV2 list it.
    self._attention_mask_layer = mg_layers.SelfAttentionMask(
        name="self_attention_mask")
    self._transformer_layers = [
        encoder_block.RealFormerEncoderBlock(
            num_attention_heads=num_attention_heads, inner_dim=inner_dim,
            inner_activation=inner_activation, output_dropout=output_dropout,
            attention_dropout=attention_dropout, norm_first=norm_first,
            norm_epsilon=norm_epsilon, kernel_initializer=init(),
            residual_attention=residual_attention, layer_index=i,
            score_dtype=score_dtype, recompute=recompute,
            name=f"transformer/layer_{i}") for i in range(num_layers)]
    self._final_layer_norm = None  # Its config value: this layer or None.
    if norm_first if final_layer_norm is None else final_layer_norm:
      self._final_layer_norm = tf_keras.layers.LayerNormalization(
          name="final_layer_norm", axis=-1, epsilon=norm_epsilon,
          dtype=tf.float32)
    self._pooler_layer = tf_keras.layers.Dense(
        units=hidden_size, activation="tanh", kernel_initializer=init(),
        name="pooler_transform")

    ids = lambda name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
    inputs = {k: ids(k) for k in ("input_word_ids", "input_mask",
                                  "input_type_ids")}
    if with_dense_inputs:
      inputs.update(
          dense_inputs=tf_keras.Input(shape=(None, embedding_width),
                                      dtype=tf.float32, name="dense_inputs"),
          dense_mask=ids("dense_mask"), dense_type_ids=ids("dense_type_ids"))
    compat_tf_keras.set_untracked(self, "_plain_inputs", inputs)

  def call(self, inputs, training=None):
    if not isinstance(inputs, dict):
      raise ValueError(
          f"{type(self).__name__} takes a dict with input_word_ids, "
          f"input_mask and input_type_ids; got {type(inputs).__name__}.")
    missing = [k for k in ("input_mask", "input_type_ids") if k not in inputs]
    word_ids = inputs.get("input_word_ids")
    word_embeddings = inputs.get("input_word_embeddings")
    if word_ids is None and word_embeddings is None:
      missing.insert(0, "input_word_ids")
    if missing:
      raise ValueError(f"{type(self).__name__}: missing inputs {missing}.")
    mask, type_ids = inputs["input_mask"], inputs["input_type_ids"]
    if tf.TensorShape(mask.shape).rank != 2:
      raise ValueError(f"input_mask must have rank 2 [batch, seq], got shape "
                       f"{mask.shape}.")
    if word_embeddings is None:
      word_embeddings = self._embedding_layer(word_ids)
    dense_inputs = inputs.get("dense_inputs")
    if dense_inputs is not None:
      # Dense embeddings are appended at the end of the sequence.
      mask = tf.concat([mask, inputs["dense_mask"]], axis=1)
      word_embeddings = tf.concat([word_embeddings, dense_inputs], axis=1)
      type_ids = tf.concat([type_ids, inputs["dense_type_ids"]], axis=1)

    embeddings = (word_embeddings
                  + self._position_embedding_layer(word_embeddings)
                  + self._type_embedding_layer(type_ids))
    embeddings = self._embedding_norm_layer(embeddings)
    embeddings = self._embedding_dropout(embeddings, training=training)
    if self._embedding_projection is not None:
      embeddings = self._embedding_projection(embeddings)
    # The padding mask as one additive bias [batch, 1, 1, seq] for all layers.
    attention_bias = ra.attention_bias_from_mask(
        mask[:, tf.newaxis, tf.newaxis, :],
        ra.resolve_score_dtype(self._score_dtype,
                               self.compute_dtype))

    last = len(self._transformer_layers) - 1
    encoder_outputs, (residual_scores,), (attention_scores,) = (
        score_stack.chain_blocks(
            self._transformer_layers, embeddings, ("scores",),
            {last: dict(output_range=self._output_range)},
            attention_bias=attention_bias, training=training))
    if self._final_layer_norm is not None:
      encoder_outputs[-1] = self._final_layer_norm(encoder_outputs[-1])

    sequence_output = encoder_outputs[-1]
    outputs = dict(
        sequence_output=sequence_output,
        pooled_output=self._pooler_layer(sequence_output[:, 0, :]),
        encoder_outputs=encoder_outputs)
    if self._return_attention_scores:
      outputs["attention_scores"] = attention_scores
      outputs["residual_scores"] = residual_scores
    if self._return_word_embeddings:
      outputs["word_embeddings"] = embeddings
    return outputs

  def get_config(self):
    return {
        **super().get_config(),
        "vocab_size": self._vocab_size,
        "hidden_size": self._hidden_size,
        "num_layers": self._num_layers,
        "num_attention_heads": self._num_attention_heads,
        "max_sequence_length": self._max_sequence_length,
        "type_vocab_size": self._type_vocab_size,
        "inner_dim": self._inner_dim,
        "inner_activation": encoder_block.serialize_activation(
            self._inner_activation),
        "output_dropout": self._output_dropout,
        "attention_dropout": self._attention_dropout,
        "initializer": encoder_block.serialize_initializer(self._initializer),
        "output_range": self._output_range,
        "embedding_width": self._embedding_width,
        "embedding_layer": self._embedding_layer_argument,
        "norm_first": self._norm_first,
        "with_dense_inputs": self._with_dense_inputs,
        "return_attention_scores": self._return_attention_scores,
        "return_word_embeddings": self._return_word_embeddings,
        "residual_attention": self._residual_attention,
        "final_layer_norm": self._final_layer_norm is not None,
        "norm_epsilon": self._norm_epsilon,
        "score_dtype": self._score_dtype,
        "recompute": self._recompute,
    }

  @property
  def inputs(self):
    """`tf_keras.Input`s for building a functional model around the encoder."""
    return self._plain_inputs

  def get_embedding_table(self):
    return self._embedding_layer.embeddings

  def get_embedding_layer(self):
    return self._embedding_layer

  @property
  def transformer_layers(self):
    return self._transformer_layers

  @property
  def pooler_layer(self):
    return self._pooler_layer
