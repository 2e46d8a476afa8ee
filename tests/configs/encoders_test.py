"""Tests for the RealFormer encoder config and its Model Garden binding."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from realformer_tf import utils
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.networks import encoder as encoder_lib

_SMALL = dict(vocab_size=60, hidden_size=32, num_layers=2,
              num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=16, dropout_rate=0.0,
              attention_dropout_rate=0.0)


class EncoderConfigTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters("sum", "mean", "none")
  def test_model_garden_builds_realformer(self, mode):
    config = encoders.encoder_config(**_SMALL)
    config.override({"any": {"residual_attention": mode,
                             "norm_first": mode == "none"}})
    encoder = mg_encoders.build_encoder(config)
    self.assertIsInstance(encoder, encoder_lib.RealFormerEncoder)
    got = encoder.get_config()
    self.assertEqual(mode, got["residual_attention"])
    self.assertEqual(mode == "none", got["norm_first"])
    self.assertEqual(mode == "none", got["final_layer_norm"])
    self.assertEqual(64, got["inner_dim"])
    self.assertEqual(16, got["max_sequence_length"])
    self.assertEqual(0.02, got["initializer"]["config"]["stddev"])

  def test_extends_model_garden_bert_config(self):
    config = encoders.RealFormerEncoderConfig(
        **_SMALL, norm_first=True, return_word_embeddings=True)
    self.assertIsInstance(config, mg_encoders.BertEncoderConfig)
    added = (set(encoders.RealFormerEncoderConfig().as_dict()) -
             set(mg_encoders.BertEncoderConfig().as_dict()))
    self.assertEqual({"residual_attention", "final_layer_norm", "norm_epsilon",
                      "score_dtype", "recompute"}, added)
    encoder = encoders.build_realformer_encoder(config)
    self.assertTrue(encoder.get_config()["return_word_embeddings"])
    # Still read as RealFormer's, not as BERT's (which has no final LayerNorm).
    again = tf2_checkpoint.realformer_config_from(config)
    self.assertIsNone(again.final_layer_norm)
    self.assertTrue(again.return_word_embeddings)

  def test_gelu_is_tanh_approximation(self):
    encoder = encoders.build_realformer_encoder(
        encoders.RealFormerEncoderConfig(**_SMALL))
    x = np.linspace(-3, 3, 7).astype(np.float32)
    encoder(utils.dummy_inputs())  # The blocks build their layers on call.
    act = encoder.transformer_layers[0]._intermediate_activation_layer  # pylint: disable=protected-access
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    self.assertAllClose(want, act(x), atol=1e-6)

  def test_unknown_key_is_named(self):
    config = encoders.encoder_config()
    with self.assertRaisesRegex(KeyError, "residual_atention"):
      config.override({"any": {"residual_atention": "sum"}})

  def test_invalid_values(self):
    with self.assertRaisesRegex(ValueError, "residual_attention"):
      encoders.build_realformer_encoder(
          encoders.RealFormerEncoderConfig(residual_attention="max"))
    with self.assertRaisesRegex(ValueError, "hidden_size=30 is not divisible"):
      encoders.build_realformer_encoder(
          encoders.RealFormerEncoderConfig(hidden_size=30))


  def test_score_dtype_and_recompute_reach_the_encoder(self):
    config = encoders.encoder_config(**_SMALL)
    config.override({"any": {"score_dtype": "compute", "recompute": True}})
    encoder = mg_encoders.build_encoder(config)
    self.assertEqual("compute", encoder.get_config()["score_dtype"])
    block = encoder.transformer_layers[0].get_config()
    self.assertEqual("compute", block["score_dtype"])
    self.assertTrue(block["recompute"])
    with self.assertRaisesRegex(ValueError, "score_dtype.*'half'"):
      encoders.build_realformer_encoder(
          encoders.RealFormerEncoderConfig(score_dtype="half"))

if __name__ == "__main__":
  tf.test.main()
