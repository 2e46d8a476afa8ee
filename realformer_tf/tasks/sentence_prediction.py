"""GLUE fine-tuning: Model Garden's `SentencePredictionTask`, paper metrics.

Changes: every evaluation reports all the paper's metrics of `task.glue_task`
(and majority-class baselines), several named validation files evaluate in one
pass (MNLI), and a missing or foreign init checkpoint is an error instead of a
silent fresh start.
"""

import dataclasses
import functools
from typing import List, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from official.common import dataset_fn
from official.core import input_reader
from official.core import task_factory
from official.nlp.data import data_loader_factory
from official.nlp.data import sentence_prediction_dataloader as sp_dataloader
from official.nlp.tasks import sentence_prediction
from realformer_tf.data import glue_tasks

# Token that the per-task YAMLs put in front of their data paths.
DATA_DIR_PLACEHOLDER = "GLUE_DATA_DIR"

SPLIT_ID = "split_id"


@dataclasses.dataclass
class GlueDataConfig(sp_dataloader.SentencePredictionDataConfig):
  """`SentencePredictionDataConfig` plus `split_names`: empty, or one name per
  comma-separated evaluation file in `input_path` (metrics `<metric>_<name>`).
  """
  split_names: Optional[List[str]] = None


@data_loader_factory.register_data_loader_cls(GlueDataConfig)
class GlueDataLoader(sp_dataloader.SentencePredictionDataLoader):
  """`SentencePredictionDataLoader` that can tag examples with their file."""

  def load(self, input_context: Optional[tf.distribute.InputContext] = None):
    names = list(self._params.split_names or [])
    if not names:
      return super().load(input_context)
    paths = split_input_paths(self._params.input_path)
    if len(paths) != len(names):
      raise ValueError(
          f"validation_data.split_names {names} needs one comma-separated "
          f"file per name in input_path, got {len(paths)}: {paths}.")
    if self._params.is_training:
      raise ValueError("split_names is for evaluation data only "
                       "(is_training=false).")
    parts = [input_reader.InputReader(
        dataset_fn=dataset_fn.pick_dataset_fn(self._params.file_type),
        params=self._params.replace(input_path=path),
        decoder_fn=self._decode,
        parser_fn=lambda record, i=split_id: dict(
            self._parse(record), **{SPLIT_ID: tf.constant(i, tf.int32)})
    ).read(input_context) for split_id, path in enumerate(paths)]
    return functools.reduce(tf.data.Dataset.concatenate, parts)


def split_metric_name(metric: str, split_name: str) -> str:
  """`<metric>_<split_name>`, or `metric` for unnamed validation data."""
  return f"{metric}_{split_name}" if split_name else metric


def split_input_paths(input_path) -> List[str]:
  if isinstance(input_path, str):
    return [p.strip() for p in input_path.split(",") if p.strip()]
  return [str(p) for p in input_path]


@dataclasses.dataclass
class RealFormerSentencePredictionConfig(
    sentence_prediction.SentencePredictionConfig):
  """`SentencePredictionConfig` for the GLUE task `glue_task` (cola, sst2,
  mrpc, stsb, qqp, mnli, qnli, rte), which selects the reported metrics."""
  glue_task: str = ""
  train_data: GlueDataConfig = dataclasses.field(
      default_factory=GlueDataConfig)
  validation_data: GlueDataConfig = dataclasses.field(
      default_factory=lambda: GlueDataConfig(is_training=False,
                                             drop_remainder=False))


def check_data_paths(config: RealFormerSentencePredictionConfig) -> None:
  """Raises if a data path still holds the YAML placeholder."""
  for field in ("train_data", "validation_data"):
    path = getattr(config, field).input_path
    if isinstance(path, str) and DATA_DIR_PLACEHOLDER in path:
      raise ValueError(
          f"task.{field}.input_path={path!r} still holds the placeholder "
          f"{DATA_DIR_PLACEHOLDER}: override it (e.g. --params_override="
          f"task.{field}.input_path=...) with the files written by "
          "`python -m realformer_tf.data.glue`.")


