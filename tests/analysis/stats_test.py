"""Reservoir-sampled streaming statistics against numpy on known streams."""

import numpy as np
import pytest

from realformer_tf.analysis import stats


def test_stream_that_fits_the_reservoir_is_exact():
  rng = np.random.default_rng(0)
  chunks = [rng.normal(size=n) for n in (7, 0, 1, 33, 12, 50)]
  stream = np.concatenate(chunks)
  s = stats.StreamStats(capacity=len(stream), seed=5)
  for c in chunks:
    s.update(c)
  assert s.count == 103 and s.exact
  np.testing.assert_array_equal(s.sample(), stream)
  summary = s.summary()
  q1, median, q3 = np.percentile(stream, [25, 50, 75])
  assert summary["median"] == median
  assert summary["q1"] == q1
  assert summary["q3"] == q3
  assert summary["count"] == 103
  assert summary["min"] == stream.min() and summary["max"] == stream.max()
  np.testing.assert_allclose(summary["mean"], stream.mean(), rtol=1e-13)
  assert summary["exact_quantiles"] is True


def test_small_known_stream():
  s = stats.StreamStats(capacity=10)
  s.update([3.0, 1.0])
  s.update([[4.0, 1.0], [5.0, 9.0]])
  assert s.count == 6 and s.mean() == 23.0 / 6
  # numpy's linear interpolation on [1, 1, 3, 4, 5, 9].
  assert s.summary()["median"] == 3.5
  assert s.summary()["q1"] == 1.5
  assert s.summary()["q3"] == 4.75


def test_overflowing_stream_keeps_exact_count_mean_and_a_uniform_sample():
  n, capacity = 200_000, 4000
  stream = np.arange(n, dtype=np.float64)
  s = stats.StreamStats(capacity=capacity, seed=0)
  for start in range(0, n, 3001):
    s.update(stream[start:start + 3001])
  assert s.count == n and not s.exact
  assert s.mean() == stream.mean()
  assert s.summary()["min"] == 0 and s.summary()["max"] == n - 1
  sample = s.sample()
  assert sample.shape == (capacity,)
  assert len(np.unique(sample)) == capacity          # no value kept twice
  assert np.all(np.isin(sample, stream))
  # Uniform: each decile of the stream holds ~10% of the sample (binomial
  # sd 0.5%); quantiles near the stream's.
  deciles = np.histogram(sample, bins=10, range=(0, n))[0] / capacity
  np.testing.assert_allclose(deciles, 0.1, atol=0.025)
  np.testing.assert_allclose(s.quantile([0.25, 0.5, 0.75]) / n,
                             [0.25, 0.5, 0.75], atol=0.03)


def test_seeded_and_memory_bounded():
  a, b = stats.StreamStats(100, seed=[1, 2]), stats.StreamStats(100, seed=[1, 2])
  values = np.linspace(0, 1, 5000)
  a.update(values)
  b.update(values)
  np.testing.assert_array_equal(a.sample(), b.sample())
  assert a.sample().nbytes == 100 * 8


def test_array_of_streams_per_layer_and_head():
  rng = np.random.default_rng(1)
  chunks = [rng.gamma(2.0, size=[n, 3, 4]) for n in (5, 17, 1, 40)]
  stream = np.concatenate(chunks)                      # [63 tokens, 3, 4]
  exact = stats.StreamStats(capacity=63, seed=0, shape=(3, 4))
  sampled = stats.StreamStats(capacity=20, seed=0, shape=(3, 4))
  for c in chunks:
    exact.update(c)
    sampled.update(c)
  for l in range(3):
    for h in range(4):
      values = stream[:, l, h]
      summary = exact.summary((l, h))
      assert summary["count"] == 63
      assert [summary["q1"], summary["median"], summary["q3"]] == list(
          np.percentile(values, [25, 50, 75]))
      np.testing.assert_allclose(summary["mean"], values.mean(), rtol=1e-13)
      assert summary["min"] == values.min() and summary["max"] == values.max()
      # Overflowing: exact count/mean/min/max; a 20-value sample of the stream.
      summary = sampled.summary((l, h))
      assert summary["count"] == 63 and summary["exact_quantiles"] is False
      np.testing.assert_allclose(summary["mean"], values.mean(), rtol=1e-13)
      assert summary["max"] == values.max()
      assert sampled.sample((l, h)).shape == (20,)
      assert np.all(np.isin(sampled.sample((l, h)), values))
  # All streams are sampled at the same tokens.
  tokens = [np.nonzero(stream[:, 0, 0] == v)[0][0]
            for v in sampled.sample((0, 0))]
  np.testing.assert_array_equal(sampled.sample((2, 3)), stream[tokens, 2, 3])
  with pytest.raises(ValueError, match="expects"):
    sampled.update(np.zeros([2, 4, 3]))


def test_empty_and_invalid():
  s = stats.StreamStats(capacity=4)
  assert s.summary()["count"] == 0 and s.summary()["median"] is None
  with pytest.raises(ValueError, match="capacity"):
    stats.StreamStats(capacity=0)
  with pytest.raises(ValueError, match="non-finite"):
    s.update([1.0, float("nan")])
