"""The paper's Eq. 5, written once over an ops namespace both faces pass in.

    S_l = Q_l K_l^T / sqrt(d) + S_{l-1},  P_l = softmax(S_l + mask)  ("sum");
    "mean": softmax(S_l / (l + 1) + mask); "none": S_l = Q_l K_l^T / sqrt(d).

`S_l` is passed on unmasked, as in the authors' TF1 code. `ops` is `keras.ops`
or `layers.residual_attention.TF_OPS`: `keras.ops`' names plus `dtype(x)`.
"""

import math

# Keras' MultiHeadAttention equations for one attention axis.
SCORES_EQUATION = "bsnh,btnh->bnts"
CONTEXT_EQUATION = "bnts,bsnh->btnh"


def mask_bias(ops, mask, dtype: str, adder: float):
  """0/1 (or bool) mask, 1 = attend -> additive bias of `dtype` (0 or `adder`)."""
  keep = ops.cast(mask, dtype)
  return ops.multiply(ops.subtract(ops.cast(1.0, dtype), keep),
                      ops.cast(adder, dtype))


def query_key_scores(ops, query, key, score_dtype: str):
  """`query @ key^T` `[B, N, T, S]` in `score_dtype` (the adapter's hook if any)."""
  hook = getattr(ops, "query_key_scores", None)
  if hook is not None:
    return hook(query, key, score_dtype)
  scores = ops.einsum(SCORES_EQUATION, key, query)
  if ops.dtype(scores) != score_dtype:
    scores = ops.cast(scores, score_dtype)
  return scores


def residual_dot_product_attention(ops, query, key, value, prev_scores=None,
                                   bias=None, *, mode: str = "sum",
                                   layer_index: int = 0,
                                   score_dtype: str = "float32",
                                   dropout=None):
  """Eq. 5 on projected heads: `(context, scores, probs)`.

  Args:
    ops: The ops namespace (see the module docstring).
    query: `[B, T, N, H]`, not yet scaled; key, value: `[B, S, N, H]`.
    prev_scores: `S_{l-1}`, `[B, N, T, S]`, or None for the first layer.
    bias: Additive mask of `score_dtype`, broadcastable to the scores.
    mode: "sum", "mean" or "none" (plain attention).
    layer_index: `l`, the 0-based depth; used by "mean".
    score_dtype: dtype name of `scores`; the softmax runs in `query`'s dtype.
    dropout: Applied to the probabilities before they weigh `value`.

  Returns:
    `context` `[B, T, N, H]`; `scores` (the unmasked `S_l` to hand on) and
    `probs` (before dropout), `[B, N, T, S]`.
  """
  compute_dtype = ops.dtype(query)
  # Scaling Q scales Q K^T; under XLA it fuses into the query projection.
  query = ops.multiply(query, 1.0 / math.sqrt(float(query.shape[-1])))
  scores = query_key_scores(ops, query, key, score_dtype)  # QK^T / sqrt(d)
  if prev_scores is not None and mode != "none":
    scores = ops.add(scores, ops.cast(prev_scores, score_dtype))  # + S_{l-1}
  logits = scores
  if mode == "mean":
    logits = ops.divide(scores, ops.cast(layer_index + 1, score_dtype))
  if bias is not None:
    logits = ops.add(logits, bias)     # the mask: logits only, not S_l
  if compute_dtype == "float16" and score_dtype == "float32":
    # float32 logits can exceed float16's range; softmax is shift-invariant.
    logits = ops.subtract(logits, ops.stop_gradient(
        ops.max(logits, axis=-1, keepdims=True)))
  # Compute dtype, as plain attention's: float32 would double backprop memory.
  probs = ops.softmax(ops.cast(logits, compute_dtype), axis=-1)
  dropped = probs if dropout is None else dropout(probs)  # BERT's token drop
  context = ops.einsum(CONTEXT_EQUATION, dropped, value)
  return context, scores, probs


def causal_mask(ops, query_len, key_len, offset):
  """Boolean `[1, T, S]`: query row `i`, at position `offset + i` (a decoding
  step's cache position), sees keys `j <= offset + i`."""
  rows = ops.expand_dims(
      ops.add(ops.arange(query_len, dtype="int32"), ops.cast(offset, "int32")),
      -1)
  cols = ops.expand_dims(ops.arange(key_len, dtype="int32"), 0)
  return ops.expand_dims(ops.less_equal(cols, rows), 0)
