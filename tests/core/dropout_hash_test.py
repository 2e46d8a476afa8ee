"""The dropout hash against a NumPy reference and Murmur3's known answers."""

import types

import numpy as np
from absl.testing import parameterized
import tensorflow as tf

from realformer_tf.core import dropout_hash
from realformer_tf.core import pallas_attention_common as common
from realformer_tf.layers import hashed_dropout
from tests.helpers import numpy_reference

# NumPy uint32 arrays wrap on `+` and `*`: the core's ops namespace in NumPy.
NUMPY_OPS = types.SimpleNamespace(
    word=np.uint32, srl=lambda x, bits: x >> np.uint32(bits),
    iota=lambda n: np.arange(n, dtype=np.uint32), reshape=np.reshape)


class DropoutHashTest(tf.test.TestCase, parameterized.TestCase):

  def test_fmix32_known_answers(self):
    # MurmurHash3's finalizer: fmix32(0) = 0, fmix32(1) = 0x514E28B7.
    with np.errstate(over="ignore"):
      out = dropout_hash.fmix32(NUMPY_OPS, np.array([0, 1], np.uint32))
    self.assertEqual([0, 0x514E28B7], out.tolist())

  @parameterized.parameters((0.0, 0), (0.1, 1677722), (0.5, 1 << 23))
  def test_keep_threshold(self, rate, threshold):
    self.assertEqual(threshold, dropout_hash.keep_threshold(rate))

  @parameterized.parameters(-0.1, 1.0, 1.5)
  def test_keep_threshold_rejects_rates_outside_0_1(self, rate):
    with self.assertRaisesRegex(ValueError, f"rate must be in .*{rate}"):
      dropout_hash.keep_threshold(rate)

  @parameterized.parameters(
      ([2, 3, 17, 33], (123, -77), 0.1),
      ([4, 9, 5], (0, 0), 0.25),
      ([6, 70], (2**31 - 1, -2**31), 0.5),
      ([40], (5, 6), 0.1),
      ([2, 2, 2, 3, 8], (9, 1), 0.3))
  def test_tensorflow_mask_matches_numpy_reference(self, shape, seed, rate):
    got = hashed_dropout.keep_mask(tf.constant(seed, tf.int32),
                                   tf.constant(shape), rate)
    want = numpy_reference.hashed_keep_mask(seed, shape, rate)
    self.assertAllEqual(want, got)

  def test_jax_mask_matches_numpy_reference(self):
    if not common.HAVE_PALLAS:
      self.skipTest("no jax with Pallas")
    seed = np.array([123, -77], np.int32)
    got = np.asarray(common.dropout_keep_mask(seed, 2, 3, 17, 33, 0.1))
    self.assertAllEqual(
        numpy_reference.hashed_keep_mask(seed, [2, 3, 17, 33], 0.1), got)
    # A uint32 key's words are the same bit patterns.
    got = np.asarray(common.dropout_keep_mask(seed.view(np.uint32), 2, 3, 17,
                                              33, 0.1))
    self.assertAllEqual(
        numpy_reference.hashed_keep_mask(seed, [2, 3, 17, 33], 0.1), got)


if __name__ == "__main__":
  tf.test.main()
