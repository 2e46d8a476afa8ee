"""What train.py runs: Model Garden's parse -> check -> `train_lib.run_experiment`.

Added to `official/nlp/train.py`'s flow: parse errors naming the bad key, the
run's plan derived and checked before anything is written, our trainer and
controller, one-line stops on signals, and a closing summary.
"""

import contextlib
import dataclasses
import functools
import os
import pprint
import time
from typing import Any, List, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf
import tf_keras
import yaml

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils
from official.common import distribute_utils
from official.modeling import hyperparams
from official.modeling import performance
from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import registry
from realformer_tf.core import ownership
from realformer_tf.core import run_lock
from realformer_tf.core import writes
from realformer_tf.training import controller as controller_lib
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import record_facts
from realformer_tf.training import multi_worker
from realformer_tf.training import plan_facts
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from realformer_tf.training import run_summary
from realformer_tf.training import stop_signals
from realformer_tf.training import trainer as trainer_lib
from realformer_tf.training import value_checks


def _unknown_key(config, overrides: Mapping[str, Any]) -> Optional[str]:
  """The dotted path of the first key in `overrides` that `config` lacks."""
  for key in run_plan.dotted_items(overrides):
    node, path = config, ""
    for part in key.split("."):
      fields = node.as_dict() if hasattr(node, "as_dict") else {}
      if part not in fields:
        return (f"{path}{part} (not a field of {type(node).__name__}; its "
                f"fields: {', '.join(sorted(fields))})")
      node, path = getattr(node, part), f"{path}{part}."
  return None


class ExperimentParser(train_utils.ExperimentParser):
  """Model Garden's flag parser with errors naming the flag, file and key;
  `sources`: each config file's and the override's nested dict, in order."""

  def __init__(self, flags_obj):
    super().__init__(flags_obj)
    self.sources = []

  def _override(self, params, source: str, value: str):
    """`params.override` with `value` as Model Garden reads it; errors name
    `source`."""
    try:
      # Into an empty non-strict ParamsDict first: the nested dict.
      overrides = hyperparams.override_params_dict(
          hyperparams.ParamsDict(), value, is_strict=False).as_dict()
      params.override(overrides, is_strict=True)
    except tf.errors.NotFoundError:
      raise ValueError(f"{source}: file not found.") from None
    except yaml.YAMLError as e:
      raise ValueError(f"{source}: not valid YAML: {e}") from None
    except KeyError as e:
      where = _unknown_key(params, overrides)
      raise ValueError(f"{source}: unknown config key {where or e}.") from None
    except (TypeError, ValueError, AttributeError, tf.errors.OpError) as e:
      raise ValueError(f"{source}: {e}") from None
    self.sources.append((source, overrides))
    return params

  def base_experiment(self):
    name = self._flags_obj.experiment
    try:
      return exp_factory.get_exp_config(name)
    except (KeyError, LookupError):
      raise ValueError(
          f"Unknown --experiment={name!r}; registered RealFormer "
          f"experiments: {', '.join(sorted(registry.EXPERIMENTS))}.") from None

  def parse_config_file(self, params):
    for path in self._flags_obj.config_file or []:
      self._override(params, f"--config_file={path}", path)
    return params

  def parse_params_override(self, params):
    value = self._flags_obj.params_override
    if value:
      self._override(params, f"--params_override={value}", value)
    return params


def parse_configuration(flags_obj) -> cfg.ExperimentConfig:
  """`train_utils.parse_configuration` with `ExperimentParser`, not locked."""
  return parse_configuration_and_sources(flags_obj)[0]


def parse_configuration_and_sources(flags_obj):
  """(`parse_configuration`, the keys the user set), every value of its
  field's type."""
  parser = ExperimentParser(flags_obj)
  params = parser.parse()
  value_checks.validate_field_types(params)
  return params, run_plan.explicit_keys(parser.sources)


