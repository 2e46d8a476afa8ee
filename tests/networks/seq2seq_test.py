"""Tests for the RealFormer seq2seq encoder and `build_seq2seq_transformer`."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from realformer_tf.networks import decoder as decoder_lib
from realformer_tf.networks import seq2seq as seq2seq_lib

VOCAB, WIDTH, HEADS = 20, 16, 2


def _model(mode, padded_decode=False, decode_max_length=None):
  encoder = seq2seq_lib.RealFormerSeq2SeqEncoder(
      num_layers=2, num_attention_heads=HEADS, intermediate_size=32,
      residual_attention=mode)
  decoder = decoder_lib.RealFormerDecoder(
      num_layers=3, num_attention_heads=HEADS, intermediate_size=32,
      residual_attention=mode)
  return seq2seq_lib.build_seq2seq_transformer(
      vocab_size=VOCAB, embedding_width=WIDTH, encoder=encoder,
      decoder=decoder, eos_id=1, padded_decode=padded_decode,
      decode_max_length=decode_max_length, beam_size=2)


def _stepwise_logits(model, sources, shifted_targets, padded):
  """Logits from Model Garden's decoding function, one token at a time.

  Mirrors `Seq2SeqTransformer.call`'s set-up of the beam search cache.
  """
  length = shifted_targets.shape[1]
  mask = tf.not_equal(sources, 0)
  embedded = model.embedding_lookup(sources) * tf.cast(mask, tf.float32)[
      ..., None]
  encoder_inputs = embedded + model.position_embedding(embedded)
  attention_mask = tf.cast(mask[:, None, :], tf.int32) * tf.ones(
      [sources.shape[0], sources.shape[1], 1], tf.int32)
  memory = model.encoder_layer(encoder_inputs, attention_mask=attention_mask)
  size = length if padded else 0
  cache = {str(i): {"key": tf.zeros([sources.shape[0], size, HEADS,
                                     WIDTH // HEADS]),
                    "value": tf.zeros([sources.shape[0], size, HEADS,
                                       WIDTH // HEADS])}
           for i in range(model.decoder_layer.num_layers)}
  cache["encoder_outputs"] = memory
  cache["encoder_decoder_attention_mask"] = tf.cast(mask[:, None, :],
                                                    tf.float32)
  step = model._get_symbols_to_logits_fn(length)  # pylint: disable=protected-access
  logits = []
  for i in range(length):
    out, cache = step(shifted_targets[:, :i + 1], i, cache)
    logits.append(out)
  return tf.stack(logits, axis=1)


class RealFormerSeq2SeqTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.sources = rng.integers(2, VOCAB, size=(2, 6)).astype(np.int32)
    self.sources[1, 4:] = 0                            # source padding
    self.targets = rng.integers(2, VOCAB, size=(2, 5)).astype(np.int32)

  @parameterized.product(mode=["sum", "mean"], padded=[False, True])
  def test_incremental_decoding_matches_full_causal_pass(self, mode, padded):
    model = _model(mode)
    full = model({"inputs": self.sources, "targets": self.targets})
    shifted = np.pad(self.targets, [[0, 0], [1, 0]])[:, :-1]
    if padded:
      model._padded_decode = True  # pylint: disable=protected-access
    steps = _stepwise_logits(model, tf.constant(self.sources),
                             tf.constant(shifted), padded)
    self.assertAllClose(full, steps, atol=1e-5)

  def test_beam_search_runs_and_is_deterministic(self):
    model = _model("sum")
    a = model({"inputs": self.sources})
    b = model({"inputs": self.sources})
    self.assertAllEqual(a["outputs"], b["outputs"])
    self.assertEqual(2, a["outputs"].shape[0])

  def test_encoder_returns_each_layers_scores_and_probs(self):
    encoder = seq2seq_lib.RealFormerSeq2SeqEncoder(
        num_layers=3, num_attention_heads=HEADS, intermediate_size=32)
    x = tf.random.normal([2, 6, WIDTH])
    out, attention = encoder(x, return_attention_scores=True)
    self.assertAllClose(out, encoder(x), atol=1e-6)
    self.assertLen(attention["scores"], 3)
    self.assertLen(attention["probs"], 3)
    self.assertAllClose(tf.ones([2, HEADS, 6]),
                        tf.reduce_sum(attention["probs"][-1], -1), atol=1e-5)
    # Layer 0's scores go on to layer 1: its probs are the softmax of its sum.
    self.assertAllClose(tf.nn.softmax(attention["scores"][1]),
                        attention["probs"][1], atol=1e-5)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "cross_attention=True"):
      seq2seq_lib.build_seq2seq_transformer(
          VOCAB, WIDTH, seq2seq_lib.RealFormerSeq2SeqEncoder(),
          decoder_lib.RealFormerDecoder(cross_attention=False), 1)
    with self.assertRaisesRegex(ValueError, "not divisible"):
      seq2seq_lib.build_seq2seq_transformer(
          VOCAB, 18, seq2seq_lib.RealFormerSeq2SeqEncoder(
              num_attention_heads=4),
          decoder_lib.RealFormerDecoder(num_attention_heads=4), 1)



if __name__ == "__main__":
  tf.test.main()
