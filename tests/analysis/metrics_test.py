"""Attention entropy / JSD against scipy, the uniform-attention identity, and
the same numbers from `keras.ops` on JAX (the keras3 face) as from TF ops."""

import json
import math
import subprocess
import sys

import numpy as np
from scipy import stats as sp_stats
from scipy.spatial import distance
import tensorflow as tf
import tf_keras

from realformer_tf.analysis import metrics
from realformer_tf.analysis import runner
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import encoder as encoder_lib
from tests.helpers import keras3_reproduction
from tests.helpers import no_tensorflow

OPS = ra.TF_OPS


def _handmade():
  """[batch=2, heads=2, query=4, key=4] distributions, example 1 padded at 3."""
  rng = np.random.default_rng(0)
  probs = rng.random([2, 2, 4, 4]) ** 3
  probs[0, 0, 1] = [1.0, 0.0, 0.0, 0.0]     # one-hot: entropy 0
  probs[1, 1, 2] = [0.5, 0.5, 0.0, 0.0]     # contains zeros: 0 ln 0 = 0
  probs[1, :, :, 3] = 0.0                   # padded key of example 1: no mass
  probs[1, 0, 0, 3] = 0.3                   # ... except here: renormalised
  probs /= probs.sum(-1, keepdims=True)
  mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
  return probs, mask


def test_entropy_matches_scipy_with_padding():
  probs, mask = _handmade()
  got = metrics.attention_entropy(OPS, probs, mask).numpy()
  assert got.shape == (2, 2, 4)
  for b in range(2):
    keys = mask[b].astype(bool)
    for h in range(2):
      for t in range(4):
        # scipy renormalises its input; natural log by default.
        want = sp_stats.entropy(probs[b, h, t, keys])
        np.testing.assert_allclose(got[b, h, t], want, rtol=1e-12, atol=1e-12)
  assert got[0, 0, 1] == 0.0
  np.testing.assert_allclose(got[1, 1, 2], math.log(2), rtol=1e-12)


def test_jsd_is_squared_scipy_jensenshannon_base_2():
  probs, mask = _handmade()
  prev = probs[:, ::-1]  # compare head 0 with head 1 etc.: non-trivial pairs
  got = metrics.adjacent_head_jsd(OPS, prev, probs, mask).numpy()
  assert got.shape == (2, 2, 4)
  for b in range(2):
    keys = mask[b].astype(bool)
    for h in range(2):
      for t in range(4):
        want = distance.jensenshannon(prev[b, h, t, keys], probs[b, h, t, keys],
                                      base=2) ** 2
        np.testing.assert_allclose(got[b, h, t], want, rtol=1e-9, atol=1e-12)
  # Identical rows: 0; disjoint supports: the maximum, 1 bit.
  np.testing.assert_allclose(
      metrics.adjacent_head_jsd(OPS, probs, probs, mask).numpy(), 0.0, atol=1e-12)
  p = np.zeros([1, 1, 1, 4]); p[..., :2] = 0.5
  q = np.zeros([1, 1, 1, 4]); q[..., 2:] = 0.5
  np.testing.assert_allclose(
      metrics.adjacent_head_jsd(OPS, p, q, np.ones([1, 4])).numpy(),
      [[[1.0]]], rtol=1e-12)


def test_uniform_attention_has_entropy_log_n():
  lengths = [1, 2, 5, 7]
  seq = 8
  mask = np.array([[1] * n + [0] * (seq - n) for n in lengths])
  # Uniform over the unpadded keys, for every query row (padded rows too).
  probs = mask[:, None, None, :] / mask.sum(-1)[:, None, None, None]
  probs = np.broadcast_to(probs, [4, 3, seq, seq])
  got = metrics.attention_entropy(OPS, probs, mask).numpy()
  for b, n in enumerate(lengths):
    np.testing.assert_allclose(got[b], math.log(n), rtol=1e-14, atol=1e-14)
  got32 = metrics.attention_entropy(OPS, probs.astype(np.float32), mask).numpy()
  assert got32.dtype == np.float32
  for b, n in enumerate(lengths):
    np.testing.assert_allclose(got32[b], math.log(n), rtol=1e-6, atol=1e-6)


