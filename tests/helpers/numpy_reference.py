"""An independent NumPy implementation of RealFormer / BERT for parity tests.

Written from the paper's equations (He et al., 2020, Eq. 5 and the running
mean variant) and BERT's Post-LN / Pre-LN blocks; it shares no code with the
package. Weights are read out of the Keras layers as plain arrays.
"""

import math

import numpy as np
from scipy import special


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu_tanh(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def gelu_erf(x):
  """Keras' "gelu": the exact form."""
  return 0.5 * x * (1.0 + special.erf(x / math.sqrt(2.0)))


def softmax(x):
  x = x - x.max(-1, keepdims=True)
  e = np.exp(x)
  return e / e.sum(-1, keepdims=True)


def attention(q_in, kv_in, w, mask, prev_scores, mode, layer_index):
  """One residual attention layer.

  Args:
    q_in: [B, T, D] query input; kv_in: [B, S, D] key/value input.
    w: dict with query/key/value kernels [D, N, H] and biases [N, H],
      output kernel [N, H, D] and bias [D].
    mask: [B, T, S] of 0/1 or None.
    prev_scores: [B, N, T, S] or None.
    mode: "sum", "mean" or "none".
    layer_index: 0-based layer depth.

  Returns:
    (output [B, T, D], scores [B, N, T, S], probs [B, N, T, S]).
  """
  q = np.einsum("btd,dnh->bnth", q_in, w["q_kernel"]) + w["q_bias"][:, None]
  k = np.einsum("bsd,dnh->bnsh", kv_in, w["k_kernel"]) + w["k_bias"][:, None]
  v = np.einsum("bsd,dnh->bnsh", kv_in, w["v_kernel"]) + w["v_bias"][:, None]
  scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
  if prev_scores is not None and mode != "none":
    scores = scores + prev_scores
  logits = scores / (layer_index + 1) if mode == "mean" else scores
  if mask is not None:
    logits = np.where(mask[:, None].astype(bool), logits, -1e9)
  probs = softmax(logits)
  context = probs @ v                                      # [B, N, T, H]
  out = np.einsum("bnth,nhd->btd", context, w["o_kernel"]) + w["o_bias"]
  return out, scores, probs


def block(x, w, mask, prev_scores, mode, layer_index, norm_first=False,
          activation=gelu_tanh):
  """A Post-LN (BERT) or Pre-LN Transformer block with residual attention."""
  h = layer_norm(x, *w["attn_ln"]) if norm_first else x
  attn, scores, probs = attention(h, h, w, mask, prev_scores, mode, layer_index)
  if norm_first:
    x = x + attn
    h = layer_norm(x, *w["out_ln"])
  else:
    x = layer_norm(x + attn, *w["attn_ln"])
    h = x
  inner = activation(h @ w["inner_kernel"] + w["inner_bias"])
  ffn = inner @ w["ffn_kernel"] + w["ffn_bias"]
  if norm_first:
    return x + ffn, scores, probs
  return layer_norm(x + ffn, *w["out_ln"]), scores, probs


def block_weights(block_layer):
  """Reads a RealFormerEncoderBlock / TransformerEncoderBlock's weights."""
  att = block_layer._attention_layer  # pylint: disable=protected-access
  get = lambda layer: [v.numpy() for v in layer.weights]
  qk, qb = get(att._query_dense)
  kk, kb = get(att._key_dense)
  vk, vb = get(att._value_dense)
  ok, ob = get(att._output_dense)
  ik, ib = get(block_layer._intermediate_dense)
  fk, fb = get(block_layer._output_dense)
  return dict(q_kernel=qk, q_bias=qb, k_kernel=kk, k_bias=kb, v_kernel=vk,
              v_bias=vb, o_kernel=ok, o_bias=ob, inner_kernel=ik,
              inner_bias=ib, ffn_kernel=fk, ffn_bias=fb,
              attn_ln=get(block_layer._attention_layer_norm),
              out_ln=get(block_layer._output_layer_norm))


def block_stack(x, block_layers, mask, mode, activation=gelu_tanh):
  """Runs `block` over the layers' weights in order (layer index = position,
  the running scores handed on); returns `(output, last scores)`. Reads any
  encoder block with `block_weights`' attribute names (tf_keras or Keras 3)."""
  scores = None
  for i, layer in enumerate(block_layers):
    x, scores, _ = block(x, block_weights(layer), mask, scores, mode, i,
                         activation=activation)
  return x, scores


def encoder(encoder_layer, word_ids, input_mask, type_ids, mode,
            norm_first=False, final_layer_norm=False):
  """Full encoder forward pass from a RealFormerEncoder's weights.

  Returns (sequence_output, pooled_output, per-layer scores, per-layer probs).
  """
  e = encoder_layer
  word = e._embedding_layer.embeddings.numpy()  # pylint: disable=protected-access
  pos = e._position_embedding_layer.weights[0].numpy()
  typ = e._type_embedding_layer.embeddings.numpy()
  seq = word_ids.shape[1]
  x = word[word_ids] + pos[None, :seq] + typ[type_ids]
  x = layer_norm(x, *[v.numpy() for v in e._embedding_norm_layer.weights])
  mask = np.broadcast_to(input_mask[:, None, :], (x.shape[0], seq, seq))
  scores, all_scores, all_probs = None, [], []
  for i, layer in enumerate(e.transformer_layers):
    x, scores, probs = block(x, block_weights(layer), mask, scores, mode, i,
                             norm_first)
    all_scores.append(scores)
    all_probs.append(probs)
  if final_layer_norm:
    x = layer_norm(x, *[v.numpy() for v in e._final_layer_norm.weights])
  pk, pb = [v.numpy() for v in e.pooler_layer.weights]
  pooled = np.tanh(x[:, 0] @ pk + pb)
  return x, pooled, all_scores, all_probs


def truncated_lengths(len_a, len_b, max_tokens):
  """The pair lengths BERT's `truncate_seq_pair` keeps: it pops the last
  token of the longer side (of b on ties) until both fit in `max_tokens`."""
  while len_a + len_b > max_tokens:
    if len_a > len_b:
      len_a -= 1
    else:
      len_b -= 1
  return len_a, len_b


def _fmix32(h):
  """Murmur3's fmix32 on a uint64 array holding 32-bit values."""
  m = np.uint64(0xFFFFFFFF)
  h = h ^ (h >> np.uint64(16))
  h = (h * np.uint64(0x85EBCA6B)) & m
  h = h ^ (h >> np.uint64(13))
  h = (h * np.uint64(0xC2B2AE35)) & m
  return h ^ (h >> np.uint64(16))


def hashed_keep_mask(seed_words, shape, rate):
  """The hashed dropout's keep mask (docs/layers.md, "Hashed dropout (XLA)").

  The input is read as `[L, R, C]` (`C` the last axis, `R` the one before or
  1, `L` the rest); element (l, r, c) is kept where the top 24 bits of
  fmix32(k_lr + c * 0x9E3779B9) are >= round(rate * 2**24), with
  k_s = fold of the seed words into 0x7F4A7C15 (k = fmix32(k + w * golden)),
  k_l = fmix32(k_s + l * 0x7F4A7C15) and k_lr = fmix32(k_l ^ (r * golden)),
  all in uint32 arithmetic. Computed in uint64 with explicit wrapping.
  """
  m, golden, golden2 = np.uint64(0xFFFFFFFF), 0x9E3779B9, 0x7F4A7C15
  shape = tuple(shape)
  cols = shape[-1]
  rows = shape[-2] if len(shape) >= 2 else 1
  lead = int(np.prod(shape[:-2])) if len(shape) >= 3 else 1
  key = np.uint64(golden2)
  for word in seed_words:
    word = np.uint64(int(word) & 0xFFFFFFFF)
    key = _fmix32((key + word * np.uint64(golden)) & m)
  l = np.arange(lead, dtype=np.uint64)[:, None, None]
  r = np.arange(rows, dtype=np.uint64)[None, :, None]
  c = np.arange(cols, dtype=np.uint64)[None, None, :]
  k_l = _fmix32((key + l * np.uint64(golden2)) & m)
  k_lr = _fmix32(k_l ^ ((r * np.uint64(golden)) & m))
  h = _fmix32((k_lr + c * np.uint64(golden)) & m)
  keep = (h >> np.uint64(8)) >= np.uint64(round(rate * (1 << 24)))
  return keep.reshape(shape)
