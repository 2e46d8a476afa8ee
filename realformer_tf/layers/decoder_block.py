"""A Transformer decoder block with one RealFormer residual path per attention.

Self-attention scores and cross-attention scores are each summed over the
decoder's layers and never mixed (He et al., 2020, Section 3): along each
path the mask is the same in every layer, which makes the sum meaningful.
"""

from typing import Optional

import tf_keras

from realformer_tf.core import arguments
from realformer_tf.core import block as core_block
from realformer_tf.layers import encoder_block
from realformer_tf.layers import hashed_dropout
from realformer_tf.layers import residual_attention as ra


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerDecoderBlock(encoder_block.BlockBase):
  """`(hidden, self_scores, cross_scores) -> (hidden, self_scores, cross_scores)`.

  Causal self-attention on one residual path, encoder-decoder attention on
  another, then the feed-forward layer, with the sub-layer and weight names
  of Model Garden's `TransformerDecoderBlock`, so a checkpoint of one
  restores into the other. With `cross_attention=False`: a causal
  (GPT-style) block for decoder-only language models.

  Args:
    The encoder block's (`residual_attention` and `score_dtype` for both
      paths; `recompute` in training without `cache`), and:
    use_bias: Bias in the attention projections (False in Model Garden's
      `Seq2SeqTransformer`).
    intermediate_dropout: Dropout after the feed-forward activation.
    attention_initializer: Of the attention kernels; default
      `kernel_initializer`.
    self_residual, cross_residual: Whether each path is residual.
    cross_attention: Whether the block has encoder-decoder attention.

  Call arguments:
    hidden: `[batch, target_len, width]`.
    memory: Encoder output `[batch, source_len, width]` (not with
      `cross_attention=False`).
    self_scores, cross_scores: Each path's running sum `[batch, heads,
      target_len, keys or source_len]`, None in the first block.
    self_attention_mask, cross_attention_mask: Optional `[batch, target_len,
      keys or source_len]`, 1 = attend; the causal mask is always added.
    cache, decode_loop_step: The self-attention's, for incremental decoding
      (`ResidualMultiHeadAttention`).
    training: Whether dropout is active.
    return_attention_probs: Also return `(self_probs, cross_probs)`.

  Returns:
    `(hidden, self_scores, cross_scores)` (`cross_scores` is None without
    cross-attention), plus `self_probs, cross_probs` if asked.

  Example:

  >>> block = RealFormerDecoderBlock(num_attention_heads=2, inner_dim=32)
  >>> x, memory = tf.random.normal([2, 4, 16]), tf.random.normal([2, 6, 16])
  >>> x, s, c = block(x, memory)
  >>> x, s, c = block(x, memory, self_scores=s, cross_scores=c)
  >>> s.shape, c.shape
  (TensorShape([2, 2, 4, 4]), TensorShape([2, 2, 4, 6]))
  """

  def __init__(self, num_attention_heads: int, inner_dim: Optional[int] = None,
               inner_activation="relu", output_dropout: float = 0.0,
               attention_dropout: float = 0.0, norm_first: bool = False,
               norm_epsilon: float = 1e-12, kernel_initializer="glorot_uniform",
               residual_attention: str = "sum", layer_index: int = 0,
               score_dtype: str = "auto", recompute: bool = False,
               use_bias: bool = True, intermediate_dropout: float = 0.0,
               attention_initializer=None, self_residual: bool = True,
               cross_residual: bool = True, cross_attention: bool = True,
               **kwargs):
    super().__init__(  # BlockBase's arguments, in its order.
        num_attention_heads, inner_dim, inner_activation, output_dropout,
        attention_dropout, norm_first, norm_epsilon, kernel_initializer,
        residual_attention, layer_index, score_dtype, recompute, **kwargs)
    arguments.check(type(self).__name__,
                    intermediate_dropout=intermediate_dropout)
    # === Config ===
    self._use_bias = bool(use_bias)
    self._intermediate_dropout = intermediate_dropout
    self._attention_initializer = (
        None if attention_initializer is None
        else tf_keras.initializers.get(attention_initializer))
    self._self_residual = bool(self_residual)
    self._cross_residual = bool(cross_residual)
    self._cross_attention = bool(cross_attention)

  def get_config(self):
    return {
        **super().get_config(),
        "use_bias": self._use_bias,
        "intermediate_dropout": self._intermediate_dropout,
        "attention_initializer": encoder_block.serialize_initializer(
            self._attention_initializer),
        "self_residual": self._self_residual,
        "cross_residual": self._cross_residual,
        "cross_attention": self._cross_attention,
    }

  def build(self, input_shape):
    width = encoder_block.block_width(self.name, input_shape,
                                      self._num_heads)

    def attention(name, residual):
      return encoder_block.attention_layer(
          name, input_shape, self._num_heads,
          self._attention_initializer or self._kernel_initializer,
          dropout=self._attention_dropout_rate, use_bias=self._use_bias,
          residual_attention=self._residual_attention if residual else "none",
          layer_index=self._layer_index, score_dtype=self._score_dtype,
          recompute=self._recompute)

    def layer_norm(name):
      return encoder_block.layer_norm(name, self._norm_epsilon)

    # Stateless under recompute_grad: the recomputation draws the same masks.
    dropout = lambda rate: hashed_dropout.dropout_layer(rate, self._recompute)
    self.self_attention = attention("self_attention", self._self_residual)
    self.self_attention_dropout = dropout(self._output_dropout_rate)
    self.self_attention_layer_norm = layer_norm("self_attention_layer_norm")
    if self._cross_attention:
      # Memory has the block's width, so it builds like self-attention.
      self.encdec_attention = attention("attention/encdec",
                                        self._cross_residual)
      self.encdec_attention_dropout = dropout(self._output_dropout_rate)
      self.encdec_attention_layer_norm = layer_norm(
          "attention/encdec_output_layer_norm")
    (self.intermediate_dense, self.intermediate_activation_layer,
     self.output_dense) = encoder_block.feed_forward(
         width, self._inner_dim, self._inner_activation,
         self._kernel_initializer)
    self._intermediate_dropout_layer = dropout(self._intermediate_dropout)
    self.output_dropout = dropout(self._output_dropout_rate)
    self.output_layer_norm = layer_norm("output_layer_norm")
    super().build(input_shape)

  def call(self, hidden, memory=None, self_scores=None, cross_scores=None,
           self_attention_mask=None, cross_attention_mask=None, cache=None,
           decode_loop_step=None, training=None,
           return_attention_probs: bool = False):
    cross_attention = self._cross_attention
    if cross_attention and memory is None:
      raise ValueError(f"{self.name}: memory (the encoder output) is required "
                       "with cross_attention=True.")
    if not cross_attention and memory is not None:
      raise ValueError(f"{self.name}: got memory, but the block was built with "
                       "cross_attention=False.")
    tensors = dict(memory=memory, self_scores=self_scores,
                   cross_scores=cross_scores,
                   self_attention_mask=self_attention_mask,
                   cross_attention_mask=cross_attention_mask)
    if self._recompute and training and cache is None:
      # The absent cross outputs come back None.
      outputs = tuple(encoder_block.recomputed(
          lambda hidden, **tensors: self._forward(hidden, **tensors,
                                                  training=training),
          hidden, tensors))
      if not cross_attention:
        outputs = (outputs[0], outputs[1], None, outputs[2], None)
    else:
      outputs = self._forward(hidden, **tensors, cache=cache,
                              decode_loop_step=decode_loop_step,
                              training=training)
    return outputs if return_attention_probs else outputs[:3]

  def _forward(self, hidden, memory=None, self_scores=None, cross_scores=None,
               self_attention_mask=None, cross_attention_mask=None,
               cache=None, decode_loop_step=None, training=None):
    """`(hidden, self_scores, cross_scores, self_probs, cross_probs)`."""
    out = dict(self_scores=self_scores, cross_scores=cross_scores)

    def self_attention(inputs):
      output, out["self_scores"], out["self_probs"] = self.self_attention(
          query=inputs, attention_mask=self_attention_mask,
          prev_scores=self_scores, training=training,
          return_attention_probs=True, use_causal_mask=True, cache=cache,
          decode_loop_step=decode_loop_step)
      return output

    def cross_attention(inputs):
      output, out["cross_scores"], out["cross_probs"] = self.encdec_attention(
          query=inputs, value=memory, attention_mask=cross_attention_mask,
          prev_scores=cross_scores, training=training,
          return_attention_probs=True)
      return output

    sublayers = core_block.decoder_sublayers(
        self, self_attention,
        cross_attention if self._cross_attention else None,
        training)
    hidden = core_block.residual_sublayers(ra.TF_OPS, hidden, sublayers,
                                           self._norm_first)
    return (hidden, out["self_scores"], out["cross_scores"],
            out["self_probs"], out.get("cross_probs"))
