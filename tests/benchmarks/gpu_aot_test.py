"""`benchmarks/gpu_aot.py`: what an optimized GPU module launches, counted.

The compile itself needs XLA's CUDA plugin (not installed here); the
counting runs on a handmade optimized module with known answers: a cuBLAS
GEMM, a Triton GEMM fusion, a loop fusion, a reduction, a transpose, a
command buffer (`call`) holding kernels, and the instructions that launch
nothing.
"""

import os
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import gpu_aot  # pylint: disable=g-import-not-at-top,wrong-import-position

_MODULE = """HloModule jit_step, is_scheduled=true

%fused_add (p0: f32[256], p1: f32[256]) -> f32[256] {
  %p0 = f32[256]{0} parameter(0)
  %p1 = f32[256]{0} parameter(1)
  ROOT %add.1 = f32[256]{0} add(%p0, %p1)
}

%command_buffer (a: f32[256], b: f32[256]) -> f32[256] {
  %a = f32[256]{0} parameter(0)
  %b = f32[256]{0} parameter(1)
  ROOT %loop_add_fusion = f32[256]{0} fusion(%a, %b), kind=kLoop, calls=%fused_add
}

ENTRY %main (x: bf16[64,128], w: bf16[128,32], v: f32[256]) -> (bf16[64,32], f32[256]) {
  %x = bf16[64,128]{1,0} parameter(0)
  %w = bf16[128,32]{1,0} parameter(1)
  %v = f32[256]{0} parameter(2)
  %c = f32[] constant(0)
  %gemm = (bf16[64,32]{1,0}, s8[1024]{0}) custom-call(%x, %w), custom_call_target="__cublas$lt$matmul", metadata={op_name="jit(step)/dot_general"}
  %out = bf16[64,32]{1,0} get-tuple-element(%gemm), index=0
  %gemm_fusion_dot.2 = bf16[64,32]{1,0} fusion(%x, %w), kind=kCustom, calls=%fused_add, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %input_reduce_fusion = f32[] fusion(%v, %c), kind=kInput, calls=%fused_add
  %wrapped_transpose = bf16[32,64]{1,0} fusion(%out), kind=kInput, calls=%fused_add
  %call.1 = f32[256]{0} call(%v, %v), to_apply=%command_buffer
  %bits = bf16[32,64]{1,0} bitcast(%wrapped_transpose)
  ROOT %t = (bf16[64,32]{1,0}, f32[256]{0}) tuple(%out, %call.1)
}
"""


def test_kernels_and_their_bytes():
  found = {name: (opcode, label, nbytes)
           for name, opcode, label, nbytes in gpu_aot.kernels(_MODULE)}
  x, w, out = 64 * 128 * 2, 128 * 32 * 2, 64 * 32 * 2
  assert found == {
      # Result tuple (output + workspace) and both operands.
      "gemm": ("custom-call", "__cublas$lt$matmul", out + 1024 + x + w),
      "gemm_fusion_dot.2": ("fusion", "__triton_gemm", out + x + w),
      "input_reduce_fusion": ("fusion", "kInput", 4 + 256 * 4 + 4),
      "wrapped_transpose": ("fusion", "kInput", 2 * out),
      # Inside the command buffer: its parameters are the operands.
      "loop_add_fusion": ("fusion", "kLoop", 3 * 256 * 4),
  }


def test_summary_by_category():
  s = gpu_aot.summarize(_MODULE)
  assert s["kernels"] == 5
  cats = s["categories"]
  assert list(cats) == list(gpu_aot.CATEGORIES)
  assert cats["GEMM"][0] == 2  # cuBLAS and Triton: not the metadata's dot
  assert cats["reduction"][0] == 1
  assert cats["copy/transpose"][0] == 1
  assert cats["loop fusion"] == [1, 3 * 256 * 4]
  assert s["bytes"] == sum(b for _, b in cats.values())


def test_shape_bytes_and_errors():
  assert gpu_aot.shape_bytes("(f32[2,3]{1,0}, bf16[4]{0}, pred[])") == 33
  with pytest.raises(ValueError, match="no ENTRY"):
    gpu_aot.kernels("HloModule m\n")


def test_known_trip_counts_of_a_scans_loop():
  # The loop line of `--steps_per_call=8`'s H200 compile (operands cut).
  loop = ('%while.1 = (s32[], f32[768]{0}) while(%tuple.5), '
          'condition=%region_cond, body=%region_body, backend_config='
          '{"known_trip_count":{"n":"8"},"known_init_step":{"init":"0",'
          '"step":"1"},"known_induction_variable":{"tuple_index":"0"},'
          '"dynamic_variables":[]}')
  assert gpu_aot.known_trip_counts(loop) == [8]
  assert gpu_aot.known_trip_counts(_MODULE) == []