@task_factory.register_task_cls(RealFormerSentencePredictionConfig)
class RealFormerSentencePredictionTask(
    sentence_prediction.SentencePredictionTask):
  """`SentencePredictionTask` reporting all of a GLUE task's paper metrics."""

  def __init__(self, params: RealFormerSentencePredictionConfig,
               logging_dir=None, name=None):
    super().__init__(params, logging_dir, name=name)
    self._spec = spec = glue_tasks.get_task(params.glue_task)
    if params.model.num_classes != spec.num_classes:
      raise ValueError(
          f"task.model.num_classes={params.model.num_classes}, but "
          f"{spec.name} needs {spec.num_classes}.")
    wanted = "float" if spec.is_regression else "int"
    for field in ("train_data", "validation_data"):
      label_type = getattr(params, field).label_type
      if label_type != wanted:
        raise ValueError(f"task.{field}.label_type={label_type!r}, but "
                         f"{spec.name} labels are {wanted!r}.")
    # `SentencePredictionTask` aggregates outputs unless "accuracy" and
    # keeps logits for "f1".
    self.metric_type = "f1"

  def build_inputs(self, params, input_context=None):
    if params.input_path != "dummy":
      check_data_paths(self.task_config)
    return super().build_inputs(params, input_context)

  def validation_step(self, inputs, model: tf_keras.Model, metrics=None):
    logs = super().validation_step(inputs, model, metrics)
    if SPLIT_ID in inputs:
      logs[SPLIT_ID] = inputs[SPLIT_ID]
    return logs

  def aggregate_logs(self, state=None, step_outputs=None):
    state = super().aggregate_logs(state, step_outputs)
    if SPLIT_ID in step_outputs:
      state.setdefault(SPLIT_ID, []).append(
          np.concatenate([v.numpy() for v in step_outputs[SPLIT_ID]]))
    return state

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None):
    outputs = np.concatenate(aggregated_logs["sentence_prediction"])
    labels = np.concatenate(aggregated_logs["labels"]).reshape(-1)
    split_ids = np.concatenate(aggregated_logs.get(
        SPLIT_ID, [np.zeros_like(labels, int)])).reshape(-1)
    results = {}
    names = self.task_config.validation_data.split_names or [""]
    for split_id, name in enumerate(names):
      chosen = split_ids == split_id
      if name and not np.any(chosen):
        raise ValueError(f"No evaluation examples from split {name!r}.")
      metrics = glue_tasks.glue_metrics(self._spec.name, outputs[chosen],
                                        labels[chosen])
      metrics.update(glue_tasks.majority_class_metrics(self._spec.name,
                                                       labels[chosen]))
      results.update({split_metric_name(key, name): value
                      for key, value in metrics.items()})
    logging.info("%s metrics at step %s: %s", self._spec.name,
                 None if global_step is None else
                 int(tf.convert_to_tensor(global_step)), results)
    return results

  def initialize(self, model):
    """Restores the encoder (and NSP pooler) from `task.init_checkpoint`."""
    path = self.task_config.init_checkpoint
    if not path:
      return
    try:
      names = {name for name, _ in tf.train.list_variables(path)}
    except (tf.errors.OpError, ValueError) as e:
      raise ValueError(f"task.init_checkpoint={path!r}: cannot read it "
                       f"({type(e).__name__}: {e}).") from None
    for key in ["encoder"] + (["next_sentence.pooler_dense"]
                              if self.task_config.init_cls_pooler else []):
      # Object-graph keys escape "." as ".." and "/" as "./".
      prefix = key.replace(".", "..").replace("/", "./") + "/"
      if not any(name.startswith(prefix) for name in names):
        raise ValueError(
            f"task.init_checkpoint={path!r} has no '{key}' object "
            "at its root; expected a checkpoint written by Model Garden's "
            "trainer for realformer/pretraining (with the next_sentence head "
            "when task.init_cls_pooler is true).")
    super().initialize(model)

