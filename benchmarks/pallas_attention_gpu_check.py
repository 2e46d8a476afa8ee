"""GPU check of the fused residual-attention kernel: parity, speed, memory.

Parity on the device of the Pallas kernel's outputs, passed-on scores and
gradients (and its dropout mask) against a float32 jnp reference; then the
speed and memory of forward + backward against the reference (XLA) at
BERT-Base's attention and at seq 4096 (median of 20 calls, XLA's memory
analysis). Needs jax, numpy and `realformer_tf.core.pallas_attention` only.

usage:
  python benchmarks/pallas_attention_gpu_check.py            # on a GPU
  python benchmarks/pallas_attention_gpu_check.py --smoke    # tiny, CPU
"""
import functools
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

from realformer_tf.core import pallas_attention  # pylint: disable=g-import-not-at-top

import timing  # pylint: disable=g-import-not-at-top,g-bad-import-order


# --sweep: one change at a time from GPU_DEFAULTS, BERT-Base bf16 f32 scores.
SWEEP = (
    {"num_warps": 8},
    {"num_stages": 3},
    {"block_q": 64, "block_k": 64},
    {"block_q": 128, "block_k": 128, "num_warps": 8},
    {"bwd_num_warps": 8},
    {"bwd_num_stages": 3},
    {"bwd_block_q": 32, "bwd_block_k": 64},
    {"bwd_block_q": 128, "bwd_block_k": 64, "bwd_num_warps": 8},
)


def reference(q, k, v, prev, bias, *, mode, layer_index, score_dtype,
              keep=None, rate=0.0):
  """Plain jnp residual attention (what XLA does without the kernel)."""
  head = q.shape[-1]
  s = jnp.einsum("btnh,bsnh->bnts", q, k,
                 preferred_element_type=jnp.float32) / np.sqrt(head)
  if prev is not None and mode != "none":
    s = s + prev.astype(jnp.float32)
  s = s.astype(score_dtype)
  logits = s.astype(jnp.float32)
  if mode == "mean":
    logits = logits / (layer_index + 1)
  if bias is not None:
    logits = logits + bias.astype(jnp.float32)
  p = jax.nn.softmax(logits, axis=-1)
  if keep is not None:
    p = jnp.where(keep, p / (1.0 - rate), 0.0)
  out = jnp.einsum("bnts,bsnh->btnh", p.astype(v.dtype), v,
                   preferred_element_type=jnp.float32)
  return out.astype(q.dtype), s


def make_step(impl, tuning=None, **kw):
  """jit(forward + backward): returns (out, scores, (dq, dk, dv, dprev)).

  Cached per (impl, tuning, kw), so parity and timing at one shape compile
  once; `tuning` (GPU_DEFAULTS overrides, applied by the caller while
  tracing) is part of the key because jit's trace cache cannot see it.
  """
  return _make_step(impl, tuple(sorted((tuning or {}).items())),
                    tuple(sorted(kw.items())))


@functools.lru_cache(maxsize=None)
def _make_step(impl, tuning_items, kw_items):
  del tuning_items  # Only a cache key.
  kw = dict(kw_items)
  def loss(q, k, v, prev, bias, w_out, w_scores, seed):
    if impl == "kernel":
      out, s = pallas_attention.fused_residual_attention(
          q, k, v, prev, bias, seed=seed, **kw)
    else:
      keep = None
      if kw.get("dropout_rate"):
        b, t, n, _ = q.shape
        keep = pallas_attention.dropout_keep_mask(
            seed, b, n, t, k.shape[1], kw["dropout_rate"])
      args = {x: kw[x] for x in ("mode", "layer_index", "score_dtype")}
      out, s = reference(q, k, v, prev, bias, keep=keep,
                         rate=kw.get("dropout_rate", 0.0), **args)
    value = (jnp.sum(out.astype(jnp.float32) * w_out)
             + jnp.sum(s.astype(jnp.float32) * w_scores))
    return value, (out, s)

  grad = jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True)

  @jax.jit
  def step(*args):
    (_, (out, s)), grads = grad(*args)
    return out, s, grads
  return step


