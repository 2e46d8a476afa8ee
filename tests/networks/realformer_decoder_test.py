"""Tests for RealFormerDecoder and the RealFormer Seq2SeqTransformer."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf.networks import realformer_decoder
from realformer_tf.networks import realformer_seq2seq
from tests.helpers import layer_checks as layer_test_utils

VOCAB, WIDTH, HEADS = 20, 16, 2


def _model(mode, padded_decode=False, decode_max_length=None):
  encoder = realformer_seq2seq.RealFormerSeq2SeqEncoder(
      num_layers=2, num_attention_heads=HEADS, intermediate_size=32,
      residual_attention=mode)
  decoder = realformer_decoder.RealFormerDecoder(
      num_layers=3, num_attention_heads=HEADS, intermediate_size=32,
      residual_attention=mode)
  return realformer_seq2seq.build_seq2seq_transformer(
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

  def test_model_garden_decoder_checkpoint_restores(self):
    mg = seq2seq_transformer.TransformerDecoder(
        num_layers=2, num_attention_heads=HEADS, intermediate_size=32)
    ours = realformer_decoder.RealFormerDecoder(
        num_layers=2, num_attention_heads=HEADS, intermediate_size=32,
        residual_attention="none")
    x = tf.random.normal([2, 5, WIDTH])
    memory = tf.random.normal([2, 6, WIDTH])
    causal = tf.linalg.band_part(tf.ones([2, 5, 5]), -1, 0)
    cross = tf.ones([2, 5, 6])
    want = mg(x, memory, self_attention_mask=causal,
              cross_attention_mask=cross)
    ours(x, memory)
    path = tf.train.Checkpoint(d=mg).write(self.get_temp_dir() + "/mg")
    tf.train.Checkpoint(d=ours).read(path).assert_existing_objects_matched()
    got = ours(x, memory, cross_attention_mask=cross)
    self.assertAllClose(want, got, atol=1e-5)

  def test_decoder_only_stack_and_config(self):
    decoder = realformer_decoder.RealFormerDecoder(
        num_layers=2, num_attention_heads=HEADS, intermediate_size=32,
        cross_attention=False, residual_attention="mean")
    x = tf.random.normal([2, 5, WIDTH])
    out, attention = decoder(x, return_attention_scores=True)
    self.assertEqual([2, 5, WIDTH], out.shape)
    self.assertLen(attention["self_scores"], 2)
    self.assertEmpty(attention["cross_scores"])
    changed = tf.concat([x[:, :3], tf.random.normal([2, 2, WIDTH])], 1)
    self.assertAllClose(out[:, :3], decoder(changed)[:, :3], atol=1e-6)
    clone = layer_test_utils.assert_config_round_trip(decoder)
    self.assertFalse(clone.cross_attention)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "cross_attention=True"):
      realformer_seq2seq.build_seq2seq_transformer(
          VOCAB, WIDTH, realformer_seq2seq.RealFormerSeq2SeqEncoder(),
          realformer_decoder.RealFormerDecoder(cross_attention=False), 1)
    with self.assertRaisesRegex(ValueError, "not divisible"):
      realformer_seq2seq.build_seq2seq_transformer(
          VOCAB, 18, realformer_seq2seq.RealFormerSeq2SeqEncoder(
              num_attention_heads=4),
          realformer_decoder.RealFormerDecoder(num_attention_heads=4), 1)
    with self.assertRaisesRegex(ValueError, "num_layers"):
      realformer_decoder.RealFormerDecoder(num_layers=0)


if __name__ == "__main__":
  tf.test.main()
