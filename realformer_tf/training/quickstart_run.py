"""The quickstart's own data for a run: checked read-only, built under lock.

`realformer/quickstart` leaves its input paths empty: train.py builds a
corpus, a vocabulary and records in `model_dir/data`
(`data/quickstart_corpus`) and points the config at them. Once the run has a
checkpoint, that data is the run's own: its vocabulary is the one its
embedding was trained with, and its records what it trains on. So `plan`
(which writes nothing) refuses a command whose corpus or arguments would
build other data there (another `--quickstart_input_files`, another Python's
standard library, another vocabulary size), naming what differs, before
anything is written; `build` runs only under the run's lock.
"""

import dataclasses
import os
from typing import Optional, Sequence

import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.data import quickstart_corpus

_NAME = experiments.QUICKSTART


@dataclasses.dataclass
class Plan:
  """The quickstart data a run needs: `key` (`quickstart_corpus.data_key`),
  built into `data_dir` unless `cached` (then `params` points at it)."""
  data_dir: str
  key: dict
  input_files: Optional[Sequence[str]]
  cached: bool


def quickstart_data_dir(model_dir: str) -> str:
  """Where the quickstart builds its own data for the run in `model_dir`
  (training's only addition to a run directory's layout)."""
  return os.path.join(model_dir, experiments.QUICKSTART_DATA_SUBDIR)


def _describe_key(key: Optional[dict]) -> str:
  if not key:
    return "unknown inputs"
  if key.get("inputs"):
    return "files " + ", ".join(
        f"{f['path']} (sha256 {f['sha256'][:12]})" for f in key["inputs"])
  return f"the Python {key.get('python')} standard library's docstrings"


def _check_run_owns(data_dir: str, key: dict, model_dir: str,
                    checkpoint: str) -> None:
  """`data_dir` belongs to the run with `checkpoint`: only data built for the
  same `key` may be reused (or rebuilt, if damaged: the same inputs give the
  same data). Raises before anything is written."""
  manifest_path, old = quickstart_corpus.recorded_key(data_dir)
  if old == key:
    return
  if old is None:
    raise ValueError(
        f"--model_dir={model_dir!r} holds a quickstart run (checkpoint "
        f"{checkpoint}) but no readable {manifest_path}: which corpus and "
        "vocabulary it was trained on cannot be told, so its data is not "
        "built again over it. Use a new --model_dir.")
  changed = [f"{field}: {old.get(field)!r} in {manifest_path}, "
             f"{key.get(field)!r} now"
             for field in sorted(set(old) | set(key))
             if old.get(field) != key.get(field) and field != "inputs"]
  if old.get("inputs") != key.get("inputs"):
    changed.insert(0, f"corpus: {_describe_key(old)} in {manifest_path}, "
                   f"{_describe_key(key)} now")
  raise ValueError(
      f"--model_dir={model_dir!r} holds a quickstart run (checkpoint "
      f"{checkpoint}) whose data {data_dir} (its vocabulary and records) was "
      "built from other inputs than this command's: " + "; ".join(changed) +
      ". Its data is kept as it is. Rerun with the run's inputs "
      "(--quickstart_input_files, the same Python, the same config) to "
      "resume, or use a new --model_dir.")


def _check_run_is_quickstart(model_dir: str) -> None:
  """A run in `model_dir` (its params.yaml) is a quickstart run, else the
  error names what it is: its data would be built into that directory and
  its params.yaml overwritten."""
  path = run_directory.params_path(model_dir)
  if not tf.io.gfile.exists(path):
    return
  recorded = run_directory.load_experiment_config(model_dir).task.name
  if recorded != _NAME:
    raise ValueError(
        f"--model_dir={model_dir!r} holds a run of another experiment "
        f"(task.name={recorded!r} in {path}), not a {_NAME} run: nothing "
        f"was written. Run it with its own --experiment, or use a new "
        "--model_dir for the quickstart.")


def plan(params: cfg.ExperimentConfig, model_dir: str,
         checkpoint: Optional[str],
         input_files: Optional[Sequence[str]] = None) -> Optional[Plan]:
  """Checks the quickstart's data options, writing nothing; None when the
  experiment builds no data. When the data in `model_dir/data` can be used
  as it is, `params` points at it (input paths, vocabulary and its size).
  `checkpoint`: the run's own (`preflight.run_checkpoint`), or None for a
  new run.

  Raises:
    ValueError: For options the quickstart cannot build from, or when
      `model_dir` holds a run of another experiment or whose data differs
      (`_check_run_owns`).
  """
  task = params.task
  if task.name != _NAME:
    if input_files:
      raise ValueError(
          f"--quickstart_input_files only applies to --experiment={_NAME}, "
          f"not to task.name={task.name!r}.")
    return None
  paths = {"task.train_data.input_path": task.train_data.input_path,
           "task.validation_data.input_path": task.validation_data.input_path}
  if all(paths.values()) and not input_files:
    return None
  if any(paths.values()):
    raise ValueError(
        f"{_NAME}: set both {' and '.join(paths)} (your own records, without "
        "--quickstart_input_files) or neither (records built in "
        f"model_dir/data); got {paths}.")
  for key in ("seq_length", "max_predictions_per_seq"):
    train_value, eval_value = (getattr(task.train_data, key),
                               getattr(task.validation_data, key))
    if train_value != eval_value:
      raise ValueError(
          f"{_NAME} builds one set of records, but task.train_data.{key}="
          f"{train_value} != task.validation_data.{key}={eval_value}.")
  data_dir = quickstart_data_dir(model_dir)
  files = list(input_files) if input_files else None
  key = quickstart_corpus.data_key(
      data_dir, input_files=files,
      vocab_size=task.model.encoder.get().vocab_size,
      max_seq_length=task.train_data.seq_length,
      max_predictions_per_seq=task.train_data.max_predictions_per_seq,
      dupe_factor=experiments.QUICKSTART_DUPE_FACTOR)
  _check_run_is_quickstart(model_dir)  # Even before its first checkpoint.
  if checkpoint:
    _check_run_owns(data_dir, key, model_dir, checkpoint)
  data = quickstart_corpus.cached_data(data_dir, key)
  if data:
    _point_at(params, data)
  return Plan(data_dir=data_dir, key=key, input_files=files,
              cached=bool(data))


def _point_at(params: cfg.ExperimentConfig, data) -> None:
  """`params` reads `data` (`prepare_quickstart_data`'s result); the
  vocabulary size too: the closing summary's chance line reports it."""
  task = params.task
  task.train_data.input_path = data["train_file"]
  task.validation_data.input_path = data["eval_file"]
  task.vocab_file = data["vocab_file"]
  task.model.encoder.get().vocab_size = int(data["vocab_size"])


def build(params: cfg.ExperimentConfig, data_plan: Plan) -> None:
  """Builds the planned data (the caller holds the run's lock) and points
  `params` at it, as `experiments.realformer_quickstart` describes."""
  key = data_plan.key
  data = quickstart_corpus.prepare_quickstart_data(
      data_plan.data_dir, input_files=data_plan.input_files,
      vocab_size=key["vocab_size"], max_seq_length=key["max_seq_length"],
      max_predictions_per_seq=key["max_predictions_per_seq"],
      dupe_factor=key["dupe_factor"])
  _point_at(params, data)

