"""Tests for HashedDropout: the mask's statistics, its gradient, its fallbacks."""

from unittest import mock

import numpy as np
from absl.testing import parameterized
import tensorflow as tf
import tf_keras

from realformer_tf.layers import hashed_dropout
from tests.helpers import layer_checks
from tests.helpers import numpy_reference


def _xla(fn):
  return tf.function(fn, jit_compile=True)


class HashedDropoutTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.1, 0.5)
  def test_keep_rate_scale_and_fresh_masks_under_xla(self, rate):
    layer = hashed_dropout.HashedDropout(rate)
    step = _xla(lambda x: layer(x, training=True))
    x = tf.ones([4, 3, 64, 96])
    first, second = step(x).numpy(), step(x).numpy()
    scale = np.float32(1.0 / (1.0 - rate))
    for out in (first, second):
      self.assertAllInSet(np.unique(out), [0.0, scale])
      kept, n = (out != 0).mean(), out.size
      sigma = np.sqrt(rate * (1 - rate) / n)
      self.assertLess(abs(kept - (1 - rate)), 5 * sigma)
    # A new seed per call: about 2 p (1 - p) of the elements differ.
    differ = (first != second).mean()
    self.assertAllClose(2 * rate * (1 - rate), differ, atol=0.01)

  def assertAllInSet(self, values, allowed):  # pylint: disable=invalid-name
    self.assertEmpty(set(values.tolist()) - set(np.float32(allowed).tolist()))

  def test_neighbours_are_uncorrelated(self):
    layer = hashed_dropout.HashedDropout(0.5)
    keep = (_xla(lambda x: layer(x, training=True))(
        tf.ones([2, 4, 128, 128])).numpy() != 0).astype(np.float64)
    limit = 5 / np.sqrt(keep.size)
    for axis in (-1, -2, -3, 0):  # columns, rows, heads, batch
      a = np.moveaxis(keep, axis, 0)
      corr = np.corrcoef(a[:-1].ravel(), a[1:].ravel())[0, 1]
      self.assertLess(abs(corr), limit, f"axis {axis}")

  def test_gradient_uses_the_forward_mask(self):
    layer = hashed_dropout.HashedDropout(0.3)
    weights = tf.constant(np.random.default_rng(0).normal(size=[3, 5, 40]),
                          tf.float32)

    @tf.function(jit_compile=True)
    def step(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(y * weights)
      return y, tape.gradient(loss, x)

    y, grad = step(tf.ones([3, 5, 40]))
    kept = tf.cast(y != 0, tf.float32)
    self.assertAllClose(kept * weights / 0.7, grad)
    self.assertBetween(float(tf.reduce_mean(kept)), 0.55, 0.85)

  def test_mask_is_the_reference_hash_of_the_drawn_seed(self):
    # Draws the seed as the layer does, then checks the output against the
    # NumPy reference's mask for that seed.
    tf_keras.utils.set_random_seed(3)
    layer = hashed_dropout.HashedDropout(0.2)
    draws = []
    original = hashed_dropout.hashed_dropout

    def record(inputs, seed, rate):
      draws.append(seed)
      return original(inputs, seed, rate), seed

    hashed_dropout.hashed_dropout = record
    try:
      out, seed = _xla(lambda x: layer(x, training=True))(tf.ones([2, 6, 9]))
    finally:
      hashed_dropout.hashed_dropout = original
    self.assertLen(draws, 1)
    want = numpy_reference.hashed_keep_mask(seed.numpy(), [2, 6, 9], 0.2)
    self.assertAllEqual(want, out.numpy() != 0)

  def test_inference_and_rate_zero_are_identity(self):
    x = tf.random.normal([2, 3, 8])
    layer = hashed_dropout.HashedDropout(0.4)
    self.assertAllEqual(x, _xla(lambda x: layer(x, training=False))(x))
    self.assertAllEqual(x, _xla(lambda x: layer(x))(x))  # learning phase 0
    zero = hashed_dropout.HashedDropout(0.0)
    self.assertAllEqual(x, _xla(lambda x: zero(x, training=True))(x))

  def test_outside_xla_it_is_tf_keras_dropout(self):
    x = tf.ones([4, 32])
    outputs = []
    for cls in (hashed_dropout.HashedDropout, tf_keras.layers.Dropout):
      tf_keras.utils.set_random_seed(7)
      layer = cls(0.5, seed=11)
      outputs.append([layer(x, training=True),
                      tf.function(lambda x, l=layer: l(x, training=True))(x)])
    self.assertAllEqual(outputs[1][0], outputs[0][0])
    self.assertAllEqual(outputs[1][1], outputs[0][1])

  def test_noise_shape_keeps_the_library_dropout_under_xla(self):
    layer = hashed_dropout.HashedDropout(0.5, noise_shape=[4, 1, 16])
    out = _xla(lambda x: layer(x, training=True))(tf.ones([4, 8, 16])).numpy()
    # The mask is shared along the noise shape's 1 axis.
    self.assertAllEqual(np.repeat(out[:, :1], 8, axis=1), out)

  def test_hashes_only_inside_xla(self):
    record, seen = layer_checks.trace_recorder(hashed_dropout.hashes_here)
    record()
    tf.function(record)()
    _xla(record)()
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
      _xla(record)()
    self.assertEqual([False, False, True, True], seen)

  @parameterized.parameters(tf.distribute.TPUStrategy,
                            tf.distribute.experimental.TPUStrategy)
  def test_tpu_strategies_keep_the_library_dropout(self, strategy_class):
    # No TPU here: a bare instance stands in for the current strategy.
    tpu = object.__new__(strategy_class)
    record, seen = layer_checks.trace_recorder(hashed_dropout.hashes_here)

    with mock.patch.object(tf.distribute, "get_strategy", lambda: tpu):
      _xla(record)()
    _xla(record)()
    self.assertEqual([False, True], seen)

  def test_xla_step_makes_no_full_size_random_words(self):

    def random_shapes(layer):
      return layer_checks.random_op_shapes(
          _xla(lambda x: layer(x, training=True)), tf.ones([8, 4, 64, 64]))

    # The library draws a float per element; HashedDropout two seed words.
    self.assertEqual(["f32[8,4,64,64]"],
                     random_shapes(tf_keras.layers.Dropout(0.1)))
    self.assertEqual(["s32[2]"],
                     random_shapes(hashed_dropout.HashedDropout(0.1)))

  def test_config_round_trip_and_registration(self):
    layer = hashed_dropout.HashedDropout(0.3, seed=5, name="drop")
    config = layer.get_config()
    self.assertEqual({"rate": 0.3, "seed": 5, "noise_shape": None},
                     {k: config[k] for k in ("rate", "seed", "noise_shape")})
    again = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    self.assertIsInstance(again, hashed_dropout.HashedDropout)
    self.assertEqual(config, again.get_config())

  def test_dropout_layer_picks_recomputing_dropout_for_recompute(self):
    self.assertIsInstance(hashed_dropout.dropout_layer(0.1),
                          hashed_dropout.HashedDropout)
    recomputing = hashed_dropout.dropout_layer(0.1, recompute=True)
    self.assertNotIsInstance(recomputing, hashed_dropout.HashedDropout)
    self.assertEqual("RecomputingDropout", type(recomputing).__name__)


if __name__ == "__main__":
  tf.test.main()
