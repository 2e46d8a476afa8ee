"""RealFormer encoder-decoder on Model Garden's `Seq2SeqTransformer`.

Model Garden's model owns embeddings, output projection and decoding; this
fills its encoder slot with `RealFormerEncoderBlock`s and its decoder slot
with `RealFormerDecoder`: one residual path per attention type.
"""

from typing import Optional

import tf_keras

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf import utils
from realformer_tf.layers import encoder_block
from realformer_tf.networks import decoder as decoder_lib
from realformer_tf.networks import score_stack


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerSeq2SeqEncoder(score_stack.BlockStack):
  """Encoder stack for `Seq2SeqTransformer`'s `encoder_layer` slot.

  Same call and attribute names as Model Garden's seq2seq
  `TransformerEncoder`, built from `RealFormerEncoderBlock`s (always with
  attention biases). Args: those of `score_stack.BlockStack`.
  """

  _blocks_attribute = "encoder_layers"

  def _block(self, index, width):
    return encoder_block.RealFormerEncoderBlock(
        **self._block_arguments(index))

  def call(self, encoder_inputs, attention_mask=None,
           return_attention_scores: bool = False, training=None):
    """Returns the output, and per-layer scores and probs if asked."""
    hiddens, (scores,), (probs,) = score_stack.chain_blocks(
        self.encoder_layers, encoder_inputs, ("scores",),
        attention_mask=attention_mask, training=training)
    hidden = self._normalize(hiddens[-1])
    if return_attention_scores:
      return hidden, {"scores": scores, "probs": probs}
    return hidden


def build_seq2seq_transformer(vocab_size: int,
                              embedding_width: int,
                              encoder: RealFormerSeq2SeqEncoder,
                              decoder: decoder_lib.RealFormerDecoder,
                              eos_id: int,
                              dropout_rate: float = 0.0,
                              padded_decode: bool = False,
                              decode_max_length: Optional[int] = None,
                              extra_decode_length: int = 0,
                              beam_size: int = 4,
                              alpha: float = 0.6
                              ) -> seq2seq_transformer.Seq2SeqTransformer:
  """Model Garden's `Seq2SeqTransformer` with the RealFormer stacks (each
  checked against `embedding_width`)."""
  if not decoder.cross_attention:
    raise ValueError("The seq2seq decoder needs cross_attention=True.")
  for name, stack in (("encoder", encoder), ("decoder", decoder)):
    utils.check_heads_divide(embedding_width, stack.num_attention_heads,
                             f"{name} embedding_width")
  return seq2seq_transformer.Seq2SeqTransformer(
      vocab_size=vocab_size, embedding_width=embedding_width,
      dropout_rate=dropout_rate, padded_decode=padded_decode,
      decode_max_length=decode_max_length,
      extra_decode_length=extra_decode_length, beam_size=beam_size,
      alpha=alpha, encoder_layer=encoder, decoder_layer=decoder,
      eos_id=eos_id)