# The errors train.py prints as a message alone (`process_exit.run_and_exit`).
REFUSALS = cli.REFUSALS + (run_lock.ModelDirBusyError,
                           controller_lib.CheckpointSaveError,
                           trainer_lib.NonFiniteLossError)

WRITER = "realformer_tf.training.train_lib"


def clean_stale_temps(model_dir: str) -> List[str]:
  """Removes what a killed train.py left in `model_dir` (call with its lock
  held); returns the paths removed."""
  removed = []
  for path in tf.io.gfile.glob(os.path.join(model_dir, "ckpt-*_temp*")):
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    else:
      tf.io.gfile.remove(path)
    removed.append(path)
    logging.warning("Removed %s, left by an interrupted run.", path)
  for folder in (model_dir, run_plan.quickstart_data_dir(model_dir)):
    removed.extend(writes.sweep(folder, utils.GFILE_OPS))
  return removed


def write_params_yaml(params: cfg.ExperimentConfig, model_dir: str) -> None:
  """Model Garden's `train_utils.serialize_config`, staged (a kill leaves
  the old file) and headed by `run_plan.PARAMS_HEADER`, our proof of writing."""
  ops = utils.GFILE_OPS
  ownership.refuse_foreign(run_plan.foreign_params(model_dir))
  with writes.staged(run_directory.params_path(model_dir), ops) as tmp:
    hyperparams.save_params_dict_to_yaml(params, tmp)
    ops.write(tmp, run_plan.PARAMS_HEADER + ops.read(tmp))
  logging.info("Saved the experiment configuration to %s.",
               run_directory.params_path(model_dir))


_log = run_summary.console


def make_strategy(params: cfg.ExperimentConfig) -> tf.distribute.Strategy:
  """Model Garden's strategy for `params.runtime`, its precision policy set
  first (as official/nlp/train.py)."""
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
  """A checked run's plan, strategy and whether this worker writes
  `model_dir` (the chief)."""
  plan: run_plan.RunPlan
  strategy: tf.distribute.Strategy
  chief: bool


@contextlib.contextmanager
def checked_run(params: cfg.ExperimentConfig, mode: str, model_dir: str,
                quickstart_input_files: Optional[Sequence[str]] = None,
                explicit: Optional[run_plan.ExplicitKeys] = None):
  """Derives and checks the run's plan (one refusal lists every problem,
  before any write), then holds `model_dir`'s lock (train modes) for the
  block, building the quickstart's data under it; yields `Checked`.
  """
  # The strategy first: a multi-worker one must precede TensorFlow's first op.
  try:
    value_checks.validate_runtime(params)
    sound = not value_checks.runtime_errors(params)
  except ValueError:
    sound = False
  strategy = make_strategy(params) if sound else None
  multi_worker.cluster_started()  # The strategy waited for every peer.
  # What a read of the records proves, kept beside the run for a restart.
  scans = os.path.join(model_dir, run_plan.DATA_SCAN_FILE)
  derive = functools.partial(
      run_plan.derive, params, mode, model_dir, explicit=explicit,
      reader=plan_facts.Reader(cache_path=scans),
      quickstart_input_files=quickstart_input_files,
      num_replicas=strategy.num_replicas_in_sync if strategy else 1)
  plan = derive()
  plan_rules.check(plan)
  chief = strategy.extended.should_checkpoint
  with run_lock.hold(model_dir,
                     enabled=chief and mode in run_plan.TRAIN_MODES):
    if plan.builds:
      key = plan.quickstart.key
      quickstart_corpus.prepare_quickstart_data(
          plan.quickstart.data_dir, input_files=plan.quickstart.input_files,
          vocab_size=key["vocab_size"], max_seq_length=key["max_seq_length"],
          max_predictions_per_seq=key["max_predictions_per_seq"],
          dupe_factor=key["dupe_factor"])
      plan = derive()
      plan_rules.check(plan)
    if chief and plan.trains:
      record_facts.keep(scans, [f for split in plan.splits
                                for f in split.files])
    plan.params.validate()
    plan.params.lock()
    logging.info("Checks passed for --mode=%s --model_dir=%s.", mode,
                 model_dir)
    yield Checked(plan=plan, strategy=strategy, chief=chief)


