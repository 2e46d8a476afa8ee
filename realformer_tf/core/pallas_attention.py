"""Fused residual attention (RealFormer, paper Eq. 5) as Pallas kernels.

The forward stores the score sum S_l once and runs an online float32
softmax (FlashAttention-2), so P never reaches HBM; the backward
(`pallas_attention_backward`) recomputes P. Imports without jax (`available()`).
"""
import functools
import math

from realformer_tf.core import pallas_attention_backward as backward_lib
from realformer_tf.core import pallas_attention_common as common

jax, lax, pl, jnp = common.jax, common.lax, common.pl, common.jnp
# The kernels' dropout mask in plain jnp: (seed, batch, heads, T, S, rate).
dropout_keep_mask = common.dropout_keep_mask

MODES = ("sum", "mean", "none")
# Tiles and Triton parameters for head size 64 on Hopper: wide query tiles
# forward, square backward (it keeps more float32 tiles live).
GPU_DEFAULTS = {"block_q": 128, "block_k": 64, "bwd_block_q": 64,
                "bwd_block_k": 64, "num_warps": 4, "num_stages": 2,
                "bwd_num_warps": 4, "bwd_num_stages": 2}
_MIN_BLOCK = 16  # Triton's smallest dot operand.


def available():
  """Whether jax with Pallas imported (the kernel runs, interpreted on CPU)."""
  return common.HAVE_PALLAS


