"""Per-token attention metrics: entropy and adjacent-head Jensen-Shannon divergence.

Entropy is in nats (natural log): a uniform distribution over 128 tokens has
ln(128) = 4.85 nats, against the paper's 4.5 / 1.5 thresholds. The
Jensen-Shannon divergence is in bits (log base 2), so it lies in [0, 1]: the
paper's JSD thresholds (0.25 / 0.75) only make sense on such a bounded scale
(in nats the maximum is ln 2 = 0.69 and its "red" class could never occur).

Padding. `probs` is a `[batch, heads, query, key]` tensor of softmax
probabilities and `mask` a `[batch, seq]` 0/1 tensor (1 = real token, the
encoder's `input_mask`). Keys outside the mask are dropped and each row is
renormalised over the unpadded keys. For RealFormer encoders this is a no-op
up to float rounding: the additive mask is -1e9 in float32, so padded keys get
exactly zero probability. The renormalisation only matters for probabilities
from elsewhere (e.g. a model with a weaker additive mask). Padded query rows
are not removed here (the outputs keep the `[batch, heads, query]` shape); use
`query_mask(mask)` to select the valid rows, as `runner.py` does.

The functions are TensorFlow ops (usable inside `tf.function`), accept numpy
arrays, and compute in float64 when given float64, float32 otherwise.
"""

import math

import tensorflow as tf

# Upper bound of the Jensen-Shannon divergence in bits.
JSD_MAX = 1.0


def _as_float(x) -> tf.Tensor:
  x = tf.convert_to_tensor(x)
  if x.dtype != tf.float64:
    x = tf.cast(x, tf.float32)
  return x


def _key_mask(mask, dtype) -> tf.Tensor:
  """`[batch, seq]` 0/1 mask -> `[batch, 1, 1, seq]` float key mask."""
  mask = tf.cast(tf.not_equal(tf.convert_to_tensor(mask), 0), dtype)
  return mask[:, tf.newaxis, tf.newaxis, :]


def masked_distribution(probs, mask) -> tf.Tensor:
  """Restricts attention rows to unpadded keys and renormalises them.

  Args:
    probs: `[batch, heads, query, key]` attention probabilities.
    mask: `[batch, key]` 0/1 mask, 1 = real token.

  Returns:
    `probs` with padded keys set to 0 and each row summing to 1 over the
    unpadded keys (rows with no unpadded key stay all-zero).
  """
  probs = _as_float(probs)
  masked = probs * _key_mask(mask, probs.dtype)
  total = tf.reduce_sum(masked, axis=-1, keepdims=True)
  return tf.math.divide_no_nan(masked, total)


def query_mask(mask) -> tf.Tensor:
  """`[batch, seq]` boolean mask of the query rows to keep (unpadded tokens)."""
  return tf.not_equal(tf.convert_to_tensor(mask), 0)


def attention_entropy(probs, mask) -> tf.Tensor:
  """Entropy (nats) of each query's attention distribution over unpadded keys.

  H(p) = -sum_k p_k ln p_k, with 0 ln 0 = 0, after dropping padded keys and
  renormalising (see the module docstring). Equals
  `scipy.stats.entropy(p)` (natural log) on the unpadded keys. A head that
  attends uniformly to n unpadded tokens has entropy ln(n).

  Args:
    probs: `[batch, heads, query, key]` attention probabilities.
    mask: `[batch, key]` 0/1 mask, 1 = real token.

  Returns:
    `[batch, heads, query]` entropies. Padded query rows are included; select
    valid ones with `query_mask(mask)`.
  """
  p = masked_distribution(probs, mask)
  return -tf.reduce_sum(tf.math.xlogy(p, p), axis=-1)


def jensen_shannon_divergence(p, q) -> tf.Tensor:
  """Jensen-Shannon divergence (bits) of distributions along the last axis.

  JSD(P, Q) = 1/2 KL(P || M) + 1/2 KL(Q || M), M = (P + Q) / 2, log base 2.
  This is the *square* of `scipy.spatial.distance.jensenshannon(p, q,
  base=2)`, and lies in [0, 1]. `p` and `q` must already be normalised.
  """
  p, q = _as_float(p), _as_float(q)
  q = tf.cast(q, p.dtype)
  m = 0.5 * (p + q)
  # xlogy(p, p) - xlogy(p, m) = p ln(p / m) with 0 ln 0 = 0; m > 0 wherever
  # p > 0 or q > 0.
  kl_pm = tf.reduce_sum(tf.math.xlogy(p, p) - tf.math.xlogy(p, m), axis=-1)
  kl_qm = tf.reduce_sum(tf.math.xlogy(q, q) - tf.math.xlogy(q, m), axis=-1)
  # Rounding can give tiny negatives for identical rows.
  return tf.maximum(0.5 * (kl_pm + kl_qm), 0.0) / math.log(2.0)


def adjacent_head_jsd(probs_prev, probs, mask) -> tf.Tensor:
  """Per-token JSD (bits) between head i of layer L-1 and head i of layer L.

  For each example, head and unpadded query token t, the divergence between
  the attention distributions `probs_prev[b, i, t, :]` and `probs[b, i, t, :]`
  over the unpadded keys (see `jensen_shannon_divergence`: the square of
  scipy's `jensenshannon` distance with base 2; range [0, 1]).

  Args:
    probs_prev: `[batch, heads, query, key]` probabilities of layer L-1.
    probs: `[batch, heads, query, key]` probabilities of layer L.
    mask: `[batch, key]` 0/1 mask, 1 = real token.

  Returns:
    `[batch, heads, query]` divergences. Padded query rows are included;
    select valid ones with `query_mask(mask)`.
  """
  return jensen_shannon_divergence(masked_distribution(probs_prev, mask),
                                   masked_distribution(probs, mask))


def per_token_entropy_and_jsd(probs, queries, keys):
  """Entropy and adjacent-layer JSD of every unpadded query, per layer and head.

  Args:
    probs: Per-layer list of `[batch, heads, query, key]` probabilities.
    queries: `[batch, query]` 0/1 mask of the query rows to keep.
    keys: `[batch, key]` 0/1 mask, 1 = real token.

  Returns:
    `(entropy [tokens, layers, heads], jsd [tokens, layers - 1, heads])`,
    tokens in (example, position) order.
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
  """Sum, count and max of |S| over unpadded (query, key) positions.

  Args:
    scores: `[batch, heads, query, key]` pre-softmax (running-sum) scores.
    mask: `[batch, seq]` 0/1 mask, 1 = real token.

  Returns:
    `(sum_abs, count, max_abs)` float64 scalars over all heads and the
    positions whose query and key are both unpadded (`max_abs` is 0 when
    there are none), so a stream's mean is `sum(sum_abs) / sum(count)`.
  """
  scores = tf.cast(tf.convert_to_tensor(scores), tf.float32)
  valid = tf.cast(tf.not_equal(tf.convert_to_tensor(mask), 0), tf.float32)
  pair = valid[:, tf.newaxis, :, tf.newaxis] * valid[:, tf.newaxis, tf.newaxis, :]
  pair = tf.broadcast_to(pair, tf.shape(scores))
  magnitude = tf.abs(scores) * pair
  # Rows are summed in float32, the rest in float64.
  sum_abs = tf.reduce_sum(tf.cast(tf.reduce_sum(magnitude, axis=-1), tf.float64))
  count = tf.reduce_sum(tf.cast(tf.reduce_sum(pair, axis=-1), tf.float64))
  max_abs = tf.cast(tf.reduce_max(magnitude), tf.float64)
  return sum_abs, count, max_abs