def dry_run(flags_obj) -> run_plan.RunPlan:
  """train.py --dry_run: derives, prints and checks the plan; writes nothing."""
  params, explicit = parse_configuration_and_sources(flags_obj)
  plan = run_plan.derive(
      params, flags_obj.mode, flags_obj.model_dir, explicit=explicit,
      quickstart_input_files=getattr(flags_obj, "quickstart_input_files",
                                     None))
  print(run_plan.describe(plan), flush=True)
  plan_rules.check(plan)
  return plan


def run(flags_obj) -> Mapping[str, Any]:
  """Parses train.py's flags, then `run_experiment`."""
  params, explicit = parse_configuration_and_sources(flags_obj)
  return run_experiment(
      params, flags_obj.mode, flags_obj.model_dir,
      getattr(flags_obj, "quickstart_input_files", None),
      getattr(flags_obj, "enable_async_checkpointing", False), explicit,
      getattr(flags_obj, "cluster_start_timeout_s",
              multi_worker.START_TIMEOUT_S))


def run_experiment(params: cfg.ExperimentConfig, mode: str, model_dir: str,
                   quickstart_input_files: Optional[Sequence[str]] = None,
                   enable_async_checkpointing: bool = False,
                   explicit: Optional[run_plan.ExplicitKeys] = None,
                   cluster_start_timeout_s: int = multi_worker.START_TIMEOUT_S
                  ) -> Mapping[str, Any]:
  """Checks, then trains and/or evaluates a parsed (unlocked) config as `mode`
  says (train.py, the sweep and the reproduction all run here); returns the
  last evaluation's metrics, or {}. `explicit`: the keys the user set.
  """
  clustered = multi_worker.configure_coordination(
      params.runtime.distribution_strategy,
      start_timeout_s=cluster_start_timeout_s)
  # On a cluster SIGTERM belongs to Model Garden's preemption handler, so
  # that every worker saves at one step.
  signals = (contextlib.nullcontext() if clustered else
             stop_signals.raised_on_signals())
  try:
    # A signal held back to the block's end (`stop_signals`) is caught too.
    with signals:
      with checked_run(params, mode, model_dir, quickstart_input_files,
                       explicit) as run:
        return _run_checked(run.plan, run.strategy, run.chief,
                            enable_async_checkpointing)
  except stop_signals.Stopped as stop:
    # The lock is released by now; the checkpoint is complete (synced).
    latest = run_directory.newest_checkpoint(model_dir)
    step = run_directory.checkpoint_step(latest) if latest else None
    _log(stop_signals.stop_line(
        stop, stop.step if stop.step is not None else step or 0, latest,
        step))
    raise


def _save_at_stop(controllers, strategy: tf.distribute.Strategy,
                  trains_here: bool) -> None:
  """Saves a stopped single-worker run's steps (a cluster's preemption
  action saves there); a failed save is said, and the stop goes on."""
  if not (trains_here and controllers) or strategy.cluster_resolver:
    return
  try:
    controllers[-1].save_at_stop()
  except controller_lib.CheckpointSaveError as e:
    _log(f"could not save the stopped run's step: {e}")


