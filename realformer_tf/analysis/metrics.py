"""Per-token attention metrics, once for both faces: entropy (nats), JSD (bits).

Over an ops namespace on the device (`keras.ops`, or `TF_OPS` of
`layers.residual_attention`), then numpy on the host (`per_token`). Bits keep
the JSD in [0, 1], the paper's scale. Padded keys are dropped and each row
renormalised.
"""

import math

import numpy as np

# What summary.json says of the numbers (both faces').
DEFINITIONS = dict(
    units="entropy: nats; jsd: bits",
    jsd_definition=("0.5 KL(P||M) + 0.5 KL(Q||M), M=(P+Q)/2, log base 2 = "
                    "scipy jensenshannon(p, q, base=2)**2; max 1"),
    layers="0-based: layer l is transformer/layer_l; jsd[layer=l] compares "
           "head h of layer l-1 and layer l",
    quantiles="from a seeded reservoir sample of reservoir_size values per "
              "(layer, head); exact when count <= reservoir_size")


def _as_float(ops, x):
  return x if ops.dtype(x) == "float64" else ops.cast(x, "float32")


def _xlogy(ops, x, y):
  """x ln y, 0 where x == 0 (`keras.ops` has no xlogy)."""
  return ops.where(x > 0, x * ops.log(ops.where(x > 0, y, 1.0)), 0.0)


def _masked_distribution(ops, probs, mask):
  """Rows over unpadded keys only, renormalised (all-zero if none is left)."""
  keys = ops.not_equal(mask, 0)[:, None, None, :]
  masked = ops.where(keys, _as_float(ops, probs), 0.0)
  total = ops.sum(masked, axis=-1, keepdims=True)
  return masked / ops.where(total > 0, total, 1.0)


def attention_entropy(ops, probs, mask):
  """`[batch, heads, query]` entropies (nats, `scipy.stats.entropy`) over the
  unpadded keys: ln(n) for uniform attention to n tokens."""
  p = _masked_distribution(ops, probs, mask)
  return -ops.sum(_xlogy(ops, p, p), axis=-1)


def adjacent_head_jsd(ops, probs_prev, probs, mask):
  """`[batch, heads, query]` JSD (bits, in [0, 1]) of head h in layers L-1 and
  L over the unpadded keys: the *square* of scipy's `jensenshannon(base=2)`."""
  p = _masked_distribution(ops, probs_prev, mask)
  q = ops.cast(_masked_distribution(ops, probs, mask), ops.dtype(p))
  m = 0.5 * (p + q)
  kl_pm = ops.sum(_xlogy(ops, p, p) - _xlogy(ops, p, m), axis=-1)
  kl_qm = ops.sum(_xlogy(ops, q, q) - _xlogy(ops, q, m), axis=-1)
  # Rounding can give tiny negatives for identical rows.
  return ops.maximum(0.5 * (kl_pm + kl_qm), 0.0) / math.log(2.0)


def per_query_entropy_and_jsd(ops, probs, keys):
  """`(entropy [batch, query, layers, heads], jsd [batch, query, layers - 1,
  heads])` of per-layer `[batch, heads, query, key]` `probs`, 0/1 `keys`."""
  stack = lambda values: ops.transpose(ops.stack(values, axis=1), [0, 3, 1, 2])
  entropy = stack([attention_entropy(ops, p, keys) for p in probs])
  if len(probs) < 2:
    return entropy, entropy[:, :, :0]
  return entropy, stack([adjacent_head_jsd(ops, a, b, keys)
                         for a, b in zip(probs, probs[1:])])


def unpadded(values, queries) -> np.ndarray:
  """`[batch, query, ...]` -> numpy `[tokens, ...]`: the unpadded queries (0/1
  `queries`), in (example, position) order."""
  return np.asarray(values)[np.asarray(queries) != 0]


def score_magnitude(ops, scores, mask):
  """Float32 `(sum, max)` of |S| per row `[batch, heads, query]` over (query,
  key) pairs both unpadded (rows summed in float32, the rest in float64)."""
  valid = ops.cast(ops.not_equal(mask, 0), "float32")
  pair = valid[:, None, :, None] * valid[:, None, None, :]
  magnitude = ops.abs(ops.cast(scores, "float32")) * pair
  return ops.sum(magnitude, axis=-1), ops.max(magnitude, axis=-1,
                                              keepdims=False)


def batch_statistics(ops, probs, scores, mask):
  """`per_query_entropy_and_jsd` and the stacked `score_magnitude`s."""
  entropy, jsd = per_query_entropy_and_jsd(ops, probs, mask)
  sums, maxima = zip(*(score_magnitude(ops, s, mask) for s in scores))
  return entropy, jsd, ops.stack(sums), ops.stack(maxima)


def per_token(statistics, mask):
  """`batch_statistics` on the host: `(entropy [tokens, L, H], jsd [tokens,
  L-1, H], float64 [L, 3] (sum |S_l|, count, max |S_l|))`."""
  entropy, jsd, sums, maxima = (np.asarray(x) for x in statistics)
  lengths = (np.asarray(mask) != 0).sum(-1).astype(np.float64)
  count = np.full(len(sums), sums.shape[2] * np.sum(lengths**2))
  magnitude = np.stack([sums.astype(np.float64).sum((1, 2, 3)), count,
                        maxima.max((1, 2, 3)).astype(np.float64)], -1)
  return unpadded(entropy, mask), unpadded(jsd, mask), magnitude
