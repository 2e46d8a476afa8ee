r"""XLA's cost analysis of the steps `encoder_step.py --dump_hlo` wrote.

Compiles each `*.hlo.pb` with jaxlib's XLA for the local device and prints
XLA's flop and byte counts and temp (activation + workspace) memory: the
proxy for the GPU rows when no GPU is available (compiled for the CPU, the
numbers are the CPU compiler's, not the GPU's fusion decisions). Needs jax
(e.g. the venv of ../shared/tools/xla_gpu_step/to_stablehlo.py):

  /tmp/jaxv/bin/python benchmarks/xla_cost.py HLO_DIR
"""
import glob
import json
import os
import sys

from jax._src import compiler
from jax._src import xla_bridge
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib import xla_client
from jax._src.lib.mlir import ir


def main():
  backend = xla_bridge.get_backend()
  device = backend.devices()[0]
  options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
  for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.hlo.pb"))):
    with open(path, "rb") as f:
      stablehlo = xla_client._xla.mlir.hlo_to_stablehlo(f.read())  # pylint: disable=protected-access
    with jax_mlir.make_ir_context():
      text = ir.Module.parse(stablehlo).operation.get_asm(binary=False)
    exe = backend.compile_and_load(text, xla_client.DeviceList((device,)),
                                   options)
    cost = exe.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    print(json.dumps(dict(
        module=os.path.basename(path), device=device.device_kind,
        gflops=round(float(cost.get("flops", 0)) / 1e9, 2),
        gbytes_accessed=round(float(cost.get("bytes accessed", 0)) / 1e9, 3),
        temp_mb=round(exe.get_compiled_memory_stats().temp_size_in_bytes
                      / 2**20, 1))), flush=True)


if __name__ == "__main__":
  main()