def _run_checked(plan: run_plan.RunPlan, strategy: tf.distribute.Strategy,
                 chief: bool, enable_async_checkpointing: bool
                ) -> Mapping[str, Any]:
  """`run_experiment` after the checks (`plan.params` locked)."""
  params, mode, model_dir = plan.params, plan.mode, plan.model_dir
  logging.info("Final experiment parameters:\n%s",
               pprint.pformat(params.as_dict()))
  start_step = run_directory.checkpoint_step(plan.resume)
  completed = (mode in run_plan.TRAIN_MODES and
               start_step >= params.trainer.train_steps)
  if completed:
    record = ownership.read_json(os.path.join(
        model_dir, run_plan.FINAL_EVAL_FILE), utils.GFILE_OPS)
    if mode == "train" or (record and record.get("step") == start_step):
      _log(f"{model_dir} is already complete at step {start_step} "
           f"(trainer.train_steps={params.trainer.train_steps}): nothing to "
           "do.")
      return dict(record["metrics"]) if mode != "train" and record else {}
    _log(f"Training is already complete at step {start_step}, but its final "
         "evaluation never finished: running it now.")

  trains = mode in run_plan.TRAIN_MODES and not completed
  # The chief of a train mode only: an eval job must not race the train job.
  writer = chief and mode in run_plan.TRAIN_MODES
  if writer:
    clean_stale_temps(model_dir)
    write_params_yaml(params, model_dir)

  # Model Garden seeds only the input pipeline; a seeded run must repeat.
  if params.task.train_data.seed is not None:
    tf_keras.utils.set_random_seed(params.task.train_data.seed)
  with strategy.scope():
    task = task_factory.get_task(params.task, logging_dir=model_dir)
    trainer = train_utils.create_trainer(
        params, task, train=trains,
        evaluate=mode in run_plan.EVAL_MODES,
        checkpoint_exporter=train_lib.maybe_create_best_ckpt_exporter(
            params, model_dir),
        trainer_cls=functools.partial(trainer_lib.Trainer,
                                      model_dir=model_dir,
                                      resume=plan.resume))
  eval_outputs = []  # Orbit eval action: run_experiment returns only post-eval.
  run_summary.drop_duplicate_progress()
  start_time = time.time()
  controllers = []  # No preemption retry: a rerun resumes.

  def make_controller(*args, **kwargs):
    multi_worker.stop_after_preemption_checkpoint(kwargs.get("train_actions"))
    multi_worker.align_checkpoint_interval(
        kwargs.get("checkpoint_manager"), strategy,
        start_step if plan.resume else None)
    controllers.append(controller_lib.Controller(*args, **kwargs))
    return controllers[-1]

  try:
    _, eval_logs = train_lib.run_experiment(
        distribution_strategy=strategy, task=task,
        mode="eval" if completed else mode, params=params,
        model_dir=model_dir, trainer=trainer,
        eval_actions=[eval_outputs.append],
        controller_cls=make_controller,
        enable_async_checkpointing=enable_async_checkpointing)
  except stop_signals.Stopped as stop:
    # An async save in flight completes (and is listed) before the report.
    trainer.checkpoint.sync()
    stop.step = int(trainer.global_step.numpy())
    _save_at_stop(controllers, strategy, trains and writer)
    raise
  except multi_worker.LOST_WORKER_ERRORS as e:
    latest = run_directory.newest_checkpoint(model_dir)
    lost = multi_worker.lost_worker_exit(
        e, strategy, latest,
        run_directory.checkpoint_step(latest) if latest else None)
    if lost is None:
      raise
    raise lost from e
  finally:
    multi_worker.remove_worker_checkpoints(controllers, strategy)
  final = dict(eval_logs or (eval_outputs[-1] if eval_outputs else {}))
  step = int(trainer.global_step.numpy())
  values = {k: float(v) for k, v in sorted(final.items())
            if getattr(v, "shape", ()) == () or isinstance(v, float)}
  if final:
    _log(f"final eval | step: {step} | " +
         " | ".join(f"{k}: {v:.4f}" for k, v in values.items()))
    if writer and step >= params.trainer.train_steps:
      writes.publish_json(os.path.join(model_dir, run_plan.FINAL_EVAL_FILE),
                          {"step": step, "metrics": values}, WRITER,
                          utils.GFILE_OPS)
  for line in run_summary.summary_lines(
      params, model_dir, values, step, step - start_step if trains else 0,
      time.time() - start_time):
    _log(line)
  return final

