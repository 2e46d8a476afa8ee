"""Tests for the XLA-only fast forms of residual attention's steps."""

import numpy as np
import tensorflow as tf
import tf_keras

from realformer_tf.layers import xla_kernels
from tests.helpers import layer_checks


class XlaKernelsTest(tf.test.TestCase):

  def test_in_xla_context_only_inside_jit_compile(self):
    record, seen = layer_checks.trace_recorder(xla_kernels.in_xla_context)
    record()
    tf.function(record)()
    tf.function(record, jit_compile=True)()
    tf.function(lambda: tf.function(record)(), jit_compile=True)()  # nested
    self.assertEqual([False, False, True, True], seen)

  def test_query_key_scores_float32_from_bfloat16_matches_reference(self):
    rng = np.random.default_rng(0)
    query = tf.constant(rng.normal(size=(2, 5, 3, 4)), tf.bfloat16)
    key = tf.constant(rng.normal(size=(2, 7, 3, 4)), tf.bfloat16)

    def run(query, key):
      with tf.GradientTape() as tape:
        tape.watch([query, key])
        scores = xla_kernels.query_key_scores(query, key, tf.float32)
        loss = tf.reduce_sum(scores ** 2)
      return [scores] + tape.gradient(loss, [query, key])

    reference = run(query, key)   # eager: cast(einsum(...))
    fused = tf.function(run, jit_compile=True)(query, key)
    want = np.einsum("btnh,bsnh->bnts", tf.cast(query, tf.float32),
                     tf.cast(key, tf.float32))
    self.assertEqual(tf.float32, fused[0].dtype)
    self.assertEqual([2, 3, 5, 7], fused[0].shape)
    self.assertAllClose(want, fused[0], atol=0.05, rtol=0.01)
    for a, b in zip(reference, fused):
      self.assertEqual(a.dtype, b.dtype)
      self.assertAllClose(tf.cast(a, tf.float32), tf.cast(b, tf.float32),
                          atol=0.1, rtol=0.03)

  def test_query_key_scores_same_dtype_is_plain_einsum(self):
    rng = np.random.default_rng(1)
    query = rng.normal(size=(1, 2, 2, 3)).astype(np.float32)
    key = rng.normal(size=(1, 4, 2, 3)).astype(np.float32)
    got = xla_kernels.query_key_scores(tf.constant(query), tf.constant(key),
                                       tf.float32)
    self.assertAllClose(np.einsum("btnh,bsnh->bnts", query, key), got,
                        atol=1e-6)

  def test_fused_projection_equals_separate_layers(self):
    tf_keras.utils.set_random_seed(2)
    layers = [tf_keras.layers.EinsumDense("abc,cde->abde",
                                          output_shape=(None, 2, size),
                                          bias_axes="de")
              for size in (4, 4, 6)]
    inputs = tf.random.normal([2, 5, 8])
    for layer in layers:  # Built, with non-zero biases (their concat counts).
      layer(inputs)
      layer.bias.assign(tf.random.normal(layer.bias.shape))
    separate = [layer(inputs) for layer in layers]
    fused = xla_kernels.fused_projection(inputs, layers, use_bias=True)
    self.assertEqual([[2, 5, 2, 4], [2, 5, 2, 4], [2, 5, 2, 6]],
                     [t.shape.as_list() for t in fused])
    for a, b in zip(separate, fused):
      self.assertAllClose(a, b, atol=1e-5)


if __name__ == "__main__":
  tf.test.main()
