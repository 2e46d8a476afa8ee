"""One home for a run directory: what it holds and where each thing is.

A run directory is a train.py `--model_dir` (`params.yaml`, `ckpt-N`) or what
`checkpoints.convert` / the Keras 3 bridge's `save_run` write (`encoder.yaml`,
`ckpt-1`). Readers here find its config, its run and vocabulary, and its newest
readable checkpoint, naming every unreadable one they skip and why.
"""

import dataclasses
import os
import re
from typing import Any, Callable, List, Optional, Tuple, TypeVar

from absl import logging
import tensorflow as tf
import yaml

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from realformer_tf import utils
from realformer_tf.checkpoints import bundle_index
from realformer_tf.checkpoints import errors
from realformer_tf.configs import encoders
from realformer_tf.configs import registry
from realformer_tf.core import run_lock
from realformer_tf.core import writes

PARAMS_YAML = "params.yaml"  # train.py's experiment config.
ENCODER_YAML = "encoder.yaml"  # `task.model.encoder` of convert / save_run.
PRETRAINER_YAML = "pretrainer.yaml"  # convert --with_pretraining_heads.
LOCK_FILE = run_lock.LOCK_FILE
CHECKPOINT_PREFIX = "ckpt"

T = TypeVar("T")
# What a damaged checkpoint raises when read (IndexError: a truncated file).
_UNREADABLE = (tf.errors.OpError, IndexError, ValueError)


def params_path(model_dir: str) -> str:
  """The experiment config train.py records in `model_dir`."""
  return os.path.join(model_dir, PARAMS_YAML)


def directory_of(path: str) -> str:
  """The run directory of a checkpoint prefix, or `path` if a directory."""
  path = path.rstrip("/")
  return path if tf.io.gfile.isdir(path) else os.path.dirname(path)


def relocated_path(recorded: str, run_dir: str) -> Optional[str]:
  """Where a file params.yaml records by absolute path is after the run moved:
  the longest tail of `recorded` under `run_dir`; None if `recorded` exists
  or no tail does."""
  if not recorded or tf.io.gfile.exists(recorded):
    return None
  parts = [part for part in recorded.replace("\\", "/").split("/") if part]
  for tail in range(len(parts) - 1, 0, -1):
    candidate = os.path.join(run_dir, *parts[-tail:])
    if tf.io.gfile.exists(candidate) and not tf.io.gfile.isdir(candidate):
      return candidate
  return None


def check_not_set_aside(path: str, what: str) -> None:
  """Raises ValueError naming the backup when `path` was set aside by a
  killed swap (`core.writes.interrupted_swap`); `what` names the argument."""
  backup = writes.interrupted_swap(path, utils.GFILE_OPS)
  if backup:
    raise ValueError(
        f"{what}={path!r} does not exist, but {backup} holds it as it was "
        "before a killed writer (an --overwrite run, save_run) set it aside: "
        "run that writer again (it restores the directory first), or rename "
        "it back.")


def not_valid_yaml(path: str, error: yaml.YAMLError) -> ValueError:
  """A ValueError naming the file, line, column and problem of bad YAML."""
  mark = getattr(error, "problem_mark", None)
  where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
  problem = getattr(error, "problem", None) or str(error)
  context = getattr(error, "context", None)
  return ValueError(
      f"{where}: not valid YAML ({problem}"
      + (f", {context}" if context else "") + "). Fix that line, or restore "
      "the file from a copy of the run.")


def read_yaml(path: str) -> Any:
  """The parsed YAML at `path`; a ValueError naming its bad line."""
  with tf.io.gfile.GFile(path) as f:
    try:
      return yaml.safe_load(f)
    except yaml.YAMLError as e:
      raise not_valid_yaml(path, e) from None


def load_experiment_config(model_dir: str) -> cfg.ExperimentConfig:
  """Rebuilds the experiment config a run recorded in `model_dir/params.yaml`
  (FileNotFoundError without it; ValueError naming what is wrong)."""
  check_not_set_aside(model_dir, "model_dir")
  path = os.path.join(model_dir, PARAMS_YAML)
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(
        f"{path} not found: is {model_dir!r} a model_dir written by train.py?")
  try:
    params_dict = hyperparams.read_yaml_to_params_dict(path).as_dict()
  except yaml.YAMLError as e:
    raise not_valid_yaml(path, e) from None
  name = (params_dict.get("task") or {}).get("name")
  if not name:
    raise ValueError(
        f"{path} has no task.name, so the experiment that wrote it is unknown.")
  config = exp_factory.get_exp_config(name)
  config.override(params_dict, is_strict=True)
  config.validate()
  return config


