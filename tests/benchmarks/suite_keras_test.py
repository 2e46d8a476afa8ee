"""`suite_keras.JitSteps` and `fit` with `steps_per_execution` run what `fit`
runs: the same losses; the timer counts steps, not executions. `JitSteps`
with `steps_per_call=N` runs N steps a dispatch under `lax.scan`: the same
steps (dropout seeds included) as N one-step calls."""

import pytest

from tests.helpers import jax_subprocess

pytest.importorskip("jax")
pytest.importorskip("keras_hub")

_CHILD = """
import json
import jax, numpy as np
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
# Pipelined, the timer lets Keras run batch-end callbacks in its thread
# pool (as in a user's fit); it must not sync the model's state from there
# (that handed fit donated buffers). Three fits of 8 steps in a row.
import keras
out["async_train"] = [keras.callbacks.CallbackList(
    [keras3_fit.make_step_timer(every_step=e)])._async_train
    for e in (False, True)]
out["fit_pipelined"] = [fit(8, every_step=False) for _ in range(3)]
# Waited, the timer waits on the logs and never reads `callback.model`
# (which syncs the state into the variables each step): Keras' own syncs
# per fit, whatever the step count.
syncs = []
sync = fit.model.jax_state_sync
fit.model.jax_state_sync = lambda: (syncs.append(1), sync())[1]
out["syncs_per_fit"] = []
for steps in (2, 6):
  del syncs[:]
  fit(steps)
  out["syncs_per_fit"].append(len(syncs))
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
# lax.scan of 3 steps a call against 6 one-step calls from the same model.
one, scan = (suite_keras.JitSteps(model(), 16, 2, steps_per_call=n)
             for n in (1, 3))
one_losses = []
for _ in range(6):
  one(1)
  one_losses.append(one.last_loss)
out.update(one_losses=one_losses, scan_times=scan(6),
           scan_losses=scan.last_losses, scan_dispatches=scan.dispatches,
           scan_programs=scan.programs())
seeds = lambda steps: [np.asarray(v).tolist() for v, var in zip(
    steps._state[1], steps.model.non_trainable_variables)
    if "seed_generator" in var.path]
out.update(one_seeds=seeds(one), scan_seeds=seeds(scan),
           max_param_diff=max(float(np.max(np.abs(
               np.asarray(a, np.float32) - np.asarray(b, np.float32))))
               for a, b in zip(jax.tree.leaves(one._state[0]),
                               jax.tree.leaves(scan._state[0]))))
out["scan_pipelined"] = scan(6, every_step=False)
for steps, every_step in ((4, True), (3, False)):
  try:
    scan(steps, every_step=every_step)
  except ValueError as e:
    out.setdefault("scan_refusals", []).append(str(e))
print(json.dumps(out))
"""


@pytest.fixture(scope="module", name="out")
def _out():
  return jax_subprocess.snippet_json(_CHILD)


def test_pipelined_fit_runs_callbacks_async_and_keeps_running(out):
  assert out["async_train"] == [True, False], out
  assert len(out["fit_pipelined"]) == 3, out
  assert min(out["fit_pipelined"]) > 0, out


def test_waited_fit_does_not_sync_the_state_each_step(out):
  two_steps, six_steps = out["syncs_per_fit"]
  assert two_steps == six_steps and two_steps >= 1, out


def test_jit_steps_match_fit_steps(out):
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


def test_scan_runs_the_one_step_calls_steps(out):
  # Two calls of 3 steps: one time per call (seconds per step), 2 dispatches
  # of one compiled program.
  assert len(out["scan_times"]) == 2 and min(out["scan_times"]) > 0, out
  assert (out["scan_dispatches"], out["scan_programs"]) == (2, 1), out
  assert out["scan_pipelined"] > 0, out
  # The second call's 3 steps are steps 4-6 of the one-step calls: the loss
  # log (Keras' running mean since step 1) of each step, the same state.
  assert out["scan_losses"] == pytest.approx(out["one_losses"][3:],
                                             rel=1e-6), out
  assert len(set(out["one_losses"])) == 6, out  # the steps differ
  # The dropout seed generators' states ride in the state tuple: the scan
  # advanced them as the 6 one-step calls did; the weights agree too.
  assert out["scan_seeds"] == out["one_seeds"] and out["one_seeds"], out
  assert out["max_param_diff"] < 1e-6, out
  not_multiple, one_call = out["scan_refusals"]
  assert "steps=4: not a multiple" in not_multiple, out
  assert "steps=3: pipelined timing needs >= 6" in one_call, out
