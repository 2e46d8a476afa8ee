"""Per-token attention metrics in TensorFlow ops: entropy (nats), JSD (bits).

Bits keep the JSD in [0, 1], the paper's scale. Padded keys are dropped and
each row renormalised; TF ops, so they run inside the encoder's graph.
"""

import math

import tensorflow as tf


def _as_float(x) -> tf.Tensor:
  x = tf.convert_to_tensor(x)
  return x if x.dtype == tf.float64 else tf.cast(x, tf.float32)


def query_mask(mask) -> tf.Tensor:
  """`[batch, seq]` boolean mask of the query rows to keep (unpadded tokens)."""
  return tf.not_equal(tf.convert_to_tensor(mask), 0)


def _masked_distribution(probs, mask) -> tf.Tensor:
  """Rows over unpadded keys only, renormalised (all-zero if none is left)."""
  probs = _as_float(probs)
  keys = tf.cast(query_mask(mask), probs.dtype)[:, tf.newaxis, tf.newaxis, :]
  masked = probs * keys
  return tf.math.divide_no_nan(
      masked, tf.reduce_sum(masked, axis=-1, keepdims=True))


def attention_entropy(probs, mask) -> tf.Tensor:
  """`[batch, heads, query]` entropies (nats, `scipy.stats.entropy`) over the
  unpadded keys: ln(n) for uniform attention to n tokens."""
  p = _masked_distribution(probs, mask)
  return -tf.reduce_sum(tf.math.xlogy(p, p), axis=-1)


def adjacent_head_jsd(probs_prev, probs, mask) -> tf.Tensor:
  """`[batch, heads, query]` JSD (bits, in [0, 1]) of head h in layers L-1 and
  L over the unpadded keys: the *square* of scipy's `jensenshannon(base=2)`."""
  p = _masked_distribution(probs_prev, mask)
  q = tf.cast(_masked_distribution(probs, mask), p.dtype)
  m = 0.5 * (p + q)
  # p ln(p / m) with 0 ln 0 = 0; m > 0 wherever p > 0 or q > 0.
  kl_pm = tf.reduce_sum(tf.math.xlogy(p, p) - tf.math.xlogy(p, m), axis=-1)
  kl_qm = tf.reduce_sum(tf.math.xlogy(q, q) - tf.math.xlogy(q, m), axis=-1)
  # Rounding can give tiny negatives for identical rows.
  return tf.maximum(0.5 * (kl_pm + kl_qm), 0.0) / math.log(2.0)


def per_token_entropy_and_jsd(probs, queries, keys):
  """Entropy and adjacent-layer JSD of every unpadded query, per layer and head.

  `probs`: per-layer `[batch, heads, query, key]`; `queries`, `keys`: 0/1
  masks. Returns `(entropy [tokens, layers, heads], jsd [tokens, layers - 1,
  heads])`, tokens in (example, position) order.
  """
  valid = query_mask(queries)

  def per_token(values):  # layers x [B, H, T] -> [tokens, layers, H]
    stacked = tf.stack(values, axis=1)
    return tf.boolean_mask(tf.transpose(stacked, [0, 3, 1, 2]), valid)

  entropy = per_token([attention_entropy(p, keys) for p in probs])
  if len(probs) < 2:
    return entropy, entropy[:, :0]
  return entropy, per_token([adjacent_head_jsd(a, b, keys)
                             for a, b in zip(probs, probs[1:])])


def score_magnitude(scores, mask):
  """Float64 `(sum |S|, count, max |S|)` over heads and (query, key) pairs
  both unpadded, of `[batch, heads, query, key]` `scores`."""
  valid = tf.cast(query_mask(mask), tf.float32)
  pair = valid[:, tf.newaxis, :, tf.newaxis] * valid[:, tf.newaxis, tf.newaxis]
  magnitude = tf.abs(tf.cast(scores, tf.float32)) * pair
  # Rows are summed in float32, the rest in float64.
  sum_abs = tf.reduce_sum(tf.cast(tf.reduce_sum(magnitude, -1), tf.float64))
  lengths = tf.cast(tf.reduce_sum(valid, -1), tf.float64)
  count = tf.cast(tf.shape(scores)[1], tf.float64) * tf.reduce_sum(lengths**2)
  return sum_abs, count, tf.cast(tf.reduce_max(magnitude), tf.float64)
