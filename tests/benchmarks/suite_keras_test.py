"""`suite_keras.JitSteps` runs what `fit` runs: the same losses.

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
import keras3_fit, suite_keras

def model():
  return keras3_fit.build_mlm_model("bert", layers=1, hidden=16, heads=2,
                                     inner=32, seq=16)

fit = keras3_fit.FitSteps(model(), 16, 2)
jit = suite_keras.JitSteps(model(), 16, 2)
out = dict(jit_times=jit(3))
fit(3)
out.update(fit_loss=fit.last_loss, jit_loss=jit.last_loss,
           pipelined=jit(4, every_step=False))
try:
  jit(2, every_step=False)
except ValueError as e:
  out["refusal"] = str(e)
print(json.dumps(out))
"""


def test_jit_steps_match_fit_steps():
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
  result = watchdog.run([sys.executable, "-c", _CHILD], cwd=_ROOT, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert len(out["jit_times"]) == 3 and min(out["jit_times"]) > 0, out
  # Three steps of one program from one state (dropout's seed included).
  assert out["jit_loss"] == pytest.approx(out["fit_loss"], rel=1e-5), out
  assert out["pipelined"] > 0, out
  assert "steps=2" in out["refusal"], out
