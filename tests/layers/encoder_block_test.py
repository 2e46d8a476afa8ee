"""Tests for RealFormerEncoderBlock."""

import inspect

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers as mg_layers
from realformer_tf.layers import encoder_block
from realformer_tf.networks import encoder as encoder_lib
from tests.helpers import layer_checks as layer_test_utils
from tests.helpers import numpy_reference


def _block(**kwargs):
  args = dict(num_attention_heads=4, inner_dim=32,
              inner_activation=encoder_lib.approx_gelu)
  args.update(kwargs)
  return encoder_block.RealFormerEncoderBlock(**args)


class RealFormerEncoderBlockTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(1)
    self.x = rng.normal(size=(2, 6, 16)).astype(np.float32)
    self.prev = rng.normal(size=(2, 4, 6, 6)).astype(np.float32)
    mask = np.ones((2, 6, 6), np.int32)
    mask[1, :, 3:] = 0
    self.mask = mask

  @parameterized.product(mode=["sum", "mean", "none"], norm_first=[False, True])
  def test_matches_numpy(self, mode, norm_first):
    block = _block(residual_attention=mode, norm_first=norm_first,
                   layer_index=2)
    out, scores = block(self.x, scores=self.prev, attention_mask=self.mask)
    want_out, want_scores, _ = numpy_reference.block(
        self.x, numpy_reference.block_weights(block), self.mask, self.prev,
        mode, 2, norm_first)
    self.assertAllClose(want_scores, scores, atol=1e-5)
    self.assertAllClose(want_out, out, atol=1e-5)

  @parameterized.parameters(False, True)
  def test_none_matches_model_garden_block(self, norm_first):
    mg = mg_layers.TransformerEncoderBlock(
        num_attention_heads=4, inner_dim=32,
        inner_activation=encoder_lib.approx_gelu, norm_first=norm_first)
    want = mg([self.x, self.mask])
    block = _block(residual_attention="none", norm_first=norm_first)
    block(self.x)
    block.set_weights(mg.get_weights())
    got, _ = block(self.x, attention_mask=self.mask)
    self.assertAllClose(want, got, atol=1e-6)
    # Object-based checkpoints match variable for variable.
    path = tf.train.Checkpoint(block=mg).write(self.get_temp_dir() + "/ckpt")
    fresh = _block(residual_attention="sum", norm_first=norm_first)
    fresh(self.x)
    status = tf.train.Checkpoint(block=fresh).read(path)
    status.assert_existing_objects_matched().assert_consumed()

  def test_output_range_slices_hidden_and_scores(self):
    block = _block()
    full, full_scores = block(self.x, scores=self.prev,
                              attention_mask=self.mask)
    part, part_scores = block(self.x, scores=self.prev,
                              attention_mask=self.mask, output_range=1)
    self.assertAllClose(full[:, :1], part, atol=1e-5)
    self.assertAllClose(full_scores[:, :, :1], part_scores, atol=1e-5)

  def test_returns_probs(self):
    block = _block()
    _, _, probs = block(self.x, attention_mask=self.mask,
                        return_attention_probs=True)
    self.assertAllClose(np.ones((2, 4, 6)), tf.reduce_sum(probs, -1))

  def test_config_round_trip(self):
    block = _block(output_dropout=0.2, attention_dropout=0.3, norm_first=True,
                   norm_epsilon=1e-6, residual_attention="mean",
                   layer_index=7, kernel_initializer="he_normal", name="blk",
                   score_dtype="compute", recompute=True)
    block(self.x)
    clone = layer_test_utils.assert_config_round_trip(block)
    config = clone.get_config()
    # Exactly the constructor's arguments, after the base layer's config.
    arguments = set(inspect.signature(type(block)).parameters)
    base = set(tf_keras.layers.Layer(name="blk").get_config())
    self.assertEqual(arguments - {"self", "kwargs"}, set(config) - base)
    for key, value in dict(num_attention_heads=4, inner_dim=32,
                           output_dropout=0.2, attention_dropout=0.3,
                           norm_first=True, norm_epsilon=1e-6,
                           residual_attention="mean", layer_index=7).items():
      self.assertEqual(value, config[key], key)
    # The activation survives as the tanh approximation, not exact GELU.
    clone(self.x)
    clone.set_weights(block.get_weights())
    self.assertAllClose(block(self.x)[0], clone(self.x)[0], atol=1e-6)

  def test_arguments_bind_in_order_and_are_checked_by_name(self):
    config = encoder_block.RealFormerEncoderBlock(4, 32, "relu").get_config()
    self.assertEqual((4, 32, "relu"), tuple(config[k] for k in (
        "num_attention_heads", "inner_dim", "inner_activation")))
    for kwargs, error, message in (
        (dict(score_dtype=None), ValueError,
         r"RealFormerEncoderBlock: score_dtype must be one of .*got None"),
        (dict(output_dropout=1.5), ValueError,
         r"RealFormerEncoderBlock: output_dropout must be a rate"),
        (dict(layer_index=-1), ValueError, "layer_index"),
        (dict(inner_dim=None), TypeError,
         "RealFormerEncoderBlock needs inner_dim")):
      with self.assertRaisesRegex(error, message):
        _block(**kwargs)

  def test_saved_float32_score_dtype_stays_float32(self):
    config = _block().get_config()
    config["score_dtype"] = "float32"   # as configs saved before "auto"
    with layer_test_utils.mixed_precision_scope("mixed_bfloat16"):
      block = encoder_block.RealFormerEncoderBlock.from_config(config)
      _, scores = block(self.x, scores=self.prev)
    self.assertEqual(tf.float32, scores.dtype)

  def test_functional_stack_trains(self):
    def model_fn():
      hidden = tf_keras.Input(shape=(6, 16))
      mask = tf_keras.Input(shape=(6, 6), dtype=tf.int32)
      x, scores = _block(layer_index=0)(hidden, attention_mask=mask)
      x, scores = _block(layer_index=1)(x, scores=scores, attention_mask=mask)
      return tf_keras.Model([hidden, mask], [x, scores])
    layer_test_utils.assert_trains(model_fn, [self.x, self.mask])

  @parameterized.parameters(("mixed_float16", tf.float32),
                            ("mixed_bfloat16", tf.bfloat16))
  def test_mixed_precision(self, policy, score_dtype):
    with layer_test_utils.mixed_precision_scope(policy):
      block = _block()
      out, scores = block(self.x, scores=self.prev, attention_mask=self.mask)
    self.assertEqual(score_dtype, scores.dtype)  # score_dtype="auto"
    self.assertTrue(np.all(np.isfinite(out.numpy())))

  def test_hidden_not_divisible_by_heads(self):
    with self.assertRaisesRegex(ValueError,
                                "width 16 is not divisible by "
                                "num_attention_heads=3"):
      _block(num_attention_heads=3)(self.x)


  @parameterized.parameters(False, True)
  def test_recompute_same_outputs_and_gradients(self, norm_first):
    blocks = [_block(norm_first=norm_first, recompute=r) for r in (False, True)]
    blocks[0](self.x)
    blocks[1](self.x)
    blocks[1].set_weights(blocks[0].get_weights())
    x, prev = tf.constant(self.x), tf.constant(self.prev)

    def run(block):
      with tf.GradientTape() as tape:
        tape.watch([x, prev])
        out, scores = block(x, scores=prev, attention_mask=self.mask,
                            training=True)
        loss = tf.reduce_sum(out ** 2) + tf.reduce_sum(scores * out[:, None, :, :1])
      return [out, scores] + tape.gradient(
          loss, [x, prev] + block.trainable_variables)

    want = run(blocks[0])
    for got in (run(blocks[1]), tf.function(run)(blocks[1])):
      self.assertLen(got, len(want))
      for a, b in zip(want, got):
        self.assertAllClose(a, b, atol=1e-5)

if __name__ == "__main__":
  tf.test.main()
