"""Where training finds things in a run directory, in one place.

A run directory (`--model_dir`) holds `params.yaml`, the checkpoints, the
lock (`run_lock`) and, for the quickstart, its own data in `data/`. Every
look-up the checks before a run make goes through here, so that they can
move to one shared run-directory module without touching their callers.
"""

import os
from typing import Optional, Tuple

import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf.configs import experiments
from realformer_tf.configs import registry

PARAMS_FILE = "params.yaml"


def latest_checkpoint(model_dir: str) -> Optional[str]:
  """The newest checkpoint prefix in `model_dir`, or None."""
  return tf.train.latest_checkpoint(model_dir) if model_dir else None


def params_path(model_dir: str) -> str:
  return os.path.join(model_dir, PARAMS_FILE)


def has_params(model_dir: str) -> bool:
  return tf.io.gfile.exists(params_path(model_dir))


def load_params(model_dir: str) -> cfg.ExperimentConfig:
  """The experiment config a run recorded in `model_dir/params.yaml`."""
  return registry.load_experiment_config(model_dir)


def quickstart_data_dir(model_dir: str) -> str:
  """Where the quickstart builds its own data for the run in `model_dir`."""
  return os.path.join(model_dir, experiments.QUICKSTART_DATA_SUBDIR)


def run_of(checkpoint: str) -> Tuple[Optional[str], Optional[cfg.ExperimentConfig]]:
  """(model dir, config) of the train.py run `checkpoint` is (a model dir)
  or lies in (a checkpoint prefix), else (None, None)."""
  checkpoint = checkpoint or ""
  for directory in ([checkpoint] if tf.io.gfile.isdir(checkpoint) else []) + [
      os.path.dirname(checkpoint.rstrip("/"))]:
    if directory and has_params(directory):
      return directory, load_params(directory)
  return None, None
