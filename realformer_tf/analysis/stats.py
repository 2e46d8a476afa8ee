"""Bounded-memory streaming statistics per (layer, head) attention stream.

Exact count, mean, min and max, and a seeded reservoir sample (Vitter's
Algorithm R) for quantiles, the kept tokens shared by all streams;
`AttentionStats`: one model's, for both faces.
"""

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

DEFAULT_CAPACITY = 20000


class StreamStats:
  """Exact count/mean/min/max plus a fixed-size reservoir sample per stream.

  `capacity`: values kept per stream; `seed`: the reservoir's (int or ints);
  `shape`: of the array of streams (`()`: one).
  """

  def __init__(self, capacity: int = DEFAULT_CAPACITY,
               seed: Union[int, Sequence[int]] = 0,
               shape: Tuple[int, ...] = ()):
    if capacity < 1:
      raise ValueError(f"reservoir capacity must be >= 1, got {capacity}.")
    self._capacity = int(capacity)
    self._shape = tuple(int(d) for d in shape)
    self._rng = np.random.default_rng(seed)
    # Slot-major, so a batch of kept tokens is one fancy-indexed write.
    self._sample = np.empty((self._capacity,) + self._shape, np.float64)
    self.count = 0  # values seen so far per stream
    self._sum = np.zeros(self._shape, np.float64)
    self._min = np.full(self._shape, np.inf)
    self._max = np.full(self._shape, -np.inf)

  @property
  def exact(self) -> bool:
    """Whether the reservoir holds the whole stream (quantiles are exact)."""
    return self.count <= self._capacity

  def mean(self, index: Tuple[int, ...] = ()) -> float:
    """Exact mean of the values seen by stream `index` (NaN if none)."""
    if not self.count:
      return float("nan")
    return float(self._sum[index] / self.count)

  def sample(self, index: Tuple[int, ...] = ()) -> np.ndarray:
    """Stream `index`'s reservoir: all values if `count <= capacity`."""
    kept = self._sample[:min(self.count, self._capacity)]
    return kept[(slice(None),) + tuple(index)]

  def update(self, values) -> None:
    """Adds a batch: `[n, *shape]` values (for `shape == ()`, any shape)."""
    values = np.asarray(values, dtype=np.float64)
    if self._shape:
      if values.shape[1:] != self._shape:
        raise ValueError(f"StreamStats.update expects [n, *{self._shape}], "
                         f"got shape {values.shape}.")
    else:
      values = values.reshape([-1])
    n = values.shape[0]
    if not n:
      return
    if not np.all(np.isfinite(values)):
      raise ValueError("StreamStats.update got non-finite values.")
    self._sum += values.sum(axis=0)
    np.minimum(self._min, values.min(axis=0), out=self._min)
    np.maximum(self._max, values.max(axis=0), out=self._max)

    start = self.count
    # Fill phase: the first `capacity` values go in as they are.
    fill = max(0, min(n, self._capacity - start))
    self._sample[start:start + fill] = values[:fill]
    # Algorithm R: value j replaces slot r ~ U{0..j} when r < capacity.
    j = np.arange(start + fill, start + n, dtype=np.int64)
    r = self._rng.integers(0, j + 1)
    kept = np.nonzero(r < self._capacity)[0]
    slots = r[kept]
    # Later values win a slot several hit.
    last = slots.size - 1 - np.unique(slots[::-1], return_index=True)[1]
    self._sample[slots[last]] = values[fill + kept[last]]
    self.count += n

  def quantile(self, q, index: Tuple[int, ...] = ()):
    """Quantile(s) of stream `index`'s reservoir (numpy's linear method)."""
    return np.quantile(self.sample(index), q)

  def summary(self, index: Tuple[int, ...] = ()) -> Dict[str, Optional[float]]:
    """Count, mean, min, max and quartiles of stream `index`, JSON-ready."""
    index = tuple(index)
    if not self.count:
      return dict(count=0, mean=None, min=None, max=None, q1=None, median=None,
                  q3=None, exact_quantiles=True)
    q1, median, q3 = self.quantile([0.25, 0.5, 0.75], index).tolist()
    return dict(count=self.count, mean=self.mean(index),
                min=float(self._min[index]), max=float(self._max[index]),
                q1=q1, median=median, q3=q3, exact_quantiles=self.exact)


class AttentionStats:
  """Streaming per-(layer, head) statistics of one model: `entropy`
  `[layers, heads]` and `jsd` `[layers - 1, heads]` (`(l - 1, h)`: head h of
  layers l-1 and l) `StreamStats`, `num_examples` and `num_tokens`."""

  def __init__(self, num_layers: int, num_heads: int,
               capacity: int = DEFAULT_CAPACITY, seed: int = 0):
    self.num_layers, self.num_heads = num_layers, num_heads
    self.entropy = StreamStats(capacity, seed=[seed, 0],
                               shape=(num_layers, num_heads))
    self.jsd = StreamStats(capacity, seed=[seed, 1],
                           shape=(num_layers - 1, num_heads))
    # Per layer: sum |S_l|, count, max |S_l| (`metrics.per_token`).
    self._magnitude = np.zeros([num_layers, 3], np.float64)
    self.num_examples = 0
    self.num_tokens = 0

  def update(self, entropy: np.ndarray, jsd: np.ndarray,
             score_magnitude: np.ndarray, num_examples: int) -> None:
    """Adds one batch: `metrics.per_token`'s outputs, its example count."""
    self.entropy.update(entropy)
    self.jsd.update(jsd)
    self._magnitude[:, :2] += score_magnitude[:, :2]
    self._magnitude[:, 2] = np.maximum(self._magnitude[:, 2],
                                       score_magnitude[:, 2])
    self.num_examples += int(num_examples)
    self.num_tokens += int(entropy.shape[0])

  def to_json(self) -> Dict[str, Any]:
    def heads(streams, row):
      return [dict(head=h, **streams.summary((row, h)))
              for h in range(self.num_heads)]
    return dict(
        num_examples=self.num_examples,
        num_tokens=self.num_tokens,
        entropy=[dict(layer=l, heads=heads(self.entropy, l))
                 for l in range(self.num_layers)],
        jsd=[dict(layer=l, previous_layer=l - 1, heads=heads(self.jsd, l - 1))
             for l in range(1, self.num_layers)],
        # Per layer: mean and max |S_l| over unpadded positions and heads.
        score_magnitude=[
            dict(layer=l, mean_abs=total / count if count else None,
                 max_abs=largest, count=int(count))
            for l, (total, count, largest) in enumerate(
                self._magnitude.tolist())])
