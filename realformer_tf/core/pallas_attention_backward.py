"""Backward of the fused residual attention: a dQ kernel and a dK, dV kernel.

P is recomputed from the stored score sums and the forward's logsumexp, the
dropout mask from its hash. dS = g_S + P * (dP - D) * c (c = 1/(l+1) for
"mean"), written into S_{l-1}; as in FlashAttention-2 the dQ kernel walks key
tiles per query tile and the dK, dV kernel query tiles per key tile.
"""
import functools

from realformer_tf.core import pallas_attention_common as common

jax, lax, pl, jnp = common.jax, common.lax, common.pl, common.jnp


def _unpack(refs, cfg, n_in, has_dprev):
  """Splits the refs into the fixed inputs and the optional ones."""
  refs = list(refs)
  fixed = refs[:n_in]
  rest = refs[n_in:]
  bias_ref = rest.pop(0) if cfg.bias_kind else None
  keys_ref = rest.pop(0) if cfg.dropout_rate else None
  outs = rest
  if not has_dprev:
    outs = outs + [None]
  return fixed, bias_ref, keys_ref, outs


def _ds_tile(cfg, s, bias, p_lse, do, v, delta, g, keys, start_k):
  """(P, dropped P, dS) of one tile, all float32.

  dP = (dO V^T) * M (M the dropout mask, 1/(1-rate) folded in), D =
  rowsum(dO * O), dS = g_S + P * (dP - D) * c; then dQ = dS K / sqrt(d),
  dK = dS^T Q / sqrt(d), dV = (P * M)^T dO. `g` (g_S) is the next layer's
  gradient into S_l; in mode "none" it still reaches Q and K.
  """
  u = common.logits2(cfg, s, bias, start_k)
  p = jnp.exp2(u - p_lse[:, None])
  keep = common.dropout_keep(cfg, keys, start_k, s.shape[1])
  dp = common.apply_dropout(cfg, common.dot(do, v, trans_b=True), keep)
  dlogits = p * (dp - delta[:, None])
  if cfg.logit_scale != 1.0:
    dlogits = dlogits * cfg.logit_scale
  return p, common.apply_dropout(cfg, p, keep), g + dlogits


def _dq_kernel(*refs, cfg):
  """One (query tile, batch, head): dQ and the rows of d S_{l-1}."""
  (q_ref, k_ref, v_ref, s_ref, do_ref, lse_ref, delta_ref, g_ref), bias_ref, \
      keys_ref, (dq_ref, dprev_ref) = _unpack(refs, cfg, 8, cfg.has_prev)
  bk = cfg.bwd_block_k
  q = q_ref[...]
  do = do_ref[...]
  lse = lse_ref[...]
  delta = delta_ref[...]
  keys = keys_ref[...] if keys_ref is not None else None

  def body(j, dq):
    start_k = j * bk
    kx = pl.ds(start_k, bk)
    k = k_ref[kx, :]
    _, _, ds = _ds_tile(
        cfg, s_ref[:, kx].astype(jnp.float32),
        common.load_bias(cfg, bias_ref, slice(None), kx), lse, do,
        v_ref[kx, :], delta, g_ref[:, kx].astype(jnp.float32), keys, start_k)
    if dprev_ref is not None:
      dprev_ref[:, kx] = ds.astype(dprev_ref.dtype)
    return dq + common.dot(ds.astype(k.dtype), k)

  dq = lax.fori_loop(0, k_ref.shape[0] // bk, body,
                     jnp.zeros(q.shape, jnp.float32))
  dq_ref[...] = (dq * cfg.scale).astype(dq_ref.dtype)


