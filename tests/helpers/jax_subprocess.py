"""Benchmark code run on JAX (CPU) in a fresh Python, from the repo root.

Keras reads `KERAS_BACKEND` once, at import, and the test suite runs on
TensorFlow, so the benchmarks' JAX paths run in a subprocess: `run` for a
command line, `snippet_json` for a Python snippet that prints JSON last.
"""

import json
import os
import subprocess
import sys
from typing import Sequence

from tests.helpers import watchdog

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def run(args: Sequence[str]) -> subprocess.CompletedProcess:
  """`args` under `watchdog.run` from the repo root, Keras on JAX/CPU."""
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
  return watchdog.run(list(args), cwd=REPO_ROOT, env=env)


def snippet_json(code: str):
  """Runs `code` (with benchmarks/ first on `sys.path`) and returns its
  last stdout line, parsed as JSON; fails with its stderr's tail if it
  exits non-zero."""
  result = run([sys.executable, "-c",
                "import sys; sys.path.insert(0, 'benchmarks')\n" + code])
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])
