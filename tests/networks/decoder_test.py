"""Tests for RealFormerDecoder, the seq2seq and decoder-only stack."""

import tensorflow as tf

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf.networks import decoder as decoder_lib
from tests.helpers import layer_checks as layer_test_utils

WIDTH, HEADS = 16, 2


class RealFormerDecoderTest(tf.test.TestCase):

  def test_model_garden_decoder_checkpoint_restores(self):
    mg = seq2seq_transformer.TransformerDecoder(
        num_layers=2, num_attention_heads=HEADS, intermediate_size=32)
    ours = decoder_lib.RealFormerDecoder(
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
    decoder = decoder_lib.RealFormerDecoder(
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

  def test_each_layers_outputs_and_both_paths(self):
    decoder = decoder_lib.RealFormerDecoder(
        num_layers=3, num_attention_heads=HEADS, intermediate_size=32)
    x, memory = tf.random.normal([2, 5, WIDTH]), tf.random.normal([2, 6, WIDTH])
    outputs, attention = decoder(x, memory, return_all_decoder_outputs=True,
                                 return_attention_scores=True)
    self.assertLen(outputs, 3)
    self.assertAllClose(outputs[-1], decoder(x, memory), atol=1e-6)
    for key, shape in (("self_scores", [2, HEADS, 5, 5]),
                       ("cross_scores", [2, HEADS, 5, 6]),
                       ("self_probs", [2, HEADS, 5, 5]),
                       ("cross_probs", [2, HEADS, 5, 6])):
      self.assertLen(attention[key], 3)
      self.assertEqual(shape, attention[key][-1].shape)
    # Causal: the first query attends to the first key only.
    self.assertAllClose(tf.ones([2, HEADS]),
                        attention["self_probs"][1][:, :, 0, 0], atol=1e-6)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "num_layers"):
      decoder_lib.RealFormerDecoder(num_layers=0)


if __name__ == "__main__":
  tf.test.main()
