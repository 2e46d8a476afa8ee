"""The checks before a run, in one pass, each once, before anything is written.

`checked_run` is what `train_lib.run_experiment` calls, once. In order:

1. config values (`value_checks`: ranges, the encoder config, lengths,
   GPUs; then Model Garden's strategy is built, as official/nlp/train.py
   does, for the batches' split over its replicas);
2. the run's checkpoints (`run_checkpoint`: a directory with any `ckpt-*`
   file is a started run, refused if it cannot be resumed as it is), then
   the quickstart's data, planned without writing (`quickstart_run.plan`:
   a run's own data is never built again from other inputs);
3. data sets and their manifests (`input_checks`);
4. vocabularies (`input_checks`);
5. the init checkpoint, when a training run starts without a checkpoint of
   its own (Model Garden reads it only then): it restores into the encoder,
   and its word embedding has a row per vocabulary token
   (`init_from_run`); `task.init_checkpoint` becomes the prefix checked (a
   run directory's newest readable one), which the task then restores;
6. `model_dir` (a directory; an eval needs a checkpoint and a model_dir it
   can write its summaries in, `check_eval_writes`; a training run
   resumes only the same model), then its lock (`run_lock`): the first
   write.

Only then is anything written. The quickstart's data, when it must be built,
is built under the lock, and steps 3-6's data checks run on it after: they
are the only checks that follow it.
"""

import contextlib
import dataclasses
import os
from typing import Iterator, Optional, Sequence

from absl import logging
import tensorflow as tf

from official.common import distribute_utils
from official.core import config_definitions as cfg
from official.modeling import performance
from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import run_resume
from realformer_tf.core import run_lock
from realformer_tf.training import init_from_run
from realformer_tf.training import input_checks
from realformer_tf.training import lr_schedule
from realformer_tf.training import modes
from realformer_tf.training import quickstart_run
from realformer_tf.training import value_checks


def check_model_dir_path(model_dir: str) -> None:
  """`model_dir` is, or can be made, a directory: not a file, nor under one
  (else TensorFlow's raw FailedPreconditionError at the first write)."""
  if not model_dir:
    raise ValueError("--model_dir is required.")
  utils.check_directory_path(model_dir, "--model_dir",
                             "name a directory for the run's checkpoints "
                             "and summaries")


def run_checkpoint(mode: str, model_dir: str) -> Optional[str]:
  """The checkpoint this run restores (`run_resume.resume_checkpoint`,
  which refuses a started run whose state file is missing or names a
  checkpoint that is not whole), or None for a new run. `continuous_eval`
  only waits for the checkpoints a training job lists: not checked."""
  if mode == "continuous_eval":
    return run_directory.newest_checkpoint(model_dir)
  return run_resume.resume_checkpoint(model_dir)


def check_model_dir(params: cfg.ExperimentConfig, mode: str,
                    model_dir: str, checkpoint: Optional[str]) -> None:
  """Checks `model_dir`'s earlier run against this one, before any write.

  `checkpoint`: the one the run restores (`run_checkpoint`). `--mode=eval`
  needs one (else: metrics of a random model). A train mode resuming
  checkpoints needs the same `task.name` and `task.model` as `params.yaml`
  (else it would overwrite it, then fail restoring, leaving a directory that
  can no longer be exported); the error lists each change.
  """
  has_checkpoint = bool(checkpoint)
  if mode == "eval" and not has_checkpoint:
    raise ValueError(
        f"--mode=eval: no checkpoint in --model_dir={model_dir!r}, so there "
        "is no trained model to evaluate. Train first (--mode=train), or "
        "point --model_dir at a run's directory.")
  if mode not in modes.TRAIN_MODES:
    check_eval_writes(params, mode, model_dir)
  if (mode not in modes.TRAIN_MODES or not has_checkpoint or
      not tf.io.gfile.exists(run_directory.params_path(model_dir))):
    return
  old, new = (
      lr_schedule.dotted_items({"task": {"name": p.task.name,
                                         "model": p.task.model.as_dict()}})
      for p in (run_directory.load_experiment_config(model_dir), params))
  changed = [f"{key}: {old.get(key)!r} in params.yaml, {new.get(key)!r} now"
             for key in sorted(set(old) | set(new))
             if old.get(key) != new.get(key)]
  if changed:
    raise ValueError(
        f"--model_dir={model_dir!r} holds checkpoints of another model "
        f"({run_directory.params_path(model_dir)}): " + "; ".join(changed) +
        ". Use a new --model_dir, or the same model config to resume.")