def _dkv_kernel(*refs, cfg):
  """One (key tile, batch, head): dK and dV."""
  (q_ref, k_ref, v_ref, s_ref, do_ref, lse_ref, delta_ref, g_ref), bias_ref, \
      keys_ref, (dk_ref, dv_ref) = _unpack(refs, cfg, 8, True)
  bq = cfg.bwd_block_q
  start_k = pl.program_id(0) * cfg.bwd_block_k
  k = k_ref[...]
  v = v_ref[...]

  def body(i, carry):
    dk, dv = carry
    qx = pl.ds(i * bq, bq)
    q = q_ref[qx, :]
    do = do_ref[qx, :]
    keys = keys_ref[qx] if keys_ref is not None else None
    _, p_dropped, ds = _ds_tile(
        cfg, s_ref[qx, :].astype(jnp.float32),
        common.load_bias(cfg, bias_ref, qx, slice(None)), lse_ref[qx], do, v,
        delta_ref[qx], g_ref[qx, :].astype(jnp.float32), keys, start_k)
    dv = dv + common.dot(p_dropped.astype(do.dtype), do, trans_a=True)
    dk = dk + common.dot(ds.astype(q.dtype), q, trans_a=True)
    return dk, dv

  zeros = jnp.zeros(k.shape, jnp.float32)
  dk, dv = lax.fori_loop(0, q_ref.shape[0] // bq, body, (zeros, zeros))
  dk_ref[...] = (dk * cfg.scale).astype(dk_ref.dtype)
  dv_ref[...] = dv.astype(dv_ref.dtype)


def backward(cfg, q, k, v, bias, keys, out, scores, lse, g_out, g_scores):
  """Gradients `(dq, dk, dv, dprev or None)` of the padded attention, from
  the forward's `cfg`, padded inputs and outputs, and the cotangents
  `g_out`, `g_scores`."""
  batch, seq_q, heads, head = q.shape
  seq_k = k.shape[1]
  bq, bk = cfg.bwd_block_q, cfg.bwd_block_k
  # D = rowsum(dO * O): one cheap fused XLA reduction, [B, N, T].
  delta = jnp.einsum("btnh,btnh->bnt", g_out.astype(jnp.float32),
                     out.astype(jnp.float32))
  g_scores = g_scores.astype(cfg.score_dtype)
  params = common.compiler_params(cfg.bwd_num_warps, cfg.bwd_num_stages)

  # dQ: grid over query tiles.
  q_tile = pl.BlockSpec((None, bq, None, head), lambda i, b, n: (b, i, n, 0))
  kv_all = pl.BlockSpec((None, seq_k, None, head),
                        lambda i, b, n: (b, 0, n, 0))
  rows = pl.BlockSpec((None, None, bq, seq_k), lambda i, b, n: (b, n, i, 0))
  vec = pl.BlockSpec((None, None, bq), lambda i, b, n: (b, n, i))
  inputs = [q, k, v, scores, g_out, lse, delta, g_scores]
  specs = [q_tile, kv_all, kv_all, rows, q_tile, vec, vec, rows]
  extra, extra_specs = common.bias_and_keys(
      cfg, bias, keys, bq, seq_k, lambda i: (i, 0), vec)
  inputs += extra
  specs += extra_specs
  out_shape = [jax.ShapeDtypeStruct(q.shape, q.dtype)]
  out_specs = [q_tile]
  if cfg.has_prev:
    out_shape.append(jax.ShapeDtypeStruct(scores.shape, cfg.score_dtype))
    out_specs.append(rows)
  dq_out = pl.pallas_call(
      functools.partial(_dq_kernel, cfg=cfg),
      grid=(seq_q // bq, batch, heads),
      in_specs=specs, out_specs=out_specs, out_shape=out_shape,
      compiler_params=params, interpret=cfg.interpret,
      name="residual_attention_dq",
  )(*inputs)
  dq = dq_out[0]
  dprev = dq_out[1] if cfg.has_prev else None

  # dK, dV: grid over key tiles.
  q_all = pl.BlockSpec((None, seq_q, None, head),
                       lambda j, b, n: (b, 0, n, 0))
  kv_tile = pl.BlockSpec((None, bk, None, head), lambda j, b, n: (b, j, n, 0))
  cols = pl.BlockSpec((None, None, seq_q, bk), lambda j, b, n: (b, n, 0, j))
  vec_all = pl.BlockSpec((None, None, seq_q), lambda j, b, n: (b, n, 0))
  specs = [q_all, kv_tile, kv_tile, cols, q_all, vec_all, vec_all, cols]
  inputs = [q, k, v, scores, g_out, lse, delta, g_scores]
  extra, extra_specs = common.bias_and_keys(
      cfg, bias, keys, seq_q, bk, lambda j: (0, j), vec_all)
  inputs += extra
  specs += extra_specs
  dk, dv = pl.pallas_call(
      functools.partial(_dkv_kernel, cfg=cfg),
      grid=(seq_k // bk, batch, heads),
      in_specs=specs, out_specs=[kv_tile, kv_tile],
      out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype),
                 jax.ShapeDtypeStruct(v.shape, v.dtype)],
      compiler_params=params, interpret=cfg.interpret,
      name="residual_attention_dkv",
  )(*inputs)
  return dq, dk, dv, dprev
