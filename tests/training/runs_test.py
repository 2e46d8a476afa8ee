"""The run executor: statuses, cached results, progress and summaries."""
import contextlib
import dataclasses
import io
import json
import os
import re
import signal
from typing import ClassVar, Dict

import pytest

from official.core import config_definitions as cfg
from realformer_tf.training import runs
from realformer_tf.training import stop_signals


@dataclasses.dataclass
class _Run(runs.RunSpec):
  RESULT_FILE: ClassVar[str] = "fake_result.json"

  def make_result(self, output: Dict, seconds: float) -> Dict:
    return {"seed": self.seed, "value": output["value"]}


class _Terminal(io.StringIO):

  def isatty(self):
    return True


def _runs(root, steps=(3, 5, 7)):
  specs = []
  for seed, n in enumerate(steps):
    config = cfg.ExperimentConfig()
    config.trainer.train_steps = n
    specs.append(_Run(model_dir=os.path.join(root, f"seed{seed}"),
                      config=config, seed=seed))
  return specs


def test_finished_runs_are_read_back_not_rerun_nor_counted_in_the_rate(
    tmp_path):
  specs = _runs(str(tmp_path))
  assert runs.execute(specs[:1], lambda run: {"value": 0.5}) == [
      {"seed": 0, "value": 0.5}]
  assert [runs.status(r) for r in specs] == ["done", "new", "new"]
  terminal = _Terminal()  # tqdm draws only on a terminal.
  with contextlib.redirect_stderr(terminal):
    bar = runs.progress_bar(specs, [runs.status(r) for r in specs])
    # The 3 steps done before count as done, not as this invocation's speed.
    assert (bar.initial, bar.n, bar.total, bar.smoothing) == (3, 3, 15, 0)
    bar.close()
  assert " 3/15 " in terminal.getvalue(), terminal.getvalue()
  ran, printed = [], io.StringIO()
  with contextlib.redirect_stdout(printed):
    results = runs.execute(specs, lambda run: ran.append(run.seed) or {
        "value": run.seed / 10})
  assert ran == [1, 2]
  assert results == [{"seed": s, "value": v} for s, v in
                     ((0, 0.5), (1, 0.1), (2, 0.2))]
  lines = printed.getvalue().splitlines()
  assert lines[0] == (f"[1/3] {specs[0].model_dir}: done "
                      "(steps=3 seed=0)"), lines
  assert lines[2].startswith(f"[3/3] {specs[2].model_dir}: new "), lines
  assert runs.plan_lines(specs)[2].split() == [
      "done", specs[2].model_dir, "steps=7", "seed=2"]


def test_a_failing_runner_leaves_no_result(tmp_path):
  spec, = _runs(str(tmp_path), steps=(2,))

  def fails(run):
    raise ValueError(f"{run.model_dir}: no metric")

  with pytest.raises(ValueError, match="no metric"):
    runs.execute([spec], fails)
  assert runs.status(spec) == "new"


def test_a_users_result_file_is_refused_before_any_run(tmp_path):
  """A result file is ours by its writer key: a user's at a run's path is
  named, kept, and no run starts; ours is read back as it was written."""
  specs = _runs(str(tmp_path))
  os.makedirs(specs[1].model_dir)
  with open(specs[1].result_path, "w") as f:
    f.write('{"seed": 1, "value": 9}')
  ran = []
  with pytest.raises(FileExistsError, match="^" + re.escape(
      f"{specs[1].result_path} exists and no manifest of realformer_tf "
      "lists it (not written by us), so nothing was written: move it away, "
      "or write elsewhere.")):
    runs.execute(specs, lambda run: ran.append(run.seed) or {"value": 0.5})
  assert ran == [] and not os.path.exists(specs[0].result_path)
  assert open(specs[1].result_path).read() == '{"seed": 1, "value": 9}'
  os.remove(specs[1].result_path)
  runs.execute(specs[:1], lambda run: {"value": 0.5})
  assert json.load(open(specs[0].result_path))["writer"] == runs.__name__
  assert runs.read_result(specs[0].result_path) == {"seed": 0, "value": 0.5}


def test_a_corrupt_result_is_named(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text("{\n  \"task\": ")
  with pytest.raises(ValueError, match=r"bad\.json:2: not valid JSON"):
    runs.read_result(str(bad))


def test_a_stop_signal_stops_the_current_run_and_skips_the_rest(tmp_path):
  """Issue 39 item 10: a `training.sweep` ignored two SIGTERMs for 18
  minutes. The executor holds the stop signals for the whole sweep; the run
  in progress stops (`train_lib`'s own block within is the sweep's), the
  rest are skipped, and it says so."""
  specs = _runs(str(tmp_path))
  handlers = {s: signal.getsignal(s) for s in stop_signals.SIGNALS}
  ran = []

  def runner(run):
    ran.append(run.seed)
    with stop_signals.raised_on_signals():  # As `train_lib.run_experiment`.
      if run.seed == 1:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10 ** 7):  # The handler runs between bytecodes.
          pass
    return {"value": 0.5}

  printed = io.StringIO()
  with contextlib.redirect_stdout(printed), pytest.raises(
      stop_signals.Stopped) as e:
    runs.execute(specs, runner)
  assert e.value.exit_code == 143
  assert ran == [0, 1]
  assert [runs.status(r) for r in specs] == ["done", "new", "new"]
  assert printed.getvalue().splitlines()[-1] == (
      f"sweep stopped by SIGTERM during run 2/3 ({specs[1].model_dir}); 1 "
      "later run not started. Rerun the same command to go on: finished "
      "runs are kept, this one resumes from its latest checkpoint.")
  assert {s: signal.getsignal(s) for s in stop_signals.SIGNALS} == handlers


def test_a_signal_held_back_to_the_end_of_a_run_skips_the_rest(tmp_path):
  """A signal while a run traces a `tf.function` is held back
  (`stop_signals`); if the run then ends, its result is kept and the sweep
  stops there, not one run later."""
  tf = pytest.importorskip("tensorflow")
  specs = _runs(str(tmp_path))
  ran = []

  @tf.function
  def traced(x):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(10 ** 5):  # Bytecodes inside the trace.
      pass
    return x + 1

  def runner(run):
    ran.append(run.seed)
    with stop_signals.raised_on_signals():
      if run.seed == 1:
        traced(tf.constant(1))
    return {"value": 0.5}

  printed = io.StringIO()
  with contextlib.redirect_stdout(printed), pytest.raises(
      stop_signals.Stopped) as e:
    runs.execute(specs, runner)
  assert e.value.name == "SIGTERM"
  assert ran == [0, 1]
  assert [runs.status(r) for r in specs] == ["done", "done", "new"]
  assert printed.getvalue().splitlines()[-1].startswith(
      f"sweep stopped by SIGTERM during run 2/3 ({specs[1].model_dir}); 1 "
      "later run not started."), printed.getvalue()