def _round_up(x, m):
  return -(-x // m) * m


def _block(requested, length, default):
  """A power-of-two tile no longer than the padded sequence needs."""
  if requested is not None:
    if requested < _MIN_BLOCK or requested & (requested - 1):
      raise ValueError(
          f"block sizes must be powers of two >= {_MIN_BLOCK}, got {requested}")
    return requested
  fit = max(_MIN_BLOCK, 1 << max(0, (length - 1).bit_length()))
  return min(default, fit)


def _forward_kernel(*refs, cfg):
  """One (query tile, batch, head): streams key tiles, online softmax."""
  refs = list(refs)
  q_ref, k_ref, v_ref = refs[:3]
  rest = refs[3:-3]
  prev_ref = rest.pop(0) if cfg.has_prev else None
  bias_ref = rest.pop(0) if cfg.bias_kind else None
  keys_ref = rest.pop(0) if cfg.dropout_rate else None
  o_ref, s_ref, lse_ref = refs[-3:]
  bq, bk = cfg.block_q, cfg.block_k
  head = q_ref.shape[-1]

  q = q_ref[...]
  keys = keys_ref[...] if keys_ref is not None else None

  def body(j, carry):
    acc, m_prev, l_prev = carry
    start_k = j * bk
    kx = pl.ds(start_k, bk)
    s = common.dot(q, k_ref[kx, :], trans_b=True) * cfg.scale
    if prev_ref is not None:
      s = s + prev_ref[:, kx].astype(jnp.float32)
    stored = s.astype(s_ref.dtype)
    s_ref[:, kx] = stored
    # The softmax sees the scores as stored (as a reference computing
    # `scores`, then `softmax(scores)`), and the backward reads them back.
    if s_ref.dtype != jnp.float32:
      s = stored.astype(jnp.float32)
    u = common.logits2(
        cfg, s, common.load_bias(cfg, bias_ref, slice(None), kx), start_k)
    m_next = jnp.maximum(m_prev, jnp.max(u, axis=1))
    correction = jnp.exp2(m_prev - m_next)
    p = jnp.exp2(u - m_next[:, None])
    l_next = correction * l_prev + jnp.sum(p, axis=1)
    keep = common.dropout_keep(cfg, keys, start_k, bk)
    p = common.apply_dropout(cfg, p, keep)
    v = v_ref[kx, :]
    acc = correction[:, None] * acc + common.dot(p.astype(v.dtype), v)
    return acc, m_next, l_next

  carry = (jnp.zeros((bq, head), jnp.float32),
           jnp.full((bq,), -jnp.inf, jnp.float32),
           jnp.zeros((bq,), jnp.float32))
  acc, m_i, l_i = lax.fori_loop(0, k_ref.shape[0] // bk, body, carry)
  o_ref[...] = (acc / l_i[:, None]).astype(o_ref.dtype)
  lse_ref[...] = m_i + jnp.log2(l_i)


def _forward(cfg, q, k, v, prev, bias, keys):
  """Runs the forward kernel on padded inputs: (out, scores, lse)."""
  batch, seq_q, heads, head = q.shape
  seq_k = k.shape[1]
  bq = cfg.block_q
  qspec = pl.BlockSpec((None, bq, None, head), lambda i, b, n: (b, i, n, 0))
  kvspec = pl.BlockSpec((None, seq_k, None, head),
                        lambda i, b, n: (b, 0, n, 0))
  row_spec = pl.BlockSpec((None, None, bq, seq_k),
                          lambda i, b, n: (b, n, i, 0))
  vec_spec = pl.BlockSpec((None, None, bq), lambda i, b, n: (b, n, i))
  inputs, specs = [q, k, v], [qspec, kvspec, kvspec]
  if cfg.has_prev:
    inputs.append(prev)
    specs.append(row_spec)
  extra, extra_specs = common.bias_and_keys(
      cfg, bias, keys, bq, seq_k, lambda i: (i, 0), vec_spec)
  inputs += extra
  specs += extra_specs
  out_shape = [
      jax.ShapeDtypeStruct(q.shape, q.dtype),
      jax.ShapeDtypeStruct((batch, heads, seq_q, seq_k), cfg.score_dtype),
      jax.ShapeDtypeStruct((batch, heads, seq_q), jnp.float32),
  ]
  return pl.pallas_call(
      functools.partial(_forward_kernel, cfg=cfg),
      grid=(seq_q // bq, batch, heads),
      in_specs=specs,
      out_specs=[qspec, row_spec, vec_spec],
      out_shape=out_shape,
      compiler_params=common.compiler_params(cfg.num_warps, cfg.num_stages),
      interpret=cfg.interpret,
      name="residual_attention_forward",
  )(*inputs)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,)) if available() else (
    lambda f: f)
def _attention(q, k, v, prev, bias, keys, cfg):
  out, scores, _ = _forward(cfg, q, k, v, prev, bias, keys)
  return out, scores


def _attention_fwd(q, k, v, prev, bias, keys, cfg):
  out, scores, lse = _forward(cfg, q, k, v, prev, bias, keys)
  return (out, scores), (q, k, v, bias, keys, out, scores, lse)


def _attention_bwd(cfg, residuals, cotangents):
  q, k, v, bias, keys, out, scores, lse = residuals
  g_out, g_scores = cotangents
  dq, dk, dv, dprev = backward_lib.backward(
      cfg, q, k, v, bias, keys, out, scores, lse, g_out, g_scores)
  return dq, dk, dv, dprev, None, None


if available():
  _attention.defvjp(_attention_fwd, _attention_bwd)


def _padded(x, axis_lengths):
  """Zero-pads trailing ends of `x` to the given {axis: length}."""
  pads = [(0, 0)] * x.ndim
  for axis, length in axis_lengths.items():
    pads[axis] = (0, length - x.shape[axis])
  if all(p == (0, 0) for p in pads):
    return x
  return jnp.pad(x, pads)


def _run(query, key, value, prev_scores, bias, seed, cfg, head_pad):
  """Pads to whole tiles, runs the custom-vjp kernel, slices the padding off."""
  batch, seq_q, heads, head = query.shape
  seq_k = key.shape[1]
  t_pad = _round_up(seq_q, max(cfg.block_q, cfg.bwd_block_q))
  s_pad = _round_up(seq_k, max(cfg.block_k, cfg.bwd_block_k))
  q = _padded(query, {1: t_pad, 3: head_pad})
  k = _padded(key, {1: s_pad, 3: head_pad})
  v = _padded(value, {1: s_pad, 3: head_pad})
  prev = None
  if cfg.has_prev:
    prev = _padded(prev_scores.astype(cfg.score_dtype), {2: t_pad, 3: s_pad})
  if cfg.bias_kind == "row":
    bias = _padded(bias.reshape(bias.shape[0], seq_k), {1: s_pad})
  elif cfg.bias_kind == "full":
    bias = _padded(bias.reshape(bias.shape[0], seq_q, seq_k),
                   {1: t_pad, 2: s_pad})
  if bias is not None:
    bias = lax.stop_gradient(bias)
  keys = None
  if cfg.dropout_rate:
    keys = common.row_keys(seed, batch, heads, t_pad)
  out, scores = _attention(q, k, v, prev, bias, keys, cfg)
  return out[:, :seq_q, :, :head], scores[:, :, :seq_q, :seq_k]


_run_jit = None
if available():
  _run_jit = jax.jit(_run, static_argnames=("cfg", "head_pad"))


def fused_residual_attention(query, key, value, prev_scores=None, bias=None,
                             *, mode="sum", layer_index=0, score_dtype=None,
                             dropout_rate=0.0, seed=None, interpret=None,
                             block_q=None, block_k=None):
  """Residual multi-head attention in one fused Pallas kernel.

  Args:
    query: `[B, T, N, H]` projected, unscaled queries (float32, bfloat16 or
      float16); key, value: `[B, S, N, H]` of the same dtype.
    prev_scores: `[B, N, T, S]` previous running sum, or None (ignored for
      mode "none"). bias: additive mask `[B or 1, 1, T or 1, S]` or None,
      not differentiated.
    mode, layer_index: `core.attention`'s Eq. 5 modes.
    score_dtype: of the returned scores (default the query's); the softmax
      runs in float32 regardless.
    dropout_rate, seed: rate in [0, 1); an integer scalar or small vector
      (e.g. a JAX PRNG key's data), needed when the rate is > 0.
    interpret: default: unless jax's default backend is a GPU.
    block_q, block_k: power-of-two tiles; default tuned for a GPU.

  Returns:
    `(context [B, T, N, H] in the query's dtype, scores [B, N, T, S] in
    score_dtype)`: scores is this layer's running sum `S_l` ("sum", "mean")
    or its own scaled scores ("none"), to pass to the next layer.
  """
  if not available():
    raise ImportError("fused_residual_attention needs jax with Pallas")
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  if not 0.0 <= dropout_rate < 1.0:
    raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
  if dropout_rate and seed is None:
    raise ValueError("dropout_rate > 0 needs a seed")
  batch, seq_q, heads, head = query.shape
  seq_k = key.shape[1]
  if key.shape != (batch, seq_k, heads, head) or value.shape != key.shape:
    raise ValueError(f"key/value shapes {key.shape}, {value.shape} do not "
                     f"match query {query.shape}")
  if key.dtype != query.dtype or value.dtype != query.dtype:
    raise ValueError("query, key and value must share one dtype")
  if mode == "none":
    prev_scores = None
  if prev_scores is not None and prev_scores.shape != (batch, heads, seq_q,
                                                       seq_k):
    raise ValueError(f"prev_scores shape {prev_scores.shape} is not "
                     f"{(batch, heads, seq_q, seq_k)}")
  bias_kind, bias_batched = None, False
  if bias is not None:
    if (bias.ndim != 4 or bias.shape[1] != 1 or bias.shape[0] not in (1, batch)
        or bias.shape[2] not in (1, seq_q) or bias.shape[3] != seq_k):
      raise ValueError(f"bias shape {bias.shape} is not [B or 1, 1, T or 1, "
                       f"S] for B={batch}, T={seq_q}, S={seq_k}")
    bias_kind = "row" if bias.shape[2] == 1 else "full"
    bias_batched = bias.shape[0] > 1
  if interpret is None:
    interpret = jax.default_backend() != "gpu"
  cfg = common.Config(
      mode=mode, layer_index=int(layer_index), scale=1.0 / math.sqrt(head),
      seq_q=seq_q, seq_k=seq_k,
      block_q=_block(block_q, seq_q, GPU_DEFAULTS["block_q"]),
      block_k=_block(block_k, seq_k, GPU_DEFAULTS["block_k"]),
      bwd_block_q=_block(block_q, seq_q, GPU_DEFAULTS["bwd_block_q"]),
      bwd_block_k=_block(block_k, seq_k, GPU_DEFAULTS["bwd_block_k"]),
      num_warps=GPU_DEFAULTS["num_warps"],
      num_stages=GPU_DEFAULTS["num_stages"],
      bwd_num_warps=GPU_DEFAULTS["bwd_num_warps"],
      bwd_num_stages=GPU_DEFAULTS["bwd_num_stages"],
      bias_kind=bias_kind, bias_batched=bias_batched,
      has_prev=prev_scores is not None, dropout_rate=float(dropout_rate),
      score_dtype=jnp.dtype(score_dtype or query.dtype).name,
      interpret=bool(interpret))
  # Triton dots need power-of-two operands of at least 16.
  head_pad = max(_MIN_BLOCK, 1 << (head - 1).bit_length())
  return _run_jit(query, key, value, prev_scores, bias,
                  None if seed is None else jnp.asarray(seed),
                  cfg=cfg, head_pad=head_pad)