@dataclasses.dataclass(frozen=True)
class Run:
  """A train.py run directory and the experiment its params.yaml holds."""
  directory: str
  config: cfg.ExperimentConfig

  @property
  def params_path(self) -> str:
    return params_path(self.directory)

  @property
  def vocab_file(self) -> str:
    """The vocabulary the run's data was tokenized with ("" if unrecorded)."""
    return getattr(self.config.task, "vocab_file", "") or ""


def find_run(path: str) -> Optional[Run]:
  """The train.py run that `path` (a model dir or a checkpoint in one) is or
  lies in; None if neither holds a params.yaml."""
  path = (path or "").rstrip("/")
  candidates = ([path] if tf.io.gfile.isdir(path) else []) + [
      os.path.dirname(path)]
  for directory in candidates:
    if directory and tf.io.gfile.exists(os.path.join(directory, PARAMS_YAML)):
      return Run(directory, load_experiment_config(directory))
  return None


def encoder_config(path: str) -> Tuple[str, Any]:
  """(where, config) of the encoder recorded beside a checkpoint (or in a
  directory): `params.yaml`'s task encoder, else `encoder.yaml`; a
  ValueError names the file, a killed swap's backup, or both files."""
  check_not_set_aside(path, "checkpoint")
  run_dir = directory_of(path)
  params_yaml = os.path.join(run_dir, PARAMS_YAML)
  encoder_yaml = os.path.join(run_dir, ENCODER_YAML)
  if tf.io.gfile.exists(params_yaml):
    key, config = registry.task_encoder(load_experiment_config(run_dir))
    if config is None:
      raise ValueError(f"{params_yaml} has no task.model.encoder: the run "
                       "has no BERT-style encoder to load.")
    return f"{params_yaml}: {key}", config
  if tf.io.gfile.exists(encoder_yaml):
    values = read_yaml(encoder_yaml)
    try:
      config = encoders.encoder_config()
      config.override(values["task"]["model"]["encoder"], is_strict=True)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      raise ValueError(f"{encoder_yaml} does not hold a task.model.encoder "
                       f"config: {type(e).__name__}: {e}") from None
    return f"{encoder_yaml}: task.model.encoder", config
  raise ValueError(
      f"Neither {params_yaml} nor {encoder_yaml} exists, so the encoder "
      f"config of {path!r} is unknown: pass encoder_config=.")


def check_files(prefix: str) -> Optional[str]:
  """None if `prefix`'s index reads and each data shard reaches the end of
  its last tensor (read from the index only); else why."""
  if not tf.io.gfile.exists(prefix + ".index"):
    return f"{prefix}.index does not exist"
  try:
    tf.train.load_checkpoint(prefix)
    with tf.io.gfile.GFile(prefix + ".index", "rb") as f:
      ends = bundle_index.data_ends(f.read())
  except _UNREADABLE as e:
    return f"{prefix}.index: {type(e).__name__}: {e}"
  shards = tf.io.gfile.glob(prefix + ".data-*-of-*")
  if not shards:
    return f"{prefix} has no .data-*-of-* file"
  total = int(shards[0].rsplit("-of-", 1)[1])
  if len(shards) != total:
    return f"{prefix} has {len(shards)} of its {total} .data files"
  held = {shard: tf.io.gfile.stat(
      f"{prefix}.data-{shard:05d}-of-{total:05d}").length for shard in ends}
  if any(held[shard] < end for shard, end in ends.items()):
    return (f"{prefix}.data-* hold {sum(held.values())} bytes, less than the "
            f"{sum(ends.values())} bytes of tensors its index lists "
            "(truncated)")
  return None


def restore_model(model: tf.Module, checkpoint: str) -> None:
  """Restores `model` (all its variables) from a trainer checkpoint; a
  ValueError if it is damaged, unreadable or lacks model variables."""
  try:
    # As export_base.export: the optimizer and the rest are left over.
    tf.train.Checkpoint(model=model).read(
        checkpoint).assert_existing_objects_matched().expect_partial()
  except tf.errors.DataLossError as e:
    tf.get_logger().setLevel("ERROR")  # Not its hundreds of warnings at exit.
    raise damaged_checkpoint_error(checkpoint, e) from None
  except (AssertionError, tf.errors.OpError, ValueError) as e:
    raise ValueError(
        f"Checkpoint {checkpoint!r} does not hold the variables of the model "
        "built from params.yaml (was it written by another run or "
        f"experiment?): {e}") from e


