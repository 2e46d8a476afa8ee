"""Tests for RealFormerDecoderBlock."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers as mg_layers
from realformer_tf.layers import decoder_block as rdb
from tests.helpers import layer_checks as layer_test_utils
from tests.helpers import numpy_decoder_reference as ndr

B, T, S, D, N = 2, 5, 7, 16, 4


def _block(**kwargs):
  defaults = dict(num_attention_heads=N, inner_dim=24)
  defaults.update(kwargs)
  return rdb.RealFormerDecoderBlock(**defaults)


class RealFormerDecoderBlockTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    # self.x, .memory, .prev_self, .prev_cross, .self_mask, .cross_mask.
    vars(self).update(ndr.block_inputs(B, T, S, D, N))

  @parameterized.parameters(
      ("sum", False, (True, True), "relu"),
      ("sum", True, (True, True), "gelu"),
      ("mean", False, (True, True), "gelu"),
      ("mean", True, (True, True), "relu"),
      ("sum", False, (True, False), "relu"),
      ("mean", True, (False, True), "relu"))
  def test_matches_numpy(self, mode, norm_first, paths, activation):
    block = _block(residual_attention=mode, norm_first=norm_first,
                   self_residual=paths[0], cross_residual=paths[1],
                   inner_activation=activation, layer_index=2)
    out, self_scores, cross_scores = block(
        self.x, self.memory, self_scores=self.prev_self,
        cross_scores=self.prev_cross, self_attention_mask=self.self_mask,
        cross_attention_mask=self.cross_mask)
    want, want_self, want_cross = ndr.decoder_block(
        self.x, self.memory, ndr.decoder_block_weights(block),
        self.self_mask * ndr.causal_mask(B, T), self.cross_mask,
        self.prev_self, self.prev_cross, mode if paths[0] else "none",
        mode if paths[1] else "none", 2, norm_first, activation)
    self.assertAllClose(want_self, self_scores, atol=1e-5)
    self.assertAllClose(want_cross, cross_scores, atol=1e-5)
    self.assertAllClose(want, out, atol=1e-5)

  @parameterized.parameters(False, True)
  def test_decoder_only_matches_numpy(self, norm_first):
    block = _block(cross_attention=False, norm_first=norm_first,
                   residual_attention="mean", layer_index=1)
    out, self_scores, cross_scores = block(
        self.x, self_scores=self.prev_self,
        self_attention_mask=self.self_mask)
    self.assertIsNone(cross_scores)
    self.assertFalse(any("encdec" in w.name for w in block.weights))
    want, want_self, _ = ndr.decoder_block(
        self.x, None, ndr.decoder_block_weights(block),
        self.self_mask * ndr.causal_mask(B, T), None, self.prev_self, None,
        "mean", "none", 1, norm_first)
    self.assertAllClose(want_self, self_scores, atol=1e-5)
    self.assertAllClose(want, out, atol=1e-5)

  @parameterized.parameters("sum", "mean")
  def test_causal_position_t_ignores_later_tokens(self, mode):
    block = _block(residual_attention=mode, layer_index=1)
    out, s, c = block(self.x, self.memory, self_scores=self.prev_self,
                      cross_scores=self.prev_cross)
    changed = self.x.copy()
    changed[:, 3:] = np.random.default_rng(1).normal(size=(B, T - 3, D))
    prev = self.prev_self.copy()
    prev[:, :, :, 3:] += 100.0      # later keys in the incoming running sum
    out2, s2, _ = block(changed, self.memory, self_scores=prev,
                        cross_scores=self.prev_cross)
    self.assertAllClose(out[:, :3], out2[:, :3], atol=1e-6)
    self.assertNotAllClose(out[:, 3:], out2[:, 3:])
    # The passed-on sum is unmasked: later keys' scores are in it.
    self.assertNotAllClose(s[:, :, :3, 3:], s2[:, :, :3, 3:])

  @parameterized.parameters(False, True)
  def test_model_garden_checkpoint_round_trip(self, norm_first):
    mg = mg_layers.TransformerDecoderBlock(
        num_attention_heads=N, intermediate_size=24,
        intermediate_activation="relu", norm_first=norm_first)
    causal = self.self_mask * ndr.causal_mask(B, T)
    want, _ = mg([self.x, self.memory, self.cross_mask, causal])
    ours = _block(residual_attention="none", norm_first=norm_first)
    ours(self.x, self.memory)
    path = tf.train.Checkpoint(block=mg).write(
        self.get_temp_dir() + "/mg")
    status = tf.train.Checkpoint(block=ours).read(path)
    status.assert_existing_objects_matched().expect_partial()
    got, _, _ = ours(self.x, self.memory, self_attention_mask=self.self_mask,
                     cross_attention_mask=self.cross_mask)
    self.assertAllClose(want, got, atol=1e-5)
    # Same Keras weight names below the block's own name.
    names = lambda layer: sorted(w.name.split("/", 1)[1] for w in layer.weights)
    self.assertEqual(names(mg), names(ours))

  def test_config_round_trip_and_trains(self):
    block = _block(residual_attention="mean", self_residual=False,
                   use_bias=False, norm_first=True, output_dropout=0.1,
                   attention_initializer="he_normal", layer_index=3)
    block(self.x, self.memory)
    clone = layer_test_utils.assert_config_round_trip(block)
    self.assertFalse(clone.get_config()["self_residual"])
    self.assertEqual(3, clone.get_config()["layer_index"])
    self.assertEqual(0.1, clone.get_config()["output_dropout"])

    def model_fn():
      x, memory = tf_keras.Input((T, D)), tf_keras.Input((S, D))
      # Pre-LN: a Post-LN output's mean square is fixed by its LayerNorm.
      h, s, c = _block(norm_first=True)(x, memory)
      h, s, c = _block(norm_first=True, layer_index=1)(
          h, memory, self_scores=s, cross_scores=c)
      # Scores as outputs too: softmax alone gives key biases no gradient.
      return tf_keras.Model([x, memory], [h, s, c])
    layer_test_utils.assert_trains(model_fn, [self.x, self.memory])

  @parameterized.parameters(("float32", tf.float32), ("compute", tf.float16))
  def test_score_dtype_under_mixed_precision(self, score_dtype, want_dtype):
    with layer_test_utils.mixed_precision_scope("mixed_float16"):
      block = _block(score_dtype=score_dtype, layer_index=1)
      out, self_scores, cross_scores = block(
          self.x, self.memory, self_scores=self.prev_self,
          cross_scores=self.prev_cross, self_attention_mask=self.self_mask,
          cross_attention_mask=self.cross_mask)
    self.assertEqual(want_dtype, self_scores.dtype)
    self.assertEqual(want_dtype, cross_scores.dtype)
    self.assertTrue(np.all(np.isfinite(out.numpy())))
    # The float32 path is the float32 block's, to float16 rounding of Q, K.
    reference = _block(layer_index=1)
    reference(self.x, self.memory)
    reference.set_weights(block.get_weights())
    _, want_self, _ = reference(
        self.x, self.memory, self_scores=self.prev_self,
        cross_scores=self.prev_cross, self_attention_mask=self.self_mask,
        cross_attention_mask=self.cross_mask)
    self.assertAllClose(want_self, tf.cast(self_scores, tf.float32),
                        atol=0.05, rtol=0.01)

  @parameterized.parameters((False, True), (True, False))
  def test_recompute_same_outputs_and_gradients(self, norm_first,
                                                cross_attention):
    blocks = [_block(norm_first=norm_first, cross_attention=cross_attention,
                     recompute=r) for r in (False, True)]
    memory = tf.constant(self.memory) if cross_attention else None
    for block in blocks:
      block(self.x, memory)
    blocks[1].set_weights(blocks[0].get_weights())
    x, prev = tf.constant(self.x), tf.constant(self.prev_self)

    def run(block):
      with tf.GradientTape() as tape:
        tape.watch([x, prev] + ([memory] if cross_attention else []))
        out, scores, cross, probs, _ = block(
            x, memory, self_scores=prev, self_attention_mask=self.self_mask,
            training=True, return_attention_probs=True)
        loss = (tf.reduce_sum(out ** 2) + tf.reduce_sum(probs) +
                tf.reduce_sum(scores * out[:, None, :, :1]))
        if cross_attention:
          loss += tf.reduce_sum(cross * out[:, None, :, :1])
      return [out, scores] + tape.gradient(
          loss, [x, prev] + block.trainable_variables +
          ([memory] if cross_attention else []))

    want = run(blocks[0])
    for got in (run(blocks[1]), tf.function(run)(blocks[1])):
      self.assertLen(got, len(want))
      for a, b in zip(want, got):
        self.assertAllClose(a, b, atol=1e-5)
    # The attentions' probability dropout repeats its masks when recomputed.
    attentions = [blocks[1].self_attention] + (
        [blocks[1].encdec_attention] if cross_attention else [])
    self.assertTrue(all(a.get_config()["recompute"] for a in attentions))

  def test_accepts_model_garden_decoder_block_names(self):
    block = rdb.RealFormerDecoderBlock(
        num_attention_heads=N, intermediate_size=24,
        intermediate_activation="gelu", dropout_rate=0.1,
        attention_dropout_rate=0.2)
    config = block.get_config()
    self.assertEqual((24, "gelu", 0.1, 0.2), tuple(config[k] for k in (
        "inner_dim", "inner_activation", "output_dropout",
        "attention_dropout")))
    self.assertNotIn("intermediate_size", config)
    with self.assertRaisesRegex(TypeError, "needs inner_dim"):
      rdb.RealFormerDecoderBlock(num_attention_heads=N)

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, "memory .* is required"):
      _block()(self.x)
    with self.assertRaisesRegex(ValueError, "cross_attention=False"):
      _block(cross_attention=False)(self.x, self.memory)
    with self.assertRaisesRegex(ValueError, "not divisible"):
      _block(num_attention_heads=3)(self.x, self.memory)
    with self.assertRaisesRegex(ValueError, "residual_attention"):
      _block(residual_attention="avg")
    with self.assertRaisesRegex(ValueError, "score_dtype"):
      _block(score_dtype="float16")
    with self.assertRaisesRegex(ValueError, r"prev_scores has shape"):
      _block()(self.x, self.memory, cross_scores=self.prev_self)


if __name__ == "__main__":
  tf.test.main()
