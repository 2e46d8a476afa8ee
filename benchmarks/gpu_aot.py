r"""The GPU program XLA builds for a step, without a GPU: kernels and bytes.

XLA's CUDA plugin can compile for a GPU it is only told about (a "compile
only" topology from a target description, no device: PJRT's deviceless
compilation, `jax.experimental.topologies.get_topology_desc`). This compiles,
on this CPU machine, the training steps `gpu_suite.py` times on a GPU, for an
H100/H200 (compute capability 9.0, 132 SMs) with autotuning off, and counts
what the optimized program launches: kernels by kind and the bytes each
reads and writes (its operands and its result, once each). Both faces come
from the same compiler: the Keras 3 steps (`keras3_fit.build_mlm_model`,
lowered as `fit` jit-compiles them) and the TF-XLA steps of `.gpu_hlo`.

What it can and cannot say: the kernels and their traffic are the GPU
compiler's own (fusion, layouts, which GEMMs go to cuBLAS or Triton); the
times are bytes over the target's bandwidth, a floor for memory-bound
kernels. GEMM tiles re-read from L2, autotuned GEMM choices and the host
are not seen: a step's measured time on a GPU (`gpu_suite.py`, `--profile`)
decides.

Needs, besides this project's venv (jax 0.10.2): the CUDA plugin of the
same jax version and ptxas, installed beside it (about 570 MB):
  pip install --no-deps --target /tmp/cudaplug jax-cuda12-plugin==0.10.2 \
      jax-cuda12-pjrt==0.10.2 nvidia-cuda-nvcc-cu12
  PYTHONPATH=/tmp/cudaplug JAX_PLATFORMS=cpu KERAS_BACKEND=jax \
      XLA_FLAGS=--xla_gpu_autotune_level=0 python benchmarks/gpu_aot.py \
      --models=bert,sum,pallas --mlir=.gpu_hlo/bert_base_s512_b32_mixed_bfloat16.mlir
"""

import argparse
import collections
import os
import re
import sys
import time
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

import keras3_fit  # pylint: disable=g-import-not-at-top,wrong-import-position  (imports no Keras)

# An H100 SXM as XLA's own GPU tests describe one (their `kGpuSpec`); an
# H200 is the same GH100 die (132 SMs, sm_90) with HBM3e: 4.8 TB/s, 141 GB.
H100 = """gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: %(bandwidth)d
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: %(memory)d
  shared_memory_per_block_optin: 232448
  cuda_compute_capability {
    major: 9
  }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}
platform_name: "CUDA"
dnn_version_info {
  major: 9
  minor: 1
}
device_description_str: "%(name)s"
"""
TARGETS = {
    "h100": dict(bandwidth=3352320000000, memory=84978434048,
                 name="NVIDIA H100 80GB HBM3"),
    "h200": dict(bandwidth=4800000000000, memory=150754820096,
                 name="NVIDIA H200"),
}
# name: (arch, backbone kwargs[, build_mlm_model kwargs]) of
# keras3_fit.build_mlm_model.
MODELS = {
    "bert": ("bert", {}),
    "bert_fixed": ("bert", {}, keras3_fit.FAIR_BASE),
    "pallas_scatter": ("realformer", dict(residual_attention="sum",
                                          attention_implementation="pallas"),
                       dict(embeddings="keras")),
    "none": ("realformer", dict(residual_attention="none",
                                attention_implementation="reference")),
    "sum": ("realformer", dict(residual_attention="sum",
                               attention_implementation="reference")),
    "pallas": ("realformer", dict(residual_attention="sum",
                                  attention_implementation="pallas")),
}

_BYTES = {"f64": 8, "s64": 8, "u64": 8, "f32": 4, "s32": 4, "u32": 4,
          "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "s8": 1, "u8": 1,
          "pred": 1}
_SHAPE = re.compile(r"\b(%s)\[([0-9,]*)\]" % "|".join(_BYTES))
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.+?) ([\w\-]+)\((.*)$")
# Instructions that launch nothing.
_FREE = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast",
         "after-all", "partition-id", "replica-id", "opt-barrier",
         "add-dependency"}
CATEGORIES = ("GEMM", "custom kernel", "loop fusion", "reduction",
              "copy/transpose", "gather/scatter", "random bits", "other")


