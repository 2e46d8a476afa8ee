"""RealFormer decoder stack: a drop-in for Model Garden's `TransformerDecoder`.

`RealFormerDecoder` has the constructor arguments, call signature and
attribute names (`decoder_layers`, `output_normalization`, `num_layers`,
`num_attention_heads`) of `official.nlp.modeling.models.seq2seq_transformer.
TransformerDecoder`, so it fills `Seq2SeqTransformer`'s `decoder_layer` slot:
Model Garden's teacher-forced training, beam search (its key/value cache,
`{str(layer): {"key", "value"}}`) and padded decoding run unchanged. Each
attention type carries its own residual path through the stack.

With `cross_attention=False` the same class is a decoder-only (causal
language model) stack: call it with `memory=None`.
"""

from typing import Any, Optional

import tensorflow as tf
import tf_keras

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf.layers import realformer_decoder_block
from realformer_tf.layers import residual_attention as ra


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerDecoder(tf_keras.layers.Layer):
  """A stack of `RealFormerDecoderBlock`s and a final LayerNorm.

  Args:
    num_layers: Number of blocks.
    num_attention_heads: Number of attention heads.
    intermediate_size: Feed-forward width.
    activation: Feed-forward activation.
    dropout_rate: Dropout after attention projections and feed-forward.
    attention_dropout_rate: Dropout on attention probabilities.
    use_bias: Bias in the attention projections.
    norm_first: Pre-LN (Model Garden's seq2seq default) or Post-LN.
    norm_epsilon: LayerNorm epsilon of the blocks.
    intermediate_dropout: Dropout after the feed-forward activation.
    residual_attention: "sum", "mean" or "none".
    self_residual: Residual path for decoder self-attention.
    cross_residual: Residual path for encoder-decoder attention.
    cross_attention: False for a decoder-only stack.
    final_layer_norm: Whether a LayerNorm follows the last block. Model
      Garden's `TransformerDecoder` always has one (epsilon 1e-6), so True
      (the default) keeps its checkpoints loadable.
    **kwargs: Base `Layer` arguments.

  Call arguments:
    target: `[batch, target_len, width]` embedded target.
    memory: Encoder output `[batch, source_len, width]`, or None.
    self_attention_mask: Optional `[batch, target_len, keys]`; the causal
      mask is always applied.
    cross_attention_mask: `[batch, target_len, source_len]` source padding.
    cache: `{str(layer): {"key", "value"}}` for incremental decoding, updated
      in place.
    decode_loop_step: Step index for padded decoding.
    return_all_decoder_outputs: Return each block's output, normalized.
    return_attention_scores: Also return a dict of per-layer lists
      "self_scores", "cross_scores", "self_probs", "cross_probs".
    training: Whether dropout is active.

  Returns:
    The normalized output `[batch, target_len, width]` (a list with
    `return_all_decoder_outputs`), and the attention dict if asked.
  """

  def __init__(self,
               num_layers: int = 6,
               num_attention_heads: int = 8,
               intermediate_size: int = 2048,
               activation: Any = "relu",
               dropout_rate: float = 0.0,
               attention_dropout_rate: float = 0.0,
               use_bias: bool = False,
               norm_first: bool = True,
               norm_epsilon: float = 1e-6,
               intermediate_dropout: float = 0.0,
               residual_attention: str = "sum",
               self_residual: bool = True,
               cross_residual: bool = True,
               cross_attention: bool = True,
               final_layer_norm: bool = True,
               **kwargs):
    super().__init__(**kwargs)
    if num_layers < 1:
      raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
    self.num_layers = num_layers
    self.num_attention_heads = num_attention_heads
    self._intermediate_size = intermediate_size
    self._activation = activation
    self._dropout_rate = dropout_rate
    self._attention_dropout_rate = attention_dropout_rate
    self._use_bias = use_bias
    self._norm_first = norm_first
    self._norm_epsilon = norm_epsilon
    self._intermediate_dropout = intermediate_dropout
    self._residual_attention = ra.validate_residual_attention(
        residual_attention)
    self._self_residual = bool(self_residual)
    self._cross_residual = bool(cross_residual)
    self._cross_attention = bool(cross_attention)
    self._final_layer_norm = bool(final_layer_norm)

  def build(self, input_shape):
    hidden_size = tf.TensorShape(input_shape)[-1]
    self.decoder_layers = [
        realformer_decoder_block.RealFormerDecoderBlock(
            num_attention_heads=self.num_attention_heads,
            intermediate_size=self._intermediate_size,
            intermediate_activation=self._activation,
            dropout_rate=self._dropout_rate,
            attention_dropout_rate=self._attention_dropout_rate,
            use_bias=self._use_bias,
            norm_first=self._norm_first,
            norm_epsilon=self._norm_epsilon,
            intermediate_dropout=self._intermediate_dropout,
            # Model Garden's seq2seq attention initializer.
            attention_initializer=seq2seq_transformer.attention_initializer(
                hidden_size),
            residual_attention=self._residual_attention,
            self_residual=self._self_residual,
            cross_residual=self._cross_residual,
            cross_attention=self._cross_attention,
            layer_index=i,
            name=f"layer_{i}") for i in range(self.num_layers)]
    if self._final_layer_norm:
      self.output_normalization = tf_keras.layers.LayerNormalization(
          epsilon=1e-6, dtype="float32")
    super().build(input_shape)

  def get_config(self):
    config = super().get_config()
    config.update(
        num_layers=self.num_layers,
        num_attention_heads=self.num_attention_heads,
        intermediate_size=self._intermediate_size,
        activation=self._activation,
        dropout_rate=self._dropout_rate,
        attention_dropout_rate=self._attention_dropout_rate,
        use_bias=self._use_bias,
        norm_first=self._norm_first,
        norm_epsilon=self._norm_epsilon,
        intermediate_dropout=self._intermediate_dropout,
        residual_attention=self._residual_attention,
        self_residual=self._self_residual,
        cross_residual=self._cross_residual,
        cross_attention=self._cross_attention,
        final_layer_norm=self._final_layer_norm)
    return config

  @property
  def cross_attention(self) -> bool:
    return self._cross_attention

  def _normalize(self, x):
    return self.output_normalization(x) if self._final_layer_norm else x

  def call(self,
           target,
           memory=None,
           self_attention_mask=None,
           cross_attention_mask=None,
           cache=None,
           decode_loop_step=None,
           return_all_decoder_outputs: bool = False,
           return_attention_scores: bool = False,
           training=None):
    hidden, self_scores, cross_scores = target, None, None
    outputs = []
    attention = {"self_scores": [], "cross_scores": [], "self_probs": [],
                 "cross_probs": []}
    for i, layer in enumerate(self.decoder_layers):
      hidden, self_scores, cross_scores, self_probs, cross_probs = layer(
          hidden, memory, self_scores=self_scores, cross_scores=cross_scores,
          self_attention_mask=self_attention_mask,
          cross_attention_mask=cross_attention_mask,
          cache=None if cache is None else cache[str(i)],
          decode_loop_step=decode_loop_step, training=training,
          return_attention_probs=True)
      if return_all_decoder_outputs:
        outputs.append(self._normalize(hidden))
      for key, value in (("self_scores", self_scores),
                         ("cross_scores", cross_scores),
                         ("self_probs", self_probs),
                         ("cross_probs", cross_probs)):
        if value is not None:
          attention[key].append(value)
    output = outputs if return_all_decoder_outputs else self._normalize(hidden)
    if return_attention_scores:
      return output, attention
    return output