def inputs(batch, seq, heads, head, dtype, score_dtype, seed=0):
  """Random q, k, v, prev, a padding bias (last 1/8 padded), weights."""
  r = np.random.default_rng(seed)
  q, k, v = (jnp.asarray(r.normal(size=(batch, seq, heads, head)), dtype)
             for _ in range(3))
  prev = jnp.asarray(r.normal(size=(batch, heads, seq, seq)), score_dtype)
  pad = np.arange(seq) >= seq - seq // 8
  bias = jnp.asarray(np.where(pad, -1e9, 0.0)[None, None, None, :]
                     .repeat(batch, 0), jnp.float32)
  w_out = jnp.asarray(r.normal(size=(batch, seq, heads, head)), jnp.float32)
  w_s = jnp.asarray(r.normal(size=(batch, heads, seq, seq)), jnp.float32)
  return q, k, v, prev, bias, w_out, w_s, jnp.int32(1234)


def _max_err(a, b):
  return float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))


def parity(shape, dtype, interpret, dropout_rate=0.0):
  """Max |kernel - reference| of out, scores and the four gradients."""
  batch, seq, heads, head = shape
  kw = dict(mode="sum", layer_index=1, score_dtype=jnp.float32,
            dropout_rate=dropout_rate)
  args = inputs(batch, seq, heads, head, dtype, jnp.float32)
  # Exact float32 matmuls (XLA on a GPU defaults to TF32); the kernel's
  # float32 tile matmuls are exact anyway.
  with jax.default_matmul_precision("highest"):
    got = make_step("kernel", interpret=interpret, **kw)(*args)
    # The reference computes in float32 from the same (rounded) inputs.
    args32 = tuple(a.astype(jnp.float32) if a.dtype == dtype else a
                   for a in args)
    want = make_step("reference", **kw)(*args32)
  names = ["out", "scores", "dq", "dk", "dv", "dprev"]
  flat_got = [got[0], got[1], *got[2]]
  flat_want = [want[0], want[1], *want[2]]
  return {n: _max_err(a, b) for n, a, b in zip(names, flat_got, flat_want)}


def _median_ms(compiled, args, iters):
  jax.block_until_ready(compiled(*args))  # Warm-up.
  return timing.median_ms(timing.waited(
      lambda: jax.block_until_ready(compiled(*args)), iters))


def _memory_mb(compiled):
  try:
    m = compiled.memory_analysis()
    return (m.temp_size_in_bytes + m.output_size_in_bytes) / 2**20
  except Exception:  # pylint: disable=broad-except
    return float("nan")


def timing_row(label, shape, dtype, score_dtype, interpret, iters,
               dropout_rate=0.0, impls=("kernel", "reference"), tuning=None):
  """Times fwd+bwd of kernel and reference; returns a row dict.

  `tuning` overrides entries of `pallas_attention.GPU_DEFAULTS` (tiles,
  warps, stages) while the kernel is traced and compiled.
  """
  batch, seq, heads, head = shape
  args = inputs(batch, seq, heads, head, dtype, score_dtype)
  row = {"case": label}
  for impl in impls:
    kw = dict(mode="sum", layer_index=1, score_dtype=score_dtype,
              dropout_rate=dropout_rate)
    if impl == "kernel":
      kw["interpret"] = interpret
    saved = dict(pallas_attention.GPU_DEFAULTS)
    try:
      pallas_attention.GPU_DEFAULTS.update(tuning or {})
      compiled = make_step(impl, tuning, **kw).lower(*args).compile()
      row[impl + "_ms"] = _median_ms(compiled, args, iters)
      row[impl + "_mb"] = _memory_mb(compiled)
    except Exception as e:  # pylint: disable=broad-except
      row[impl + "_ms"] = row[impl + "_mb"] = float("nan")
      row[impl + "_error"] = timing.error(e)
      traceback.print_exc(limit=3)
    finally:
      pallas_attention.GPU_DEFAULTS.clear()
      pallas_attention.GPU_DEFAULTS.update(saved)
  return row


