"""The quickstart's CPU numerics, pinned so command 1 prints the same numbers
on every x86-64 CPU.

The quickstart's held-out MLM accuracy depends on when the tiny model leaves
its early plateau, so the last bit of a float32 sum moves it by points: the
same seeded run printed 0.2567, 0.2959 and 0.3142 on three CPUs (issue 39).
What made the bits differ, each measured on one machine (Xeon, AVX-512,
2 cores) by hashing the weights after 300 steps:

- oneDNN picks its kernels for the CPU it finds at run time (AVX-512, AVX2,
  ...). TensorFlow calls it for its oneDNN graph rewrites
  (`TF_ENABLE_ONEDNN_OPTS`, on by default on x86 Linux) and, even with those
  off, for every float32 matrix product: Eigen's contraction kernel is
  oneDNN's sgemm (tensorflow/core/kernels/eigen_contraction_kernel.h).
  Capping it (`ONEDNN_MAX_CPU_ISA=AVX2`) changed the weights in both cases.
- Eigen splits sums over its thread pool, whose size is the number of cores
  (1, 2 and 4 intra-op threads gave three different sets of weights).

So a quickstart run (train.py's `--experiment=realformer/quickstart`) sets,
before TensorFlow loads: the oneDNN graph rewrites off; oneDNN's kernels
capped at AVX, which every CPU TensorFlow's wheels run on has (their
baseline); 2 intra-op and 2 inter-op threads, whatever the core count. With
these, 1 core (`taskset -c 0`) and 2 cores gave the same weights, as did the
ISA caps AVX2 and AVX-512 above it. A variable already set in the
environment is left as it is (the closing summary then says the README's
numbers may not hold). One dependence is left that could not be varied
here: Eigen sizes its blocks of a matrix product's inner dimension from the
L1 data cache it reads from the CPU, which can split the weight gradients'
2,048-term sums differently on CPUs with another L1 size.

This module imports no TensorFlow: train.py calls `pin` first.
"""

import os
from typing import Dict, List, MutableMapping, Optional, Sequence

QUICKSTART = "realformer/quickstart"  # configs/experiments.py's name

# Each variable, its pinned value, and what it means (for the summary).
PINNED = {
    "TF_ENABLE_ONEDNN_OPTS": ("0", "oneDNN graph rewrites off"),
    "ONEDNN_MAX_CPU_ISA": ("AVX", "oneDNN kernels capped at AVX"),
    "TF_NUM_INTRAOP_THREADS": ("2", "2 intra-op threads"),
    "TF_NUM_INTEROP_THREADS": ("2", "2 inter-op threads"),
}


def experiment_of(argv: Sequence[str]) -> Optional[str]:
  """The value of `--experiment` in `argv` (`--experiment=X` or
  `--experiment X`; the last one wins, as absl's flags), or None."""
  experiment = None
  for i, arg in enumerate(argv):
    if arg.startswith("--experiment="):
      experiment = arg.split("=", 1)[1]
    elif arg == "--experiment" and i + 1 < len(argv):
      experiment = argv[i + 1]
  return experiment


def pin(argv: Sequence[str],
        environ: MutableMapping[str, str] = os.environ) -> Dict[str, str]:
  """For a quickstart command line, sets each `PINNED` variable that
  `environ` lacks; returns those it set (nothing for other experiments).
  Must run before TensorFlow is imported."""
  if experiment_of(argv) != QUICKSTART:
    return {}
  set_now = {}
  for name, (value, _) in PINNED.items():
    if name not in environ:
      environ[name] = value
      set_now[name] = value
  return set_now


def summary_line(environ: MutableMapping[str, str] = os.environ) -> str:
  """The closing summary's line on the numerics in effect: the pinned ones,
  or which variables differ and that the README's numbers may not hold."""
  differ: List[str] = [
      f"{name}={environ.get(name, '(unset)')} (pinned: {value})"
      for name, (value, _) in PINNED.items() if environ.get(name) != value]
  if not differ:
    return ("CPU numerics pinned (training/cpu_numerics.py): " +
            ", ".join(what for _, what in PINNED.values()) +
            ": the README's numbers on every x86-64 CPU.")
  return ("CPU numerics not as pinned: " + ", ".join(differ) +
          ": the numbers can differ from the README's in the last digits "
          "or by a few points (training/cpu_numerics.py).")
