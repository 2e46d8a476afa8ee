"""The fused residual-attention kernel against NumPy and `jax.grad` references.

Pallas runs in interpret mode here (CPU). Each distinct kernel configuration
compiles three kernels (about 5 s each on 2 cores), so each test checks the
forward outputs and all gradients from one `jax.vjp` and the shapes are tiny.
Float32: outputs, passed-on scores and all four gradients within atol/rtol
1e-5 (measured max abs errors 3e-7 to 1.5e-6). Bfloat16 inputs and scores:
max error within 1.5% of the largest reference value, about four bfloat16
ulps (measured 0.2% to 0.4%; the float32 reference runs on the same rounded
inputs; the kernel rounds P and dS to bfloat16 before each tile matmul, as
every flash-attention kernel does).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("jax.experimental.pallas")
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

from realformer_tf.core import pallas_attention  # pylint: disable=g-import-not-at-top

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def numpy_attention(q, k, v, prev, bias, mode, layer_index, keep=None,
                    rate=0.0):
  """NumPy float64 RealFormer attention (Eq. 5): (context, scores)."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  s = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
  if mode != "none" and prev is not None:
    s = s + np.asarray(prev, np.float64)
  logits = s / (layer_index + 1) if mode == "mean" else s
  if bias is not None:
    logits = logits + np.asarray(bias, np.float64)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  if keep is not None:
    p = np.where(np.asarray(keep), p / (1.0 - rate), 0.0)
  return np.einsum("bnts,bsnh->btnh", p, v), s


def jnp_attention(q, k, v, prev, bias, mode, layer_index, keep=None,
                  rate=0.0):
  """Plain jnp float32 version of `numpy_attention`, for `jax.grad`."""
  hi = jax.lax.Precision.HIGHEST
  s = jnp.einsum("btnh,bsnh->bnts", q, k, precision=hi) / np.sqrt(
      q.shape[-1])
  if mode != "none":
    s = s + prev
  logits = s / (layer_index + 1) if mode == "mean" else s
  if bias is not None:
    logits = logits + bias
  p = jax.nn.softmax(logits, axis=-1)
  if keep is not None:
    p = jnp.where(keep, p / (1.0 - rate), 0.0)
  return jnp.einsum("bnts,bsnh->btnh", p, v, precision=hi), s


def make_inputs(batch=2, seq_q=37, seq_k=37, heads=2, head=8, bias="padding",
                seed=0):
  r = np.random.default_rng(seed)
  q = r.normal(size=(batch, seq_q, heads, head)).astype(np.float32)
  k = r.normal(size=(batch, seq_k, heads, head)).astype(np.float32)
  v = r.normal(size=(batch, seq_k, heads, head)).astype(np.float32)
  prev = r.normal(size=(batch, heads, seq_q, seq_k)).astype(np.float32)
  if bias == "padding":  # Per-example lengths, [B, 1, 1, S].
    lengths = np.array([seq_k, seq_k - 7])[:batch]
    b = np.where(np.arange(seq_k)[None, :] < lengths[:, None], 0.0, -1e9)
    b = b[:, None, None, :].astype(np.float32)
  elif bias == "causal":  # Full bias, [B, 1, T, S].
    b = np.where(np.tril(np.ones((seq_q, seq_k))) > 0, 0.0, -1e9)
    b = np.broadcast_to(b, (batch, 1, seq_q, seq_k)).astype(np.float32)
  elif bias == "shared_row":  # [1, 1, 1, S].
    b = np.where(np.arange(seq_k) < seq_k - 3, 0.0, -1e9)
    b = b[None, None, None, :].astype(np.float32)
  else:
    b = None
  g_out = r.normal(size=q.shape[:3] + (head,)).astype(np.float32)
  g_s = r.normal(size=prev.shape).astype(np.float32)
  return q, k, v, prev, b, g_out, g_s


def kernel_and_grads(q, k, v, prev, bias, g_out, g_s, dtype=jnp.float32,
                     **kw):
  """Kernel outputs and the vjp of (g_out, g_s) into (q, k, v, prev)."""
  cast = lambda x: jnp.asarray(x, dtype)
  f = lambda *a: pallas_attention.fused_residual_attention(
      *a, None if bias is None else jnp.asarray(bias), interpret=True, **kw)
  outs, vjp = jax.vjp(f, cast(q), cast(k), cast(v),
                      jnp.asarray(prev, kw.get("score_dtype") or dtype))
  grads = vjp((cast(g_out), jnp.asarray(g_s, outs[1].dtype)))
  return outs, grads


def reference_grads(q, k, v, prev, bias, g_out, g_s, mode, layer_index,
                    keep=None, rate=0.0):
  f = lambda *a: jnp_attention(*a, None if bias is None else jnp.asarray(bias),
                               mode, layer_index, keep, rate)
  _, vjp = jax.vjp(f, *(jnp.asarray(x) for x in (q, k, v, prev)))
  return vjp((jnp.asarray(g_out), jnp.asarray(g_s)))


