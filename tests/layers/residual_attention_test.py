"""Tests for ResidualMultiHeadAttention and its reference math."""

from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from realformer_tf.layers import residual_attention as ra
from realformer_tf.layers import xla_kernels
from tests.helpers import layer_checks as layer_test_utils
from tests.helpers import numpy_reference


def _weights(layer):
  get = lambda l: [v.numpy() for v in l.weights]
  qk, qb = get(layer._query_dense)
  kk, kb = get(layer._key_dense)
  vk, vb = get(layer._value_dense)
  ok, ob = get(layer._output_dense)
  return dict(q_kernel=qk, q_bias=qb, k_kernel=kk, k_bias=kb, v_kernel=vk,
              v_bias=vb, o_kernel=ok, o_bias=ob)


class ResidualMultiHeadAttentionTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    # Layer weights drawn from one seed whatever ran before in this process
    # (the Keras 3 tests set the global TF seed): the bfloat16 XLA-vs-eager
    # tolerances below hold for these draws, not for every draw.
    tf_keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    self.query = rng.normal(size=(2, 5, 16)).astype(np.float32)
    self.value = rng.normal(size=(2, 7, 16)).astype(np.float32)
    self.prev = rng.normal(size=(2, 4, 5, 7)).astype(np.float32)
    mask = np.ones((2, 5, 7), np.int32)
    mask[1, :, 4:] = 0  # padded keys in the second example
    self.mask = mask

  @parameterized.product(mode=["sum", "mean", "none"], layer_index=[0, 3])
  def test_matches_numpy(self, mode, layer_index):
    layer = ra.ResidualMultiHeadAttention(
        num_heads=4, key_dim=4, residual_attention=mode,
        layer_index=layer_index)
    out, scores, probs = layer(self.query, self.value,
                               attention_mask=self.mask, prev_scores=self.prev,
                               return_attention_probs=True)
    want_out, want_scores, want_probs = numpy_reference.attention(
        self.query, self.value, _weights(layer), self.mask, self.prev, mode,
        layer_index)
    self.assertAllClose(want_scores, scores, atol=1e-5)
    self.assertAllClose(want_probs, probs, atol=1e-5)
    self.assertAllClose(want_out, out, atol=1e-5)

  def test_reference_function_is_eq5(self):
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, n, 4, 4)).astype(np.float32)
               for n in (5, 7, 7))
    bias = ra.attention_bias_from_mask(self.mask[:, None], tf.float32)
    context, scores, probs = ra.residual_dot_product_attention(
        q, k, v, prev_scores=self.prev, bias=bias, mode="mean", layer_index=2)
    want_scores = np.einsum("btnh,bsnh->bnts", q, k) / 2.0 + self.prev
    want_probs = numpy_reference.softmax(
        np.where(self.mask[:, None] == 1, want_scores / 3.0, -1e9))
    self.assertAllClose(want_scores, scores, atol=1e-5)   # mask not in S_l
    self.assertAllClose(want_probs, probs, atol=1e-6)
    self.assertAllClose(np.einsum("bnts,bsnh->btnh", want_probs, v), context,
                        atol=1e-5)

  def test_scores_are_unmasked_running_sum(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    _, masked = layer(self.query, self.value, attention_mask=self.mask,
                      prev_scores=self.prev)
    _, unmasked = layer(self.query, self.value, prev_scores=self.prev)
    self.assertAllClose(unmasked, masked)
    _, own = layer(self.query, self.value)
    self.assertAllClose(own + self.prev, masked, atol=1e-5)
    # Mean mode hands on the running *sum* too.
    mean = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                         residual_attention="mean",
                                         layer_index=2)
    mean(self.query, self.value)
    mean.set_weights(layer.get_weights())
    _, mean_scores = mean(self.query, self.value, prev_scores=self.prev)
    self.assertAllClose(masked, mean_scores, atol=1e-6)

  def test_masked_keys_get_zero_probability(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    _, _, probs = layer(self.query, self.value, attention_mask=self.mask,
                        prev_scores=self.prev, return_attention_probs=True)
    self.assertAllEqual(np.zeros((4, 5, 3)), probs[1, :, :, 4:])
    self.assertAllClose(np.ones((2, 4, 5)), tf.reduce_sum(probs, -1))

  def test_config_round_trip(self):
    layer = ra.ResidualMultiHeadAttention(
        num_heads=2, key_dim=8, residual_attention="mean", layer_index=5,
        dropout=0.1, score_dtype="compute", recompute=True)
    layer(self.query, self.query)
    clone = layer_test_utils.assert_config_round_trip(layer)
    self.assertEqual("mean", clone.get_config()["residual_attention"])
    self.assertEqual(5, clone.get_config()["layer_index"])
    self.assertTrue(clone.get_config()["recompute"])

  def test_standard_weight_names(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=2, key_dim=8, name="att")
    layer(self.query, self.query)
    names = sorted(w.name.split("/")[1] for w in layer.weights)
    self.assertEqual(sorted(["query", "query", "key", "key", "value", "value",
                             "attention_output", "attention_output"]), names)

  def test_plain_keras_weights_load(self):
    plain = tf_keras.layers.MultiHeadAttention(num_heads=4, key_dim=4)
    want = plain(self.query, self.value,
                 attention_mask=self.mask.astype(bool))
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          residual_attention="none")
    layer(self.query, self.value)
    layer.set_weights(plain.get_weights())
    got, _ = layer(self.query, self.value, attention_mask=self.mask,
                   prev_scores=self.prev)
    self.assertAllClose(want, got, atol=1e-6)

  @parameterized.parameters("mixed_float16", "mixed_bfloat16")
  def test_mixed_precision_scores_float32_and_masked_rows_finite(self, policy):
    with layer_test_utils.mixed_precision_scope(policy):
      layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                            score_dtype="float32")
      mask = self.mask.copy()
      mask[0] = 0  # every key masked for example 0
      out, scores, probs = layer(self.query, self.value, attention_mask=mask,
                                 prev_scores=self.prev * 1e5,
                                 return_attention_probs=True)
    self.assertEqual(tf.float32, scores.dtype)
    self.assertEqual(policy.split("_")[1], out.dtype.name)
    for t in (out, scores, probs):
      self.assertTrue(np.all(np.isfinite(tf.cast(t, tf.float32).numpy())))
    # Running sums beyond float16's range survive in float32.
    self.assertGreater(np.abs(scores.numpy()).max(), 65504.0)

  @parameterized.parameters(("float32", "float32"),
                            ("mixed_float16", "float32"),
                            ("mixed_bfloat16", "bfloat16"))
  def test_auto_score_dtype_by_policy(self, policy, want):
    with layer_test_utils.mixed_precision_scope(policy):
      layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
      _, scores = layer(self.query, self.value, prev_scores=self.prev)
    self.assertEqual("auto", layer.get_config()["score_dtype"])
    self.assertEqual(want, scores.dtype.name)

  def test_unknown_mode(self):
    with self.assertRaisesRegex(ValueError, "residual_attention.*'avg'"):
      ra.ResidualMultiHeadAttention(num_heads=2, key_dim=4,
                                    residual_attention="avg")

  def test_prev_scores_wrong_shape(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    with self.assertRaisesRegex(ValueError, r"prev_scores has shape \(2, 4, 5, 5\)"):
      layer(self.query, self.value, prev_scores=np.zeros((2, 4, 5, 5),
                                                         np.float32))
    with self.assertRaisesRegex(ValueError, "prev_scores must have rank 4"):
      layer(self.query, self.value, prev_scores=np.zeros((2, 5, 7), np.float32))

  def test_mask_wrong_rank(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    with self.assertRaisesRegex(ValueError, "attention_mask must have rank 3"):
      layer(self.query, self.value, attention_mask=np.ones((2, 7), np.int32))

  @parameterized.parameters("sum", "mean")
  def test_causal_mask_matches_numpy(self, mode):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          residual_attention=mode,
                                          layer_index=2)
    x = self.value                                   # [2, 7, 16]
    prev = np.random.default_rng(1).normal(size=(2, 4, 7, 7)).astype(
        np.float32)
    mask = np.ones((2, 7, 7), np.int32)
    mask[1, :, 5:] = 0
    out, scores, probs = layer(x, x, attention_mask=mask, prev_scores=prev,
                               use_causal_mask=True,
                               return_attention_probs=True)
    causal = mask * np.tril(np.ones((7, 7), np.int32))
    want_out, want_scores, want_probs = numpy_reference.attention(
        x, x, _weights(layer), causal, prev, mode, 2)
    self.assertAllClose(want_scores, scores, atol=1e-5)   # unmasked sum
    self.assertAllClose(want_probs, probs, atol=1e-5)
    self.assertAllClose(want_out, out, atol=1e-5)

  @parameterized.product(mode=["sum", "mean"], padded=[False, True])
  def test_cached_steps_match_full_causal_pass(self, mode, padded):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          residual_attention=mode,
                                          layer_index=1)
    x = self.value
    length = x.shape[1]
    prev = np.random.default_rng(2).normal(size=(2, 4, length, length)).astype(
        np.float32)
    want_out, want_scores = layer(x, x, prev_scores=prev,
                                  use_causal_mask=True)
    size = length if padded else 0
    cache = {"key": tf.zeros([2, size, 4, 4]),
             "value": tf.zeros([2, size, 4, 4])}
    for t in range(length):
      # One score row per step: row t of the previous layer's sum.
      row = prev[:, :, t:t + 1, :(length if padded else t + 1)]
      out, scores = layer(x[:, t:t + 1], x[:, t:t + 1], prev_scores=row,
                          use_causal_mask=True, cache=cache,
                          decode_loop_step=t if padded else None)
      self.assertAllClose(want_out[:, t:t + 1], out, atol=1e-5)
      self.assertAllClose(want_scores[:, :, t:t + 1, :t + 1],
                          scores[:, :, :, :t + 1], atol=1e-5)
      self.assertEqual(size or t + 1, cache["key"].shape[1])


  def test_score_dtype_compute_keeps_scores_in_compute_dtype(self):
    with layer_test_utils.mixed_precision_scope("mixed_bfloat16"):
      f32 = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
      low = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          score_dtype="compute")
      f32(self.query, self.value)
      low(self.query, self.value)
      low.set_weights(f32.get_weights())
      want = f32(self.query, self.value, attention_mask=self.mask,
                 prev_scores=self.prev, return_attention_probs=True)
      got = low(self.query, self.value, attention_mask=self.mask,
                prev_scores=self.prev, return_attention_probs=True)
    self.assertEqual(tf.bfloat16, got[1].dtype)
    # bfloat16 rounding of the sum only (8-bit mantissa, |scores| < 8).
    self.assertAllClose(want[1], tf.cast(got[1], tf.float32), atol=0.07)
    self.assertAllClose(tf.cast(want[2], tf.float32),
                        tf.cast(got[2], tf.float32), atol=0.03)

  @parameterized.parameters("float32", "compute")
  def test_xla_score_path_matches_eager(self, score_dtype):
    with layer_test_utils.mixed_precision_scope("mixed_bfloat16"):
      layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                            score_dtype=score_dtype)
      layer(self.query, self.value)

      def run(query, prev):
        with tf.GradientTape() as tape:
          tape.watch([query, prev])
          out, scores = layer(query, self.value, attention_mask=self.mask,
                              prev_scores=prev)
          loss = (tf.reduce_sum(tf.cast(out, tf.float32)) +
                  tf.reduce_sum(tf.cast(scores, tf.float32) ** 2))
        return [out, scores] + tape.gradient(
            loss, [query, prev] + layer.trainable_variables)

      args = (tf.constant(self.query), tf.constant(self.prev))
      eager = run(*args)
      xla = tf.function(run, jit_compile=True)(*args)
    # bfloat16 roundings differ between XLA (f32 inside fusions) and TF.
    for a, b in zip(eager, xla):
      self.assertAllClose(tf.cast(a, tf.float32), tf.cast(b, tf.float32),
                          atol=0.1, rtol=0.03)
    self.assertEqual(eager[1].dtype, xla[1].dtype)

  @parameterized.parameters("float32", "mixed_bfloat16")
  def test_self_attention_fuses_qkv_with_same_results(self, policy):
    with layer_test_utils.mixed_precision_scope(policy):
      layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                            value_dim=6)
      x = tf.constant(self.value)
      prev = np.random.default_rng(1).normal(size=(2, 4, 7, 7)).astype(
          np.float32)
      layer(x)  # builds the projections

      @tf.function(jit_compile=True)  # the fused path is XLA's only
      def run(fused):
        with tf.GradientTape() as tape:
          tape.watch(x)
          # key=x disables the fused path: three separate projections.
          out, scores = (layer(x, prev_scores=prev) if fused
                         else layer(x, x, key=x, prev_scores=prev))
          loss = tf.reduce_sum(tf.cast(out, tf.float32) ** 2)
        return [out, scores] + tape.gradient(
            loss, [x] + layer.trainable_variables)

      with mock.patch.object(xla_kernels, "fused_projection",
                             wraps=xla_kernels.fused_projection) as fuse:
        fused, separate = run(True), run(False)
        layer(x)  # outside XLA: three projections
    self.assertEqual(1, fuse.call_count)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    for a, b in zip(fused, separate):
      self.assertAllClose(tf.cast(a, tf.float32), tf.cast(b, tf.float32),
                          atol=tolerance, rtol=tolerance)
    if policy == "float32":
      want_out, want_scores, _ = numpy_reference.attention(
          self.value, self.value, _weights(layer), None, prev, "sum", 0)
      self.assertAllClose(want_out, fused[0], atol=1e-5)
      self.assertAllClose(want_scores, fused[1], atol=1e-5)

  def test_attention_bias_equals_mask(self):
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    want = layer(self.query, self.value, attention_mask=self.mask,
                 prev_scores=self.prev, return_attention_probs=True)
    bias = ra.attention_bias_from_mask(self.mask[:, None, :1, :], tf.float32)
    got = layer(self.query, self.value, attention_bias=bias,
                prev_scores=self.prev, return_attention_probs=True)
    for a, b in zip(want, got):
      self.assertAllClose(a, b, atol=1e-6)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "score_dtype.*'bfloat16'"):
      ra.ResidualMultiHeadAttention(num_heads=2, key_dim=4,
                                    score_dtype="bfloat16")
    with self.assertRaisesRegex(ValueError, r"attention_axes must be None, "
                                r"got \(2,\)"):
      ra.ResidualMultiHeadAttention(num_heads=2, key_dim=4,
                                    attention_axes=(2,))
    layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    with self.assertRaisesRegex(ValueError, "attention_bias must have rank 4"):
      layer(self.query, self.value, attention_bias=np.zeros((2, 5, 7),
                                                            np.float32))
    with self.assertRaisesRegex(ValueError, "query must have rank 3"):
      layer(self.query[None], self.value)
    # Keras' own return_attention_scores would mean probabilities; refused.
    with self.assertRaisesRegex(ValueError, "return_attention_scores is not "
                                "supported.*return_attention_probs"):
      layer(self.query, self.value, return_attention_scores=True)
    with self.assertRaisesRegex(ValueError, "ragged inputs"):
      layer(tf.RaggedTensor.from_tensor(self.query), self.value)
    # The sequence axis, spelled out, is what None means: accepted.
    ra.ResidualMultiHeadAttention(num_heads=2, key_dim=4, attention_axes=1)

if __name__ == "__main__":
  tf.test.main()
