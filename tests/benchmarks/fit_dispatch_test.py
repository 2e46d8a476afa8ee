"""`benchmarks/fit_dispatch.py`: what `fit` runs per step with
`steps_per_execution`, counted on this CPU.

On JAX, in a subprocess: Keras reads `KERAS_BACKEND` once, at import, and
the suite runs on TensorFlow.
"""

import json
import os
import sys

import pytest

from tests.helpers import watchdog

pytest.importorskip("jax")
pytest.importorskip("keras_hub")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

_CHILD = """
import json, sys
sys.path.insert(0, "benchmarks")
import fit_dispatch
rows = fit_dispatch.analyze("bert", {}, [1, 4], steps=8, layers=1, hidden=16,
                            heads=2, inner=32, seq=16, batch=2, rounds=1)
try:
  fit_dispatch.analyze("bert", {}, [3], steps=8, layers=1, hidden=16,
                       heads=2, inner=32, seq=16, batch=2, rounds=1)
except ValueError as e:
  rows.append(str(e))
print(json.dumps(rows))
"""


def test_steps_per_execution_changes_callbacks_not_the_program():
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
  result = watchdog.run([sys.executable, "-c", _CHILD], cwd=_ROOT, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  one, four, jit, refusal = json.loads(result.stdout.strip().splitlines()[-1])
  # Keras 3.15's JAX trainer: one compiled step, dispatched once per step
  # whatever N; the callbacks (and its loop's bookkeeping) once per N.
  assert (one["programs"], one["dispatches"], one["callbacks"]) == (1, 8, 8)
  assert (four["programs"], four["dispatches"], four["callbacks"]) == (
      1, 8, 2)
  assert one["module"] == four["module"] and len(one["module"]) == 12
  assert (jit["dispatches"], jit["callbacks"]) == (8, 0), jit
  for row in (one, four, jit):
    assert row["pipelined_ms"] > 0, row
  assert "--steps=8 is not a multiple of --steps_per_execution=3" in refusal
