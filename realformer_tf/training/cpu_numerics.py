"""The quickstart's CPU numerics, pinned so command 1 prints the same numbers
on every x86-64 CPU of the same L1 data cache (oneDNN rewrites off, ISA
capped, 2 threads; Eigen's blocks follow the L1: docs/training.md).

No TensorFlow import: train.py calls `pin` first.
"""

import os
from typing import Dict, List, MutableMapping, Optional, Sequence

QUICKSTART = "realformer/quickstart"  # configs/experiments.py's name

# Each variable, its pinned value, and what it means (for the summary):
# oneDNN's CPU-dependent kernels and Eigen's threaded sums moved the weights.
PINNED = {
    "TF_ENABLE_ONEDNN_OPTS": ("0", "oneDNN graph rewrites off"),
    "ONEDNN_MAX_CPU_ISA": ("AVX", "oneDNN kernels capped at AVX"),
    "TF_NUM_INTRAOP_THREADS": ("2", "2 intra-op threads"),
    "TF_NUM_INTEROP_THREADS": ("2", "2 inter-op threads"),
}


def experiment_of(argv: Sequence[str]) -> Optional[str]:
  """The (last) value of `--experiment` in `argv`, or None."""
  experiment = None
  for i, arg in enumerate(argv):
    if arg.startswith("--experiment="):
      experiment = arg.split("=", 1)[1]
    elif arg == "--experiment" and i + 1 < len(argv):
      experiment = argv[i + 1]
  return experiment


def pin(argv: Sequence[str],
        environ: MutableMapping[str, str] = os.environ) -> Dict[str, str]:
  """For a quickstart command line, sets each `PINNED` variable `environ`
  lacks (before TensorFlow is imported); returns those it set."""
  if experiment_of(argv) != QUICKSTART:
    return {}
  set_now = {}
  for name, (value, _) in PINNED.items():
    if name not in environ:
      environ[name] = value
      set_now[name] = value
  return set_now


def summary_line(environ: MutableMapping[str, str] = os.environ) -> str:
  """The closing summary's line on the numerics in effect."""
  differ: List[str] = [
      f"{name}={environ.get(name, '(unset)')} (pinned: {value})"
      for name, (value, _) in PINNED.items() if environ.get(name) != value]
  if not differ:
    return ("CPU numerics pinned (training/cpu_numerics.py): " +
            ", ".join(what for _, what in PINNED.values()) +
            ": the README's numbers for this L1 data cache size.")
  return ("CPU numerics not as pinned: " + ", ".join(differ) +
          ": the numbers can differ from the README's in the last digits "
          "or by a few points (training/cpu_numerics.py).")
