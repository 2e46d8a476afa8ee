"""RealFormer decoder stack: a drop-in for Model Garden's `TransformerDecoder`.

Same arguments, call and attribute names, so it fills `Seq2SeqTransformer`'s
`decoder_layer` slot (teacher forcing, beam search, padded decoding). With
`cross_attention=False` it is a decoder-only stack: call with `memory=None`.
"""

import tf_keras

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf.core import arguments
from realformer_tf.layers import decoder_block
from realformer_tf.networks import score_stack


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerDecoder(score_stack.BlockStack):
  """A stack of `RealFormerDecoderBlock`s and a final LayerNorm.

  Args:
    `score_stack.BlockStack`'s, in Model Garden's `TransformerDecoder` order
      (the final LayerNorm's epsilon is 1e-6 whatever `norm_epsilon`), then
    use_bias, intermediate_dropout, self_residual, cross_residual,
      cross_attention: As `RealFormerDecoderBlock`'s (False: decoder-only).

  Call arguments: `target` (embedded) and those of `RealFormerDecoderBlock`,
  `cache` per layer (`{str(layer): {"key", "value"}}`), and:
    return_all_decoder_outputs: Return each block's output, normalized.
    return_attention_scores: Also return a dict of per-layer lists
      "self_scores", "cross_scores", "self_probs", "cross_probs".

  Returns:
    The normalized output `[batch, target_len, width]` (a list with
    `return_all_decoder_outputs`), and the attention dict if asked.
  """

  _blocks_attribute = "decoder_layers"

  def __init__(self, num_layers: int = 6, num_attention_heads: int = 8,
               intermediate_size: int = 2048, activation="relu",
               dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
               norm_first: bool = True, norm_epsilon: float = 1e-6,
               residual_attention: str = "sum", final_layer_norm: bool = True,
               use_bias: bool = False, intermediate_dropout: float = 0.0,
               self_residual: bool = True, cross_residual: bool = True,
               cross_attention: bool = True, **kwargs):
    arguments.check(type(self).__name__,
                    intermediate_dropout=intermediate_dropout)
    super().__init__(  # BlockStack's arguments, in its order.
        num_layers, num_attention_heads, intermediate_size, activation,
        dropout_rate, attention_dropout_rate, norm_first, norm_epsilon,
        residual_attention, final_layer_norm, **kwargs)
    self._use_bias = bool(use_bias)
    self._intermediate_dropout = intermediate_dropout
    self._self_residual = bool(self_residual)
    self._cross_residual = bool(cross_residual)
    self._cross_attention = bool(cross_attention)

  def get_config(self):
    return {
        **super().get_config(),
        "use_bias": self._use_bias,
        "intermediate_dropout": self._intermediate_dropout,
        "self_residual": self._self_residual,
        "cross_residual": self._cross_residual,
        "cross_attention": self._cross_attention,
    }

  def _block(self, index, width):
    return decoder_block.RealFormerDecoderBlock(
        **self._block_arguments(index), use_bias=self._use_bias,
        intermediate_dropout=self._intermediate_dropout,
        # Model Garden's seq2seq attention initializer.
        attention_initializer=seq2seq_transformer.attention_initializer(
            width),
        self_residual=self._self_residual,
        cross_residual=self._cross_residual,
        cross_attention=self._cross_attention)

  def _final_norm_epsilon(self):
    return 1e-6  # Model Garden's TransformerDecoder's, whatever norm_epsilon.

  @property
  def cross_attention(self) -> bool:
    return self._cross_attention

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
    per_block = None
    if cache is not None:
      per_block = {i: dict(cache=cache[str(i)])
                   for i in range(len(self.decoder_layers))}
    hiddens, scores, probs = score_stack.chain_blocks(
        self.decoder_layers, target, ("self_scores", "cross_scores"),
        per_block, memory=memory, self_attention_mask=self_attention_mask,
        cross_attention_mask=cross_attention_mask,
        decode_loop_step=decode_loop_step, training=training)
    output = ([self._normalize(h) for h in hiddens]
              if return_all_decoder_outputs else self._normalize(hiddens[-1]))
    if return_attention_scores:
      return output, dict(zip(
          ("self_scores", "cross_scores", "self_probs", "cross_probs"),
          scores + probs))
    return output