def damaged_checkpoint_error(prefix: str,
                             error: tf.errors.DataLossError) -> ValueError:
  """Names a checkpoint a restore found damaged and the one to go on from."""
  older = older_whole_checkpoint(directory_of(prefix), prefix)
  why = re.sub(r"^\{\{.*?\}\} *| *\[Op:\w+\]$", "",  # TensorFlow's frame.
               error.message.split("\n")[0])
  return ValueError(
      f"Checkpoint {prefix} is damaged (DataLossError: {why}), so nothing "
      "was run. " + (
          f"Its newest older whole checkpoint is {older}: point the run's "
          "state file at it with tf.compat.v1.train.update_checkpoint_state("
          f"{os.path.dirname(prefix)!r}, {older!r})." if older else
          "No older checkpoint of the run is whole."))


def read_latest(path: str, what: str,
                read: Callable[[str], T]) -> Tuple[str, T]:
  """(prefix, read(prefix)) of the newest checkpoint `read` gets through.

  A prefix is only itself; a directory's state file's checkpoints (else its
  `ckpt-N` files) are tried newest first, an unreadable one skipped with a
  warning; a `CheckpointMismatchError` is raised at once, a ValueError naming
  `what` when nothing is readable.
  """
  key = f"{what}={path!r}"
  if not path:
    raise ValueError(f"{what} is empty.")
  check_not_set_aside(path, what)
  if not tf.io.gfile.isdir(path):
    why = check_files(path)
    if why:
      raise ValueError(f"{key} is not a readable checkpoint: {why}.")
    return path, read(path)
  state = tf.train.get_checkpoint_state(path)  # Its paths are absolute.
  if state and state.model_checkpoint_path:
    candidates = list(dict.fromkeys([
        state.model_checkpoint_path,
        *reversed(state.all_model_checkpoint_paths)]))
  else:
    candidates = checkpoint_prefixes(path)
    if not candidates:
      raise ValueError(f"{key} is a directory without a checkpoint (no "
                       "'checkpoint' state file naming one, and no "
                       f"{CHECKPOINT_PREFIX}-* files).")
    logging.warning(
        "%s has no 'checkpoint' state file (a copy that left it out?): "
        "reading its %s files by step, newest first (%s).", key,
        CHECKPOINT_PREFIX, ", ".join(os.path.basename(p) for p in candidates))
  failures = []
  for prefix in candidates:
    why = check_files(prefix)
    if why is None:
      try:
        value = read(prefix)
      except errors.CheckpointMismatchError:
        raise
      except _UNREADABLE as e:
        why = f"{prefix}: {type(e).__name__}: {e}"
    if why is None:
      if failures:
        logging.warning("%s: skipped unreadable newer checkpoints (%s); "
                        "using %s.", key, "; ".join(failures), prefix)
      return prefix, value
    failures.append(why)
  raise ValueError(f"{key}: no readable checkpoint ({'; '.join(failures)}).")


def newest_checkpoint(model_dir: str) -> Optional[str]:
  """The checkpoint a run resumes (its state file's newest), unread; or None."""
  return tf.train.latest_checkpoint(model_dir) if model_dir else None


# Model Garden's `Trainer.checkpoint` saves its step as `global_step`.
_GLOBAL_STEP_KEY = "global_step/.ATTRIBUTES/VARIABLE_VALUE"


def checkpoint_step(prefix: Optional[str]) -> int:
  """The training step a trainer's checkpoint holds (0 for None)."""
  if not prefix:
    return 0
  return int(tf.train.load_checkpoint(prefix).get_tensor(_GLOBAL_STEP_KEY))


def checkpoint_prefixes(model_dir: str) -> List[str]:
  """The `ckpt-N` prefixes with files in `model_dir`, newest first (from the
  files, not the state file; not a killed save's `ckpt-N_temp*`)."""
  prefixes = set()
  for path in tf.io.gfile.glob(os.path.join(model_dir,
                                            f"{CHECKPOINT_PREFIX}-*")):
    stem = os.path.basename(path).split(".", 1)[0]
    number = stem[len(CHECKPOINT_PREFIX) + 1:]
    if number.isdigit() and not tf.io.gfile.isdir(path):
      prefixes.add((int(number), os.path.join(model_dir, stem)))
  return [prefix for _, prefix in sorted(prefixes, reverse=True)]


def older_whole_checkpoint(model_dir: str,
                           than: Optional[str] = None) -> Optional[str]:
  """The newest whole (`check_files`) `ckpt-N` of `model_dir` older than the
  prefix `than` (any, when None or not one of them); None if none is."""
  prefixes = checkpoint_prefixes(model_dir)
  if than in prefixes:
    prefixes = prefixes[prefixes.index(than) + 1:]
  return next((p for p in prefixes if check_files(p) is None), None)


def resolve_checkpoint(path: str, what: str) -> str:
  """The newest readable checkpoint of a prefix or directory `path`; else a
  ValueError naming `what` (e.g. "task.init_checkpoint") and why."""
  return read_latest(path, what, lambda prefix: None)[0]
