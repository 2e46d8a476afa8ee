"""`realformer/glue`: GLUE fine-tuning with the RealFormer paper's recipe.

One YAML per task in `official_configs/experiments/glue/` sets one grid
point (data paths start with the placeholder `GLUE_DATA_DIR`; docs/ show a
command). `recipe.apply_paper_schedule` sets a point and `python -m
realformer_tf.training.sweep` runs the paper's grid.
"""

import os

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from official.nlp.tasks import sentence_prediction
from realformer_tf.configs import encoders
from realformer_tf.configs import recipe
from realformer_tf.data import schedule
from realformer_tf.data import glue_tasks
from realformer_tf.tasks import sentence_prediction as rf_sentence_prediction

GLUE = "realformer/glue"

PAPER_LEARNING_RATES = (6e-6, 8e-6, 1e-5, 2e-5, 3e-5, 4e-5, 5e-5)
PAPER_EPOCHS = (2, 3, 4)
PAPER_NUM_SEEDS = 5
PAPER_DROPOUT = 0.1

GLUE_YAML_DIR = os.path.abspath(os.path.join(
    __file__, "..", "..", "..", "official_configs", "experiments", "glue"))


def glue_yaml_path(task: str) -> str:
  """`official_configs/experiments/glue/<task>.yaml` of the source tree."""
  spec = glue_tasks.get_task(task)
  path = os.path.join(GLUE_YAML_DIR, f"{spec.name}.yaml")
  if not os.path.exists(path):
    raise ValueError(f"{path} not found: the GLUE YAMLs ship with the source "
                     "tree (install it with `pip install -e .`).")
  return path


@exp_factory.register_config_factory(GLUE)
def realformer_glue() -> cfg.ExperimentConfig:
  """RealFormer GLUE fine-tuning; pick the task with its YAML (`glue_task`)."""
  return cfg.ExperimentConfig(
      task=rf_sentence_prediction.RealFormerSentencePredictionConfig(
          name=GLUE,
          # Pre-trained NSP pooler -> classifier pooler, as BERT fine-tunes.
          init_cls_pooler=True,
          model=sentence_prediction.ModelConfig(
              num_classes=2,
              use_encoder_pooler=False,
              encoder=encoders.encoder_config(dropout_rate=PAPER_DROPOUT)),
          train_data=rf_sentence_prediction.GlueDataConfig(
              is_training=True, global_batch_size=schedule.PAPER_BATCH_SIZE,
              seq_length=128),
          validation_data=rf_sentence_prediction.GlueDataConfig(
              is_training=False, drop_remainder=False,
              global_batch_size=schedule.PAPER_BATCH_SIZE, seq_length=128)),
      trainer=cfg.TrainerConfig(
          validation_steps=-1,
          # Model Garden's 1000 is longer than small tasks' runs.
          steps_per_loop=100,
          summary_interval=100,
          # The YAMLs' grid point; they set the steps.
          optimizer_config=recipe.paper_optimizer(2e-5, 0)),
      restrictions=list(recipe.DATA_RESTRICTIONS))


def load_glue_config(task: str, *config_files: str,
                     params_override: str = "") -> cfg.ExperimentConfig:
  """`realformer/glue` + the task's YAML + more YAMLs + overrides."""
  config = exp_factory.get_exp_config(GLUE)
  for override in (glue_yaml_path(task), *config_files, params_override):
    if override:  # A YAML path or a params_override string.
      config = hyperparams.override_params_dict(config, override,
                                                is_strict=True)
  return check_glue_task(config, task)


def check_glue_task(config: cfg.ExperimentConfig,
                    task: str) -> cfg.ExperimentConfig:
  """Refuses a config whose `task.glue_task` is not `task`; validates it."""
  spec = glue_tasks.get_task(task)
  if config.task.glue_task != spec.name:
    raise ValueError(f"task.glue_task={config.task.glue_task!r} after the "
                     f"overrides, but the task is {spec.name!r}.")
  config.validate()
  return config
