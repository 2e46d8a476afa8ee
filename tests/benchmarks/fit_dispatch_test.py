"""`benchmarks/fit_dispatch.py`: what `fit` runs per step with
`steps_per_execution`, Keras' and fused, and N steps under `lax.scan`,
counted on this CPU."""

import pytest

from tests.helpers import jax_subprocess

pytest.importorskip("jax")
pytest.importorskip("keras_hub")

_CHILD = """
import json
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
  one, four, fused, jit, scan, refusal = jax_subprocess.snippet_json(_CHILD)
  # Keras 3.15's JAX trainer: one compiled step, dispatched once per step
  # whatever N; the callbacks (and its loop's bookkeeping) once per N.
  assert (one["programs"], one["dispatches"], one["callbacks"]) == (1, 8, 8)
  assert (four["programs"], four["dispatches"], four["callbacks"]) == (
      1, 8, 2)
  assert one["module"] == four["module"] and len(one["module"]) == 12
  assert (jit["programs"], jit["dispatches"], jit["callbacks"]) == (
      1, 8, 0), jit
  # lax.scan: one program of the 4 steps in a `while` loop, dispatched
  # once per 4 steps.
  assert (scan["programs"], scan["dispatches"], scan["callbacks"]) == (
      1, 2, 0), scan
  assert scan["while_loops"] == jit["while_loops"] + 1, (jit, scan)
  assert scan["module"] != jit["module"], scan
  assert "4 train_steps under lax.scan" in scan["way"], scan
  # Our fused train function: `fit`'s callbacks once per execution, its 4
  # steps one dispatch, one program (no step run alone).
  assert (fused["programs"], fused["dispatches"], fused["callbacks"]) == (
      1, 2, 2), fused
  assert fused["while_loops"] == scan["while_loops"], (fused, scan)
  assert fused["way"] == "fit, steps_per_execution=4, fused", fused
  for row in (one, four, fused, jit, scan):
    assert row["pipelined_ms"] > 0, row
  assert "--steps=8 is not a multiple of --steps_per_execution=3" in refusal
