"""`benchmarks/gpu_profile.py`: kernel categories, per-step figures, a trace.

The GPU's kernel names cannot be produced here; the categories are checked
on the names the traces of cuBLAS, XLA's GPU fusions, Triton and our Pallas
kernels carry, the figures on handmade events with known answers, and the
trace reader on a real `jax.profiler` trace of a CPU step (the XLA CPU
runtime's thunk events stand in for the device's kernels).
"""

import io
import os
import sys

from absl.testing import parameterized
import pytest

pytest.importorskip("jax")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import gpu_profile  # pylint: disable=g-import-not-at-top,wrong-import-position


class CategoryTest(parameterized.TestCase):

  @parameterized.parameters(
      ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
       "custom-call.12", "", "GEMM"),
      ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopB_NNT", "cublas-gemm.3", "",
       "GEMM"),
      ("gemm_fusion_dot_5", "gemm_fusion_dot.5", "", "GEMM"),
      ("residual_attention_forward", "custom-call.40", "", "attention kernel"),
      ("residual_attention_dkv", "custom-call.41", "", "attention kernel"),
      ("loop_xor_fusion_3", "loop_xor_fusion.3",
       "jit(train_step)/jvp(dropout)/random_bits/threefry2x32",
       "random bits"),
      ("input_reduce_fusion_12", "input_reduce_fusion.12", "", "reduction"),
      ("wrapped_transpose_7", "wrapped_transpose.7", "", "copy / transpose"),
      ("loop_add_fusion_2", "loop_add_fusion.2", "", "elementwise"),
      ("input_scatter_fusion", "scatter.3", "", "gather / scatter"),
      ("a_kernel_we_never_saw", "", "", "other"),
  )
  def test_names(self, kernel, hlo_op, op_name, expected):
    self.assertEqual(gpu_profile.category(kernel, hlo_op, op_name), expected)


class SummarizeTest(parameterized.TestCase):

  def test_figures_per_step(self):
    # Two steps of 10 ms wall each; one GEMM overlaps a fusion on another
    # stream for 1 ms, so the device was busy 3 + 2 - 1 + 4 = 8 ms in all.
    events = [
        (0, 3e6, "sm90_xmma_gemm_a", "custom-call.1", ""),
        (2e6, 4e6, "loop_add_fusion", "loop_add_fusion", ""),
        (10e6, 14e6, "sm90_xmma_gemm_a", "custom-call.1", ""),
    ]
    s = gpu_profile.summarize(events, steps=2, wall_s=0.02, top=1)
    self.assertEqual(s["wall_ms"], 10.0)
    self.assertEqual(s["device_ms"], 4.0)
    self.assertEqual(s["busy"], 0.4)
    self.assertEqual(s["kernels"], 1.5)
    self.assertEqual(s["categories"]["GEMM"], 3.5)
    self.assertEqual(s["categories"]["elementwise"], 1.0)
    self.assertEqual(sum(s["categories"].values()), 4.5)
    self.assertEqual(set(s["categories"]), set(gpu_profile.CATEGORY_NAMES))
    self.assertEqual(s["top"], [["sm90_xmma_gemm_a", "GEMM", 3.5, 1.0,
                                 "custom-call.1", ""]])

  @parameterized.parameters(([], 1, 1.0), ([(0, 1, "k", "", "")], 0, 1.0),
                            ([(0, 1, "k", "", "")], 1, 0.0))
  def test_refuses(self, events, steps, wall_s):
    with self.assertRaises(ValueError):
      gpu_profile.summarize(events, steps, wall_s)

  def test_idle_gaps_by_length(self):
    # Merged busy stretches [0, 200], [205, 300], [50_300, 60_000],
    # [2_000_000, 2_000_100] ns: idle 5 ns, 50 us and 1.94 ms between them;
    # nothing counted before the first kernel or after the last.
    gaps = gpu_profile.idle_gaps([(2_000_000, 2_000_100), (50, 200),
                                  (0, 100), (205, 300), (50_300, 60_000)])
    self.assertEqual(gaps, {"< 10 us": [1, 5.0], "10 us-100 us": [1, 50e3],
                            "100 us-1 ms": [0, 0.0],
                            ">= 1 ms": [1, 1.94e6]})

  def test_gaps_per_step_in_summary_and_table(self):
    events = [(0, 1e6, "loop_add_fusion", "", ""),
              (1.005e6, 2e6, "loop_add_fusion", "", ""),  # 5 us idle
              (4e6, 5e6, "gemm_fusion_dot_1", "", "")]      # 2 ms idle
    s = gpu_profile.summarize(events, steps=2, wall_s=0.01)
    self.assertEqual(s["gaps"], {"< 10 us": [0.5, 0.003],
                                 "10 us-100 us": [0.0, 0.0],
                                 "100 us-1 ms": [0.0, 0.0],
                                 ">= 1 ms": [0.5, 1.0]})
    out = io.StringIO()
    gpu_profile.print_tables({"r": dict(profile=s)}, out)
    self.assertIn("| r | 0.5 / 0.00 | 0 / 0.00 | 0 / 0.00 | 0.5 / 1.00 |",
                  out.getvalue())

  def test_union_counts_overlap_once(self):
    self.assertEqual(
        gpu_profile._union_ns([(20, 30), (0, 10), (5, 15), (6, 7)]), 25)  # pylint: disable=protected-access


class TraceTest(parameterized.TestCase):

  def test_a_cpu_step_traced_and_read_back(self):
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    step = jax.jit(lambda w, x: w - 0.1 * jax.grad(
        lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w))
    w, x = jnp.ones((64, 64)), jnp.ones((32, 64))
    w = step(w, x)

    def run(n):
      nonlocal w
      for _ in range(n):
        w = step(w, x)
      w.block_until_ready()

    s = gpu_profile.profile_jax(run, 3)
    self.assertEqual(s["source"], "cpu")
    self.assertEqual(s["steps"], 3)
    self.assertGreater(s["device_ms"], 0)
    self.assertGreater(s["kernels"], 0)
    # The categories share out all kernel time; the top kernels are part.
    # Each figure is rounded to 0.001 ms, so the two sums may differ by up
    # to half of that per term (a flat 1e-3 failed once: 33.398 > 33.397).
    rounding = 5e-4 * (len(s["top"]) + len(s["categories"]))
    self.assertLessEqual(sum(t[2] for t in s["top"]),
                         sum(s["categories"].values()) + rounding)
    out = io.StringIO()
    gpu_profile.print_tables({"tiny": dict(profile=s),
                              "broken": dict(profile_error="E: x")}, out)
    text = out.getvalue()
    self.assertIn("| tiny | ", text)
    self.assertIn("| broken | error: E: x |", text)
    self.assertIn("tiny: top kernels (cpu)", text)