def shape_bytes(text):
  """Bytes of every array shape in an HLO type (a tuple: their sum)."""
  total = 0
  for dtype, dims in _SHAPE.findall(text):
    n = 1
    for d in filter(None, dims.split(",")):
      n *= int(d)
    total += n * _BYTES[dtype]
  return total


def _computations(hlo_text):
  """({computation: [(name, type, opcode, rest)]}, entry name)."""
  computations, current, entry = {}, None, None
  for line in hlo_text.splitlines():
    if line.startswith(("%", "ENTRY ")):
      head = line.split()
      current = (head[1] if line.startswith("ENTRY ") else head[0]).lstrip("%")
      computations[current] = []
      if line.startswith("ENTRY "):
        entry = current
      continue
    m = _INSTRUCTION.match(line) if current else None
    if m:
      computations[current].append(m.groups())
  if entry is None:
    raise ValueError("no ENTRY computation in the HLO text")
  return computations, entry


def kernels(hlo_text):
  """[(name, opcode, label, bytes)] of what an optimized module launches.

  Walks the entry computation, into `call`s (XLA's command buffers) and
  `while` bodies (once); `label` is the custom-call target or fusion kind;
  bytes are the result's plus every operand's (each read once).
  """
  computations, entry = _computations(hlo_text)
  size = {name: shape_bytes(typ) for body in computations.values()
          for name, typ, _, _ in body}
  out = []

  def walk(computation):
    for name, _, opcode, rest in computations[computation]:
      if opcode in _FREE:
        continue
      called = re.search(r"(?:to_apply|calls|body)=%([\w.\-]+)", rest)
      if opcode in ("call", "while") and called:
        walk(called.group(1))
        continue
      operands = re.findall(r"%([\w.\-]+)", rest.split("), ")[0])
      # The most telling first: a custom call's target, a fusion's backend
      # kind ("__triton_gemm"), then its HLO kind (kLoop, kInput, ...).
      label = next((m.group(1) for m in (
          re.search(pattern, rest) for pattern in (
              r'custom_call_target="([^"]+)"', r'"kind":"([\w$]+)"',
              r"kind=(k\w+)")) if m), "")
      out.append((name, opcode, label,
                  size.get(name, 0) + sum(size.get(o, 0) for o in operands)))

  walk(entry)
  return out


def category(name, opcode, label):
  text = f"{name} {opcode} {label}".lower()
  if any(k in text for k in ("gemm", "cublas", "matmul")):
    return "GEMM"
  if any(k in text for k in ("pallas", "triton_kernel_call", "xla.gpu.triton",
                             "residual_attention", "mosaic")):
    return "custom kernel"
  if any(k in text for k in ("rng", "threefry", "philox")):
    return "random bits"
  if any(k in text for k in ("scatter", "gather")):
    return "gather/scatter"
  if "transpose" in text or opcode == "copy" or "copy" in name:
    return "copy/transpose"
  if "reduce" in text or "kinput" in text:
    return "reduction"
  if opcode == "fusion":
    return "loop fusion"
  return "other"


def summarize(hlo_text):
  """{category: [kernels, bytes]} and the totals, of one optimized module."""
  found = kernels(hlo_text)
  by = collections.OrderedDict((c, [0, 0]) for c in CATEGORIES)
  for name, opcode, label, nbytes in found:
    entry = by[category(name, opcode, label)]
    entry[0] += 1
    entry[1] += nbytes
  return dict(kernels=len(found), bytes=sum(b for *_, b in found),
              categories=by)


def compile_only_device(target):
  """A GPU of `target` (`TARGETS`) to compile for; there is none to run on."""
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
  topology = topologies.get_topology_desc(
      platform="cuda", topology_name="1x1x1", topology="1x1x1",
      target_config=H100 % TARGETS[target])
  return topology.devices[0]