def main(argv=None):
  parser = timing.parser(__doc__)
  parser.add_argument("--smoke", action="store_true",
                      help="tiny shapes, interpret mode (CPU)")
  parser.add_argument("--sweep", action="store_true",
                      help="also time a few block sizes at BERT-Base shape")
  args = parser.parse_args(argv)
  interpret = args.smoke or jax.default_backend() != "gpu"
  print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}),"
        f" jax {jax.__version__}, interpret={interpret}")
  bf16, f32 = jnp.bfloat16, jnp.float32
  small, bert, long_, iters = (
      ((1, 24, 2, 16), (1, 24, 2, 16), None, 2) if args.smoke else
      ((2, 200, 4, 64), (32, 512, 12, 64), (2, 4096, 12, 64), 20))

  rows = []
  print("\nparity on the device (max |kernel - jnp reference|), "
        f"B,T,N,H={small}, sum, layer 1, padding bias, float32 scores")
  checks = [("float32", f32, 0.0)]
  if not args.smoke:
    checks += [("bfloat16", bf16, 0.0), ("float32 dropout 0.1", f32, 0.1)]
  for label, dtype, rate in checks:
    try:
      errs = parity(small, dtype, interpret, rate)
      print(f"  {label:20s} " + "  ".join(f"{k}={v:.2e}"
                                          for k, v in errs.items()))
      rows.append({"case": "parity " + label, **errs})
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc(limit=4)
      rows.append({"case": "parity " + label, "error": timing.error(e)})

  cases = [("BERT-Base bf16, f32 scores", bert, bf16, f32, 0.0, None),
           ("BERT-Base bf16, bf16 scores", bert, bf16, bf16, 0.0, None),
           ("BERT-Base bf16, f32 scores, drop 0.1", bert, bf16, f32, 0.1,
            None)]
  if args.smoke:  # One row, parity's config: the table and both paths run.
    cases = [("tiny float32", bert, f32, f32, 0.0, None)]
  if args.sweep and not args.smoke:
    for tuning in SWEEP:
      label = " ".join(f"{k.replace('_block', '').replace('num_', '')}="
                       f"{v}" for k, v in tuning.items())
      cases.append((f"sweep {label}", bert, bf16, f32, 0.0, tuning))
  if long_:
    cases.append(("long B=2 T=S=4096 bf16, bf16 scores", long_, bf16, bf16,
                  0.0, None))
  timed = [timing_row(label, shape, dtype, sdtype, interpret, iters, rate,
                      impls=("kernel",) if tuning else ("kernel", "reference"),
                      tuning=tuning)
           for label, shape, dtype, sdtype, rate, tuning in cases]
  rows.extend(timed)

  print("\nforward + backward (outputs and dq, dk, dv, dprev), median of "
        f"{iters} after warm-up; MB = XLA temporaries + outputs")
  head = (f"| {'case':42s} | kernel ms | ref ms | speed-up | kernel MB "
          f"| ref MB |")
  print(head)
  print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
  for row in timed:
    k_ms, r_ms = row.get("kernel_ms", np.nan), row.get("reference_ms", np.nan)
    print(f"| {row['case']:42s} | {k_ms:9.2f} | {r_ms:6.2f} | "
          f"{r_ms / k_ms:8.2f} | {row.get('kernel_mb', np.nan):9.1f} | "
          f"{row.get('reference_mb', np.nan):6.1f} |")
  try:
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
      print(f"device peak bytes in use (whole run): "
            f"{stats['peak_bytes_in_use'] / 2**30:.2f} GiB")
  except Exception:  # pylint: disable=broad-except
    pass
  return rows


if __name__ == "__main__":
  main(sys.argv[1:])
