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
    *args: `score_stack.BlockStack`'s arguments, in Model Garden's `TransformerDecoder`
      order (`num_layers`, `num_attention_heads`, `intermediate_size`,
      `activation`, `dropout_rate`, `attention_dropout_rate`); the others by
      keyword.
    use_bias: Bias in the attention projections.
    intermediate_dropout: Dropout after the feed-forward activation.
    self_residual: Residual path for decoder self-attention.
    cross_residual: Residual path for encoder-decoder attention.
    cross_attention: False for a decoder-only stack.
    **kwargs: `BlockStack`'s arguments (the final LayerNorm's epsilon is
      Model Garden's 1e-6 whatever `norm_epsilon`) and base `Layer` ones.

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

  _blocks_attribute = "decoder_layers"

  ARGUMENTS = score_stack.BlockStack.ARGUMENTS + (
      arguments.DECODER_BLOCK.only(
          "use_bias", "intermediate_dropout", "self_residual",
          "cross_residual", "cross_attention").replace(use_bias=False))

  def _block(self, index, width):
    c = self._config
    return decoder_block.RealFormerDecoderBlock(
        **self._block_arguments(index), use_bias=c["use_bias"],
        intermediate_dropout=c["intermediate_dropout"],
        # Model Garden's seq2seq attention initializer.
        attention_initializer=seq2seq_transformer.attention_initializer(
            width),
        self_residual=c["self_residual"], cross_residual=c["cross_residual"],
        cross_attention=c["cross_attention"])

  def _final_norm_epsilon(self):
    return 1e-6  # Model Garden's TransformerDecoder's, whatever norm_epsilon.

  @property
  def cross_attention(self) -> bool:
    return self._config["cross_attention"]

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
