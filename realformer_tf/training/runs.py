"""The one run executor of the GLUE sweep and the reproduction.

A run is a `RunSpec` subclass: where it trains, its config and seed, its
result file and how the runner's output becomes that result. `execute`
trains in this process every run without a result file and reads back the
others, so a repeated command carries on where it stopped.
"""

import abc
import dataclasses
import json
import os
import time
from typing import Callable, ClassVar, Dict, List, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras
from tqdm import auto as tqdm

from official.core import config_definitions as cfg
from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.checkpoints import run_directory
from realformer_tf.training import run_plan
from realformer_tf.training import run_summary
from realformer_tf.training import stop_signals
from realformer_tf.training import train_lib


@dataclasses.dataclass
class RunSpec(abc.ABC):
  """One training run; subclasses name the result file and build the result."""
  model_dir: str
  config: cfg.ExperimentConfig
  seed: int
  # The keys the user set (`run_plan.explicit_keys`), as train.py's.
  explicit: run_plan.ExplicitKeys = dataclasses.field(
      default_factory=dict, kw_only=True)

  RESULT_FILE: ClassVar[str] = "result.json"
  MODE: ClassVar[str] = "train_and_post_eval"  # `train_lib` mode.

  @property
  def result_path(self) -> str:
    return os.path.join(self.model_dir, self.RESULT_FILE)

  @property
  def train_steps(self) -> int:
    return self.config.trainer.train_steps

  def details(self) -> str:  # After the directory in a plan's listing.
    return f"steps={self.train_steps} seed={self.seed}"

  @abc.abstractmethod
  def make_result(self, output: Dict, seconds: float) -> Dict:
    """The result file's contents from a runner's output and its time."""


Runner = Callable[[RunSpec], Dict]


def train_and_evaluate(config: cfg.ExperimentConfig, model_dir: str,
                       seed: int, mode: str = "train_and_post_eval",
                       explicit: Optional[run_plan.ExplicitKeys] = None
                      ) -> Dict:
  """Trains (or resumes) one run in this process and evaluates it; returns
  {"eval_logs": the final evaluation's logs, "global_step": int}."""
  tf_keras.backend.clear_session()
  # One place seeds a run: `run_experiment`, from this key.
  config.task.train_data.seed = seed
  eval_logs = {k: np.asarray(v) for k, v in
               train_lib.run_experiment(config, mode, model_dir,
                                                explicit=explicit).items()}
  return {"eval_logs": {k: float(v) if v.size == 1 else v.tolist()
                        for k, v in eval_logs.items()},
          "global_step": run_directory.checkpoint_step(
              run_directory.newest_checkpoint(model_dir))}


def train_run(run: RunSpec) -> Dict:
  """The default runner: `train_and_evaluate` in the run's mode."""
  return train_and_evaluate(run.config, run.model_dir, run.seed, run.MODE,
                            run.explicit)


def status(run: RunSpec) -> str:
  """"done" (its result file, ours: else FileExistsError), "resume" (a
  checkpoint) or "new"."""
  if tf.io.gfile.exists(run.result_path):
    ownership.check_ours((), run.result_path, utils.GFILE_OPS)
    return "done"
  if run_directory.newest_checkpoint(run.model_dir):
    return "resume"
  return "new"


def read_result(path: str) -> Dict:
  with tf.io.gfile.GFile(path, "r") as f:
    try:
      result = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); delete "
                       "it to rerun the run.") from e
  # The keys `writes.publish_json` adds: a result is the same read back.
  return {key: value for key, value in result.items()
          if key not in (ownership.FILES_KEY, ownership.WRITER_KEY)}


def plan_lines(runs: Sequence[RunSpec]) -> List[str]:
  """One line per run: its status, directory and details (the dry runs)."""
  return [f"{status(run):>6s}  {run.model_dir}  {run.details()}"
          for run in runs]


def progress_bar(runs: Sequence[RunSpec], statuses: Sequence[str]
                 ) -> tqdm.tqdm:
  """A bar over the runs' training steps, the finished ones as `initial`
  (`smoothing=0`: the ETA is this invocation's rate)."""
  done = sum(r.train_steps for r, s in zip(runs, statuses) if s == "done")
  return tqdm.tqdm(total=sum(r.train_steps for r in runs), initial=done,
                   unit="step", smoothing=0, disable=None, desc="training")


def stopped_line(stop: stop_signals.Stopped, runs: Sequence[RunSpec],
                 index: int) -> str:
  """What a sweep stopped by a signal during `runs[index]` says last."""
  left = len(runs) - index - 1
  return (f"sweep stopped by {stop.name} during run {index + 1}/{len(runs)} "
          f"({runs[index].model_dir}); {left} later run"
          f"{'' if left == 1 else 's'} not started. Rerun the same command "
          "to go on: finished runs are kept, this one resumes from its "
          "latest checkpoint.")


def execute(runs: Sequence[RunSpec], runner: Runner = train_run
            ) -> List[Dict]:
  """Runs every run without a result; returns all results in `runs` order.

  A stop signal stops the current run as train.py does, skips the rest and
  raises `Stopped`.
  """
  statuses = [status(run) for run in runs]
  results = []
  with stop_signals.raised_on_signals(), progress_bar(runs, statuses) as bar:
    for i, (run, state) in enumerate(zip(runs, statuses)):
      line = f"[{i + 1}/{len(runs)}] {run.model_dir}: {state} ({run.details()})"
      logging.info(line)
      bar.write(line)
      if state == "done":
        results.append(read_result(run.result_path))
        continue
      start = time.time()
      try:
        result = run.make_result(runner(run), time.time() - start)
        writes.publish_json(run.result_path, result, __name__,
                            utils.GFILE_OPS)
        # A signal the run held back to its end (`stop_signals`).
        stop_signals.raise_if_stopped()
      except stop_signals.Stopped as stop:
        run_summary.console(stopped_line(stop, runs, i))
        raise
      results.append(result)
      bar.update(run.train_steps)
  return results