def check_float32(inputs, mode, layer_index, keep=None, rate=0.0, **kw):
  q, k, v, prev, bias, g_out, g_s = inputs
  (out, scores), grads = kernel_and_grads(
      q, k, v, prev, bias, g_out, g_s, mode=mode, layer_index=layer_index,
      dropout_rate=rate, **kw)
  want_out, want_s = numpy_attention(q, k, v, prev, bias, mode, layer_index,
                                     keep, rate)
  np.testing.assert_allclose(out, want_out, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(scores, want_s, atol=1e-5, rtol=1e-5)
  want = reference_grads(q, k, v, prev, bias, g_out, g_s, mode, layer_index,
                         keep, rate)
  names = ("query", "key", "value", "prev_scores")
  for name, got, ref in zip(names, grads, want):
    if mode == "none" and name == "prev_scores":
      assert not np.any(got), "'none' ignores prev_scores: zero gradient"
      continue
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5,
                               err_msg=f"d{name}")


def test_sum_padding_bias_lengths_not_whole_tiles():
  # T = S = 37 with 16-tiles: 48 padded, 11 padded rows and columns.
  check_float32(make_inputs(), "sum", 0, block_q=16, block_k=16)


def test_mean_causal_bias_default_tiles():
  # The GPU defaults: 128 x 64 forward tiles, 64 x 64 backward tiles, so
  # T = S = 72 pads to 128 and the passes tile differently.
  assert pallas_attention.GPU_DEFAULTS["block_q"] == 128
  check_float32(make_inputs(seq_q=72, seq_k=72, bias="causal"), "mean", 2)


def test_none_cross_attention_shared_bias():
  # "none": prev is ignored, the own scores are returned and their
  # cotangent still reaches query and key.
  check_float32(make_inputs(seq_q=20, seq_k=40, bias="shared_row", head=16),
                "none", 3, block_q=16, block_k=32)


def test_no_bias_no_prev_first_layer():
  q, k, v, _, _, _, _ = make_inputs(seq_q=16, seq_k=16, bias=None)
  out, scores = pallas_attention.fused_residual_attention(
      q, k, v, interpret=True)
  want_out, want_s = numpy_attention(q, k, v, None, None, "sum", 0)
  np.testing.assert_allclose(out, want_out, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(scores, want_s, atol=1e-5, rtol=1e-5)


def test_bfloat16_inputs_and_scores():
  q, k, v, prev, bias, g_out, g_s = make_inputs(seq_q=24, seq_k=24, head=16)
  rounded = [np.asarray(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32))
             for x in (q, k, v, prev, g_out, g_s)]
  q, k, v, prev, g_out, g_s = rounded
  (out, scores), grads = kernel_and_grads(
      q, k, v, prev, bias, g_out, g_s, dtype=jnp.bfloat16,
      score_dtype=jnp.bfloat16, mode="sum")
  assert out.dtype == jnp.bfloat16 and scores.dtype == jnp.bfloat16
  want_out, want_s = numpy_attention(q, k, v, prev, bias, "sum", 0)
  want = reference_grads(q, k, v, prev, bias, g_out, g_s, "sum", 0)
  for name, got, ref in zip(
      ("out", "scores", "dq", "dk", "dv", "dprev"),
      (out, scores) + tuple(grads), (want_out, want_s) + tuple(want)):
    got = np.asarray(jnp.asarray(got, jnp.float32))
    err = np.abs(got - np.asarray(ref)).max() / np.abs(ref).max()
    assert err < 1.5e-2, f"{name}: relative max error {err}"


RATE = 0.25


def test_dropout_gradients_use_the_forward_mask():
  q, k, v, prev, bias, g_out, g_s = make_inputs(seq_q=20, seq_k=24)
  keep = pallas_attention.dropout_keep_mask(7, 2, 2, 20, 24, RATE)
  check_float32((q, k, v, prev, bias, g_out, g_s), "sum", 0, keep=keep,
                rate=RATE, seed=jnp.int32(7), block_q=16, block_k=16)


def _dropout_probe(seed, batch=2, heads=2, seq_q=40, seq_k=16):
  """The forward's kept mask, recovered without the jnp hash helper.

  With q = 0 and no bias P is uniform (1/S); with V the identity (H = S)
  context[b, t, n, s] = P_dropped[t, s] = keep / (S (1 - rate)).
  """
  q = jnp.zeros((batch, seq_q, heads, seq_k), jnp.float32)
  k = jnp.zeros((batch, seq_k, heads, seq_k), jnp.float32)
  v = jnp.broadcast_to(jnp.eye(seq_k)[None, :, None, :],
                       (batch, seq_k, heads, seq_k))
  out, _ = pallas_attention.fused_residual_attention(
      q, k, v, dropout_rate=RATE, seed=seed, interpret=True,
      block_q=16, block_k=16)
  scaled = np.asarray(out) * seq_k * (1 - RATE)  # [B, T, N, S]
  kept = scaled > 0.5
  np.testing.assert_allclose(scaled, kept.astype(np.float32), atol=1e-5)
  return kept.transpose(0, 2, 1, 3)  # [B, N, T, S]


