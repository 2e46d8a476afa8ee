"""Every `realformer/*` experiment, registered with Model Garden's exp_factory.

Import it wherever an experiment is looked up by name. `EXPERIMENTS` lists
the names (Model Garden has no public listing of its registry).
"""

from official.core import config_definitions as cfg
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.configs import squad
from realformer_tf.configs import translation

EXPERIMENTS = (experiments.PRETRAINING, experiments.QUICKSTART,
               finetuning.GLUE, squad.SQUAD, translation.TRANSLATION)


def task_encoder(params: cfg.ExperimentConfig):
  """(key, encoder config) of the task's encoder, or (None, None)."""
  encoder = getattr(getattr(params.task, "model", None), "encoder", None)
  if hasattr(encoder, "get") and getattr(encoder, "type", None):
    return f"task.model.encoder.{encoder.type}", encoder.get()
  return ("task.model.encoder" if encoder is not None else None), encoder
