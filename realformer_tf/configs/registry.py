"""Every `realformer/*` experiment, registered with Model Garden's exp_factory.

Import this module wherever an experiment is looked up by name (train.py,
export, analysis). `EXPERIMENTS` lists their names (Model Garden has no
public listing of its registry); `load_experiment_config` rebuilds the
config a run recorded; `task_encoder` finds a config's encoder.
"""

import os

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.configs import squad
from realformer_tf.configs import translation

EXPERIMENTS = (experiments.PRETRAINING, experiments.QUICKSTART,
               finetuning.GLUE, squad.SQUAD, translation.TRANSLATION)


def load_experiment_config(model_dir: str) -> cfg.ExperimentConfig:
  """Rebuilds the experiment config a run recorded in `model_dir/params.yaml`.

  The registered factory named by `task.name` supplies the config classes
  (including the bound RealFormer encoder); the YAML supplies the values.
  """
  path = os.path.join(model_dir, "params.yaml")
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"{path} not found: is {model_dir!r} a model_dir written by train.py?")
  params_dict = hyperparams.read_yaml_to_params_dict(path).as_dict()
  name = (params_dict.get("task") or {}).get("name")
  if not name:
    raise ValueError(
        f"{path} has no task.name, so the experiment that wrote it is unknown.")
  config = exp_factory.get_exp_config(name)
  config.override(params_dict, is_strict=True)
  config.validate()
  return config


def task_encoder(params: cfg.ExperimentConfig):
  """(key, encoder config) of the task's encoder, or (None, None)."""
  encoder = getattr(getattr(params.task, "model", None), "encoder", None)
  if hasattr(encoder, "get") and getattr(encoder, "type", None):
    return f"task.model.encoder.{encoder.type}", encoder.get()
  return ("task.model.encoder" if encoder is not None else None), encoder