def compile_keras_step(name, device, seq=512, batch=32, steps_per_call=1):
  """The optimized HLO of a Keras 3 model's `train_step`, as `fit` jits it,
  or of `steps_per_call` of them under `lax.scan` in one `jax.jit`, as
  gpu_suite's `_scan` rows run them (`suite_keras.train_steps`)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax_hlo  # pylint: disable=g-import-not-at-top
  import suite_keras  # pylint: disable=g-import-not-at-top
  arch, backbone_kwargs, *build = MODELS[name]
  model = keras3_fit.build_mlm_model(
      arch, layers=12, hidden=768, heads=12, inner=3072, seq=seq,
      backbone_kwargs=backbone_kwargs, **(build[0] if build else {}))
  state, data = jax_hlo.train_step_args(model, seq, batch)
  step, data = suite_keras.train_steps(model, data, steps_per_call)
  sharding = jax.sharding.SingleDeviceSharding(device)
  spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)
  # The Pallas kernel picks Triton or interpret mode by jax's default
  # backend (core/pallas_attention.py), which is this CPU: tell it "gpu"
  # while tracing, so that the step holds the Triton kernel a GPU runs.
  with mock.patch.object(jax, "default_backend", lambda: "gpu"):
    traced = jax.jit(step, donate_argnums=0).trace(
        jax.tree.map(spec, state), jax.tree.map(spec, data))
    return traced.lower(lowering_platforms=("cuda",)).compile().as_text()


def compile_mlir(path, device):
  """The optimized HLO of a `.gpu_hlo` StableHLO step (a TF-XLA step)."""
  from jax._src import compiler  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    text = f.read()
  # The compile-only client takes a parsed module, not text.
  with jax_mlir.make_ir_context():
    executable = device.client.compile(
        ir.Module.parse(text), xla_client.DeviceList((device,)),
        compiler.get_compile_options(num_replicas=1, num_partitions=1))
  return executable.hlo_modules()[0].to_string()


def known_trip_counts(hlo_text):
  """The trip counts XLA proved for the module's `while` loops (a loop says
  so in its backend config: "known_trip_count":{"n":"8"})."""
  return [int(n) for n in re.findall(r'"known_trip_count":\{"n":"(\d+)"\}',
                                     hlo_text)]


def print_table(rows, bandwidth):
  print("| step | kernels | GB read + written | ms at the target's bandwidth | "
        + " | ".join(CATEGORIES) + " |")
  print("|---" * (4 + len(CATEGORIES)) + "|")
  for name, s in rows.items():
    cells = [f"{n} / {b / 1e9:.1f}" for n, b in s["categories"].values()]
    print(f"| {name} | {s['kernels']} | {s['bytes'] / 1e9:.1f} | "
          f"{s['bytes'] / bandwidth * 1e3:.1f} | " + " | ".join(cells) + " |")
  print("(category cells: kernels / GB)")


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--models", default="bert,sum,pallas",
                 help=f"Keras 3 steps: {', '.join(MODELS)}")
  p.add_argument("--mlir", default="", help="Comma-separated .gpu_hlo files.")
  p.add_argument("--target", default="h200", choices=sorted(TARGETS))
  p.add_argument("--dump_dir", default="",
                 help="Write each optimized module there (<step>.hlo).")
  p.add_argument("--steps_per_call", type=int, default=1,
                 help="Keras steps: N train_steps under lax.scan in one "
                 "module (gpu_suite's _scan rows: 8); its kernels are the "
                 "loop body's, once, and stderr says the loop's trip count.")
  args = p.parse_args()
  if "--xla_gpu_autotune_level=0" not in os.environ.get("XLA_FLAGS", ""):
    sys.exit("Set XLA_FLAGS=--xla_gpu_autotune_level=0: autotuning needs a "
             "GPU, and there is none here.")
  device = compile_only_device(args.target)
  n = args.steps_per_call
  steps = [(m if n == 1 else f"{m} x{n} scan",
            lambda m=m: compile_keras_step(m, device, steps_per_call=n))
           for m in filter(None, args.models.split(","))]
  steps += [(os.path.basename(path).split("_")[0] + " (TF-XLA)",
             lambda path=path: compile_mlir(path, device))
            for path in filter(None, args.mlir.split(","))]
  rows = {}
  for name, build in steps:
    start = time.time()
    text = build()
    trips = known_trip_counts(text)
    print(f"{name}: built and compiled in {time.time() - start:.0f} s; "
          f"while loops' known trip counts: {trips}", file=sys.stderr,
          flush=True)
    if args.dump_dir:
      os.makedirs(args.dump_dir, exist_ok=True)
      # "bert" and "bert (TF-XLA)" must not share a file.
      stem = name.replace(" (TF-XLA)", "_tf_xla")
      with open(os.path.join(args.dump_dir, stem + ".hlo"), "w") as f:
        f.write(text)
    rows[name] = summarize(text)
    print(f"{name}: {rows[name]['kernels']} kernels", file=sys.stderr,
          flush=True)
  print_table(rows, TARGETS[args.target]["bandwidth"])


if __name__ == "__main__":
  main()