def check_eval_writes(params: cfg.ExperimentConfig, mode: str,
                      model_dir: str) -> None:
  """An eval mode (no lock, `run_lock`: it writes no checkpoint) can write
  where it writes: its summaries (Model Garden's
  `trainer.validation_summary_subdir` of `model_dir`, official/core/
  train_lib.py `OrbitExperimentRunner.controller`) and train.py's
  `operative_config.<mode>.gin` in `model_dir`. On a read-only run (a
  shared mount, a read-only file system) the evaluation ran, then
  TensorFlow's raw PermissionDeniedError from `CreateSummaryFileWriter`
  ended it. Local paths only: object stores have no `os.access`.
  """
  summaries = os.path.join(model_dir,
                           params.trainer.validation_summary_subdir)
  for target in dict.fromkeys((model_dir, summaries)):
    path = None if "://" in target else utils.existing_ancestor(target)
    if path is None or os.access(path, os.W_OK):
      continue
    way_out = ("evaluate a copy of the run in a writable folder" if
               target == model_dir else
               "send them elsewhere with --params_override=trainer."
               "validation_summary_subdir=/a/writable/folder")
    raise ValueError(
        f"--mode={mode} writes its summaries to {summaries} and "
        f"operative_config.{mode}.gin to --model_dir={model_dir!r}, but "
        f"{path} is not writable (a read-only file system or permissions): "
        f"nothing was run. To evaluate it, {way_out}.")


def make_strategy(params: cfg.ExperimentConfig) -> tf.distribute.Strategy:
  """Model Garden's strategy for `params.runtime`, with its precision policy
  set first, as official/nlp/train.py ('mixed_float16'/'mixed_bfloat16'; the
  loss scale applies with float16 only)."""
  if params.runtime.mixed_precision_dtype:
    performance.set_mixed_precision_policy(params.runtime.mixed_precision_dtype)
  return distribute_utils.get_distribution_strategy(
      distribution_strategy=params.runtime.distribution_strategy,
      all_reduce_alg=params.runtime.all_reduce_alg,
      num_gpus=params.runtime.num_gpus,
      tpu_address=params.runtime.tpu,
      **params.runtime.model_parallelism())


@dataclasses.dataclass
class Checked:
  """A checked run: its locked `params`, `strategy`, and whether this worker
  is the chief (Model Garden's `should_checkpoint`: it writes `model_dir`)."""
  params: cfg.ExperimentConfig
  strategy: tf.distribute.Strategy
  chief: bool


def _check_data(params: cfg.ExperimentConfig, mode: str) -> None:
  """Steps 3 and 4: the files `params` names."""
  input_checks.check_data_sets(params, mode)
  input_checks.check_records_manifest(params, mode)
  input_checks.check_vocabularies(params, mode)


@contextlib.contextmanager
def checked_run(params: cfg.ExperimentConfig, mode: str, model_dir: str,
                quickstart_input_files: Optional[Sequence[str]] = None
               ) -> Iterator[Checked]:
  """Runs every check (module docstring), then holds `model_dir`'s lock for
  the block. Raises ValueError (or `run_lock.ModelDirBusyError`,
  `errors.CheckpointMismatchError`) naming the key, value or file, before
  anything is written.

  A training run's chief holds `model_dir` (`run_lock.hold`) from its first
  write to its end. Eval modes take no lock: they write only `validation/`
  event files, beside a training run by design (as official/nlp/train.py).
  """
  if mode not in modes.MODES:
    raise ValueError(f"--mode={mode!r} is not supported by train.py; use one "
                     f"of {', '.join(modes.MODES)}.")
  check_model_dir_path(model_dir)
  value_checks.validate_config(params, mode)
  strategy = make_strategy(params)
  value_checks.validate_batch_sizes(params, mode,
                                    strategy.num_replicas_in_sync)
  checkpoint = run_checkpoint(mode, model_dir)
  has_checkpoint = bool(checkpoint)
  data_plan = quickstart_run.plan(params, model_dir, checkpoint,
                                  quickstart_input_files)
  builds = data_plan is not None and not data_plan.cached
  fine_tunes = mode in modes.TRAIN_MODES and not has_checkpoint
  if not builds:
    _check_data(params, mode)
  if fine_tunes and getattr(params.task, "init_checkpoint", ""):
    # The prefix checked, not its directory: the task restores what was
    # checked (Model Garden's `initialize` takes a directory's newest, even
    # a damaged one), and params.yaml records which checkpoint it was.
    params.task.init_checkpoint = init_from_run.check_init_checkpoint(params)
    if not builds:
      init_from_run.check_vocab_fits(params, mode)
  if not (builds and has_checkpoint):
    # A run's damaged data, rebuilt from the same inputs (`quickstart_run`),
    # has its vocabulary's size only once built: compared then.
    check_model_dir(params, mode, model_dir, checkpoint)
  chief = strategy.extended.should_checkpoint
  with run_lock.hold(model_dir, enabled=chief and mode in modes.TRAIN_MODES):
    if builds:
      quickstart_run.build(params, data_plan)
      _check_data(params, mode)
      if fine_tunes:
        init_from_run.check_vocab_fits(params, mode)
      check_model_dir(params, mode, model_dir, checkpoint)
    params.validate()
    params.lock()
    logging.info("Checks passed for --mode=%s --model_dir=%s.", mode,
                 model_dir)
    yield Checked(params=params, strategy=strategy, chief=chief)


def prepare_and_validate(params: cfg.ExperimentConfig, mode: str,
                         model_dir: str,
                         quickstart_input_files=None) -> cfg.ExperimentConfig:
  """`checked_run`'s checks (and data building) alone; returns the locked
  `params`. For tests and tools that check a config without running it."""
  with checked_run(params, mode, model_dir, quickstart_input_files) as run:
    return run.params
