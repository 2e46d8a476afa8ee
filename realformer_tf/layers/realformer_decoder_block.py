"""A Transformer decoder block with one RealFormer residual path per attention.

The paper (He et al., 2020, Section 3) gives each attention type its own
direct path: decoder self-attention scores are summed over the decoder's
layers, encoder-decoder (cross) attention scores over the decoder's layers
too, and never mixed. Along each path the mask is the same in every layer
(causal + target padding for self-attention, source padding for cross
attention), which is what makes the sum meaningful.
"""

from typing import Any

import tensorflow as tf
import tf_keras

from realformer_tf.layers import realformer_block
from realformer_tf.layers import residual_attention as ra


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerDecoderBlock(realformer_block.ArgumentsConfigLayer):
  """`(hidden, self_scores, cross_scores) -> (hidden, self_scores, cross_scores)`.

  Causal self-attention on one residual path, encoder-decoder attention on
  another, then the feed-forward layer; Post-LN (default) or Pre-LN
  (`norm_first=True`) exactly as Model Garden's `TransformerDecoderBlock`
  (official/nlp/modeling/layers/transformer.py), whose constructor argument
  names and sub-layer attribute and weight names it keeps (`self_attention`,
  `self_attention_layer_norm`, `encdec_attention` = "attention/encdec",
  `encdec_attention_layer_norm`, `intermediate_dense`, `output_dense`,
  `output_layer_norm`), so a `tf.train.Checkpoint` of one restores into the
  other. We cannot plug into that block's `self_attention_cls` /
  `cross_attention_cls` slots: its `call` neither passes scores in nor takes
  them out.

  With `cross_attention=False` the block has no encoder-decoder attention: a
  causal (GPT-style) block for decoder-only language models.

  Args:
    num_attention_heads: Number of attention heads; must divide the width.
    intermediate_size: Width of the feed-forward layer.
    intermediate_activation: Activation of the feed-forward layer.
    dropout_rate: Dropout after each attention projection and the
      feed-forward output.
    attention_dropout_rate: Dropout on attention probabilities.
    use_bias: Bias in the attention projections (Model Garden's
      `Seq2SeqTransformer` uses False).
    norm_first: Pre-LN if True, Post-LN if False.
    norm_epsilon: LayerNorm epsilon.
    intermediate_dropout: Dropout after the feed-forward activation.
    kernel_initializer: Initializer of the dense kernels.
    attention_initializer: Initializer of the attention kernels; default
      `kernel_initializer`.
    residual_attention: "sum", "mean" or "none", for both paths; see
      `ResidualMultiHeadAttention`.
    self_residual: Whether the self-attention path is residual.
    cross_residual: Whether the encoder-decoder attention path is residual.
    cross_attention: Whether the block has encoder-decoder attention.
    layer_index: 0-based depth of the block; used by "mean".
    **kwargs: Base `Layer` arguments.

  Call arguments:
    hidden: `[batch, target_len, width]`.
    memory: Encoder output `[batch, source_len, width]` (not with
      `cross_attention=False`).
    self_scores: The self-attention path's running sum `[batch, heads,
      target_len, keys]`, None in the first block.
    cross_scores: The cross-attention path's running sum `[batch, heads,
      target_len, source_len]`, None in the first block.
    self_attention_mask: Optional `[batch, target_len, keys]`, 1 = attend
      (e.g. target padding); the causal mask is always added.
    cross_attention_mask: Optional `[batch, target_len, source_len]` (source
      padding).
    cache: Incremental decoding: `{"key", "value"}` of the self-attention,
      updated in place (see `ResidualMultiHeadAttention`). Scores need no
      cache: a step passes its `[batch, heads, 1, keys]` rows on.
    decode_loop_step: Step index for padded decoding (with `cache`).
    training: Whether dropout is active.
    return_attention_probs: Also return `(self_probs, cross_probs)`.

  Returns:
    `(hidden, self_scores, cross_scores)` (`cross_scores` is None without
    cross-attention), plus `self_probs, cross_probs` if asked.

  Example:

  >>> block = RealFormerDecoderBlock(num_attention_heads=2,
  ...                                intermediate_size=32)
  >>> x, memory = tf.random.normal([2, 4, 16]), tf.random.normal([2, 6, 16])
  >>> x, s, c = block(x, memory)
  >>> x, s, c = block(x, memory, self_scores=s, cross_scores=c)
  >>> s.shape, c.shape
  (TensorShape([2, 2, 4, 4]), TensorShape([2, 2, 4, 6]))
  """

  def __init__(self,
               num_attention_heads: int,
               intermediate_size: int,
               intermediate_activation: Any = "relu",
               dropout_rate: float = 0.0,
               attention_dropout_rate: float = 0.0,
               use_bias: bool = True,
               norm_first: bool = False,
               norm_epsilon: float = 1e-12,
               intermediate_dropout: float = 0.0,
               kernel_initializer: Any = "glorot_uniform",
               attention_initializer: Any = None,
               residual_attention: str = "sum",
               self_residual: bool = True,
               cross_residual: bool = True,
               cross_attention: bool = True,
               layer_index: int = 0,
               **kwargs):
    kernel_initializer = tf_keras.initializers.get(kernel_initializer)
    if attention_initializer:
      attention_initializer = tf_keras.initializers.get(attention_initializer)
    ra.validate_residual_attention(residual_attention)
    self_residual, cross_residual, cross_attention = (
        bool(self_residual), bool(cross_residual), bool(cross_attention))
    if layer_index < 0:
      raise ValueError(f"layer_index must be >= 0, got {layer_index}.")
    super().__init__(locals())
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate

  def build(self, input_shape):
    c = self._config
    width = realformer_block.block_width(self.name, input_shape,
                                         self.num_attention_heads)

    def attention(name, residual):
      return realformer_block.attention_layer(
          name, input_shape, self.num_attention_heads,
          c["attention_initializer"] or c["kernel_initializer"],
          dropout=self.attention_dropout_rate, use_bias=c["use_bias"],
          residual_attention=c["residual_attention"] if residual else "none",
          layer_index=c["layer_index"])

    def layer_norm(name):
      return realformer_block.layer_norm(name, c["norm_epsilon"])

    self.self_attention = attention("self_attention", c["self_residual"])
    self.self_attention_dropout = tf_keras.layers.Dropout(self.dropout_rate)
    self.self_attention_layer_norm = layer_norm("self_attention_layer_norm")
    if c["cross_attention"]:
      # Memory has the block's width, so it builds like self-attention.
      self.encdec_attention = attention("attention/encdec",
                                        c["cross_residual"])
      self.encdec_attention_dropout = tf_keras.layers.Dropout(
          self.dropout_rate)
      self.encdec_attention_layer_norm = layer_norm(
          "attention/encdec_output_layer_norm")
    (self.intermediate_dense, self.intermediate_activation_layer,
     self.output_dense) = realformer_block.feed_forward(
         width, self.intermediate_size, c["intermediate_activation"],
         c["kernel_initializer"])
    self._intermediate_dropout_layer = tf_keras.layers.Dropout(
        c["intermediate_dropout"])
    self.output_dropout = tf_keras.layers.Dropout(self.dropout_rate)
    self.output_layer_norm = layer_norm("output_layer_norm")
    super().build(input_shape)

  def _sublayer(self, source, attention_output, dropout, layer_norm,
                training):
    """Dropout, residual add and (Post-LN) LayerNorm after a sub-layer."""
    attention_output = dropout(attention_output, training=training)
    if self._config["norm_first"]:
      return tf.cast(source, attention_output.dtype) + attention_output
    return layer_norm(tf.cast(source, attention_output.dtype) +
                      attention_output)

  def call(self,
           hidden,
           memory=None,
           self_scores=None,
           cross_scores=None,
           self_attention_mask=None,
           cross_attention_mask=None,
           cache=None,
           decode_loop_step=None,
           training=None,
           return_attention_probs: bool = False):
    norm_first, cross_attention = (self._config["norm_first"],
                                   self._config["cross_attention"])
    if cross_attention and memory is None:
      raise ValueError(f"{self.name}: memory (the encoder output) is required "
                       "with cross_attention=True.")
    if not cross_attention and memory is not None:
      raise ValueError(f"{self.name}: got memory, but the block was built with "
                       "cross_attention=False.")
    source = hidden
    query = self.self_attention_layer_norm(hidden) if norm_first else hidden
    attention_output, self_scores, self_probs = self.self_attention(
        query=query, attention_mask=self_attention_mask,
        prev_scores=self_scores, training=training,
        return_attention_probs=True, use_causal_mask=True, cache=cache,
        decode_loop_step=decode_loop_step)
    hidden = self._sublayer(source, attention_output,
                            self.self_attention_dropout,
                            self.self_attention_layer_norm, training)

    cross_probs = None
    if cross_attention:
      source = hidden
      query = (self.encdec_attention_layer_norm(hidden)
               if norm_first else hidden)
      attention_output, cross_scores, cross_probs = self.encdec_attention(
          query=query, value=memory, attention_mask=cross_attention_mask,
          prev_scores=cross_scores, training=training,
          return_attention_probs=True)
      hidden = self._sublayer(source, attention_output,
                              self.encdec_attention_dropout,
                              self.encdec_attention_layer_norm, training)

    source = hidden
    inner = self.output_layer_norm(hidden) if norm_first else hidden
    inner = self.intermediate_dense(inner)
    inner = self.intermediate_activation_layer(inner)
    inner = self._intermediate_dropout_layer(inner, training=training)
    layer_output = self.output_dense(inner)
    hidden = self._sublayer(source, layer_output, self.output_dropout,
                            self.output_layer_norm, training)
    if return_attention_probs:
      return hidden, self_scores, cross_scores, self_probs, cross_probs
    return hidden, self_scores, cross_scores