def test_dropout_mask_rate_seeds_and_helper():
  first = _dropout_probe(jnp.int32(11))
  again = _dropout_probe(jnp.int32(11))
  other = _dropout_probe(jnp.int32(12))
  np.testing.assert_array_equal(first, again)
  assert np.mean(first != other) > 0.2, "another seed, another mask"
  # Binomial keep rate within 5 sigma, over both seeds.
  n = first.size * 2
  kept = first.sum() + other.sum()
  sigma = np.sqrt(n * RATE * (1 - RATE))
  assert abs(kept - n * (1 - RATE)) < 5 * sigma, (kept, n)
  # Heads, batch elements and rows draw different masks.
  assert np.mean(first[0, 0] != first[0, 1]) > 0.2
  assert np.mean(first[0, 0] != first[1, 0]) > 0.2
  assert np.mean(first[0, 0, 0] != first[0, 0, 1]) > 0.1
  # The jnp helper reproduces the kernel's mask exactly.
  np.testing.assert_array_equal(
      first, pallas_attention.dropout_keep_mask(11, 2, 2, 40, 16, RATE))
  # A PRNG key's uint32[2] words (Keras' SeedGenerator state) seed it too.
  key = jnp.array([3, 0x9E3779B9], jnp.uint32)
  from_key = _dropout_probe(key)
  assert np.mean(from_key != first) > 0.2
  np.testing.assert_array_equal(
      from_key, pallas_attention.dropout_keep_mask(key, 2, 2, 40, 16, RATE))


@pytest.mark.parametrize("case", [
    dict(seq_q=40, seq_k=40, head=16, bias="padding", mode="mean",
         layer_index=1, dropout_rate=0.1, seed=jnp.int32(3),
         score_dtype=jnp.float32),
    # GPU default tiles, T != S, not whole tiles, full bias, bf16 scores.
    dict(seq_q=100, seq_k=77, head=64, bias="causal", mode="none",
         score_dtype=jnp.bfloat16),
])
def test_lowers_to_triton_for_a_gpu(case):
  """Cross-lowers fwd + bwd for CUDA (Triton IR) without a GPU."""
  case = dict(case)
  shape = {x: case.pop(x) for x in ("seq_q", "seq_k", "head", "bias")}
  q, k, v, prev, bias, _, _ = make_inputs(**shape)

  def loss(q, k, v, prev):
    out, s = pallas_attention.fused_residual_attention(
        q, k, v, prev, jnp.asarray(bias), interpret=False, **case)
    return jnp.sum(out.astype(jnp.float32)) + jnp.sum(s.astype(jnp.float32))

  args = [jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)] + [
      jnp.asarray(prev)]
  lowered = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3))).trace(
      *args).lower(lowering_platforms=("cuda",))
  text = lowered.as_text()
  for name in ("residual_attention_forward", "residual_attention_dq",
               "residual_attention_dkv"):
    assert f'name = "{name}"' in text, name


def test_rejects_bad_arguments():
  q = jnp.zeros((1, 8, 2, 8))
  with pytest.raises(ValueError, match="mode"):
    pallas_attention.fused_residual_attention(q, q, q, mode="max")
  with pytest.raises(ValueError, match="seed"):
    pallas_attention.fused_residual_attention(q, q, q, dropout_rate=0.1)
  with pytest.raises(ValueError, match="bias shape"):
    pallas_attention.fused_residual_attention(q, q, q,
                                              bias=jnp.zeros((1, 2, 8, 8)))


def test_imports_without_jax():
  code = ("import sys; sys.modules['jax'] = None\n"
          "from realformer_tf.core import pallas_attention as p\n"
          "assert not p.available(); print('ok')")
  result = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                          capture_output=True, text=True, check=False)
  assert result.stdout.strip() == "ok", result.stderr


def test_gpu_check_script_smoke():
  sys.path.insert(0, os.path.join(REPO, "benchmarks"))
  import pallas_attention_gpu_check  # pylint: disable=g-import-not-at-top
  rows = pallas_attention_gpu_check.main(["--smoke"])
  parity = [r for r in rows if r["case"].startswith("parity")]
  assert parity and all(max(r[k] for k in ("out", "scores", "dq", "dk", "dv",
                                             "dprev")) < 1e-5 for r in parity)
  timed = [r for r in rows if "kernel_ms" in r]
  assert timed and all(r["kernel_ms"] > 0 and r["reference_ms"] > 0
                       for r in timed)
