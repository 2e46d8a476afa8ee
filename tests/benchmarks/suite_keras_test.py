"""`suite_keras.JitSteps` and `fit` with `steps_per_execution` run what `fit`
runs: the same losses; the timer counts steps, not executions.

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

def model(**kwargs):
  return keras3_fit.build_mlm_model("bert", layers=1, hidden=16, heads=2,
                                    inner=32, seq=16, **kwargs)

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
# steps_per_execution=3: the same three steps in one execution.
spe = keras3_fit.FitSteps(model(steps_per_execution=3), 16, 2)
out.update(spe_times=spe(3), spe_loss=spe.last_loss,
           spe_times_6=spe(6), spe_pipelined=spe(6, every_step=False))
for steps, every_step in ((4, True), (3, False)):
  try:
    spe(steps, every_step=every_step)
  except ValueError as e:
    out.setdefault("spe_refusals", []).append(str(e))
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
  # steps_per_execution=3: one entry per execution (its seconds per step),
  # the same program and batches as one step an execution, so the same loss.
  assert len(out["spe_times"]) == 1 and len(out["spe_times_6"]) == 2, out
  assert min(out["spe_times"] + out["spe_times_6"]) > 0, out
  assert out["spe_loss"] == pytest.approx(out["fit_loss"], rel=1e-5), out
  assert out["spe_pipelined"] > 0, out
  # A partial execution, or a pipelined time of one execution: refused.
  not_multiple, one_execution = out["spe_refusals"]
  assert "steps=4: not a multiple" in not_multiple, out
  assert "steps=3: pipelined timing needs >= 6" in one_execution, out
