"""train.py's modes (Model Garden's `train_lib` names) and what each reads."""

from official.core import config_definitions as cfg

TRAIN_MODES = ("train", "train_and_eval", "train_and_post_eval")
EVAL_MODES = ("eval", "train_and_eval", "continuous_eval",
              "train_and_post_eval")
MODES = TRAIN_MODES + ("eval", "continuous_eval")


def data_configs(params: cfg.ExperimentConfig, mode: str):
  """The (key, DataConfig) pairs `mode` reads, as a list."""
  return [(f"task.{name}", getattr(params.task, name))
          for name, which in (("train_data", TRAIN_MODES),
                              ("validation_data", EVAL_MODES)) if mode in which]