def _zero_qk_encoder():
  tf_keras.utils.set_random_seed(1)
  encoder = encoder_lib.RealFormerEncoder(
      vocab_size=30, hidden_size=16, num_layers=3, num_attention_heads=4,
      inner_dim=32, max_sequence_length=16, return_attention_scores=True)
  ids = tf.constant([[3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
                     [5, 6, 7, 0, 0, 0, 0, 0, 0, 0],
                     [2, 9, 9, 9, 9, 2, 0, 0, 0, 0]])
  inputs = dict(input_word_ids=ids, input_mask=tf.sign(ids),
                input_type_ids=tf.zeros_like(ids))
  encoder(inputs)
  for block in encoder.transformer_layers:
    attention = block._attention_layer  # pylint: disable=protected-access
    for dense in (attention._query_dense, attention._key_dense):  # pylint: disable=protected-access
      for w in dense.weights:
        w.assign(tf.zeros_like(w))
  return encoder, inputs


def test_zeroed_query_key_encoder_attends_uniformly():
  encoder, inputs = _zero_qk_encoder()
  out = encoder(inputs, training=False)
  mask = inputs["input_mask"]
  lengths = mask.numpy().sum(-1)
  valid = mask.numpy() != 0
  assert len(out["attention_scores"]) == 3
  for layer, probs in enumerate(out["attention_scores"]):
    entropy = metrics.attention_entropy(OPS, probs, mask).numpy()    # [B, H, T]
    for b, n in enumerate(lengths):
      np.testing.assert_allclose(entropy[b][:, valid[b]], math.log(n),
                                 rtol=1e-6, atol=1e-6)
    # The raw softmax already puts (exactly) zero mass on padded keys.
    assert float(tf.reduce_max(probs * tf.cast(
        1 - mask, tf.float32)[:, None, None, :])) == 0.0
    if layer:
      jsd = metrics.adjacent_head_jsd(OPS, out["attention_scores"][layer - 1], probs,
                                      mask).numpy()
      np.testing.assert_allclose(jsd, 0.0, atol=1e-7)
    sums, maxima = metrics.score_magnitude(OPS, out["residual_scores"][layer],
                                           mask)
    assert float(tf.reduce_max(sums)) == 0.0 == float(tf.reduce_max(maxima))


def test_batch_fn_on_zeroed_query_key_encoder():
  """The runner's tf.function: per unpadded token, entropy ln(n), JSD 0."""
  encoder, inputs = _zero_qk_encoder()
  entropy, jsd, magnitude = metrics.per_token(runner.make_batch_fn(encoder)(
      {k: tf.cast(v, tf.int32) for k, v in inputs.items()}),
                                              inputs["input_mask"])
  lengths = inputs["input_mask"].numpy().sum(-1)            # [10, 3, 6]
  assert entropy.shape == (sum(lengths), 3, 4)
  assert jsd.shape == (sum(lengths), 2, 4)
  want = np.repeat(np.log(lengths), lengths)                # token order
  np.testing.assert_allclose(entropy,
                             np.broadcast_to(want[:, None, None], [19, 3, 4]),
                             rtol=1e-6)
  np.testing.assert_allclose(jsd, 0.0, atol=1e-7)
  np.testing.assert_array_equal(
      magnitude, [[0.0, 4.0 * np.sum(lengths ** 2), 0.0]] * 3)


def test_score_magnitude_matches_numpy():
  rng = np.random.default_rng(3)
  scores = rng.normal(size=[2, 3, 5, 5]).astype(np.float32)
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  scores[0, :, 4, 4] = 100.0  # padded position: ignored
  pair = (mask[:, None, :, None] * mask[:, None, None, :]).astype(bool)
  pair = np.broadcast_to(pair, scores.shape)
  probs = [np.full([2, 3, 5, 5], 0.2, np.float32)] * 2
  *_, magnitude = metrics.per_token(
      metrics.batch_statistics(OPS, probs, [scores, -2 * scores], mask), mask)
  for layer, factor in enumerate((1, 2)):
    total, count, largest = magnitude[layer]
    np.testing.assert_allclose(total, factor * np.abs(scores[pair]).sum(),
                               rtol=1e-6)
    assert count == pair.sum() == 3 * (9 + 25)
    np.testing.assert_allclose(largest, factor * np.abs(scores[pair]).max())


# The keras3 face's numbers: `keras.ops` on JAX, TensorFlow unimportable.
_ON_JAX = """
import json, sys
import keras, numpy as np
from realformer_tf.analysis import metrics
assert keras.config.backend() == "jax" and sys.modules["tensorflow"] is None
with np.load(sys.argv[1]) as f:
  probs, scores = [f[f"p{l}"] for l in range(3)], [f[f"s{l}"] for l in range(3)]
  mask = f["mask"]
out = metrics.per_token(metrics.batch_statistics(keras.ops, probs, scores,
                                                 mask), mask)
print(json.dumps([np.asarray(x, np.float64).tolist() for x in out]))
"""


def test_keras3_metrics_equal_the_tf_keras_metrics(tmp_path):
  """`keras.ops` on JAX and TF ops on the same float32 softmax rows (3
  layers, example 1 padded at 4 and 5): one definition, the same numbers."""
  rng = np.random.default_rng(7)
  mask = np.array([[1] * 6, [1] * 4 + [0] * 2])
  scores = [rng.normal(size=[2, 4, 6, 6]).astype(np.float32) * (1 + l)
            for l in range(3)]
  probs = [tf.nn.softmax(s + np.where(mask[:, None, None] != 0, 0.0, -1e9)
                         .astype(np.float32)).numpy() for s in scores]
  np.savez(tmp_path / "batch.npz", mask=mask,
           **{f"p{l}": p for l, p in enumerate(probs)},
           **{f"s{l}": s for l, s in enumerate(scores)})
  want = metrics.per_token(metrics.batch_statistics(OPS, probs, scores, mask),
                           mask)
  result = subprocess.run(
      [sys.executable, "-c", _ON_JAX, str(tmp_path / "batch.npz")],
      cwd=no_tensorflow.REPO_ROOT,
      env=no_tensorflow.env(keras3_reproduction.jax_env()),
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  got = json.loads(result.stdout.strip().splitlines()[-1])
  assert [np.shape(g) for g in got] == [w.shape for w in want] == [
      (10, 3, 4), (10, 2, 4), (3, 3)]
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
  assert np.min(want[1]) > 0.01  # Non-trivial JSDs.
