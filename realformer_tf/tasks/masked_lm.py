"""Model Garden's `MaskedLMTask` with the float16 loss scaling it lacks.

Also: workers share one file-shuffle seed, a resumed run skips the records
already read, and variables without a gradient are left out of the update.
"""

import dataclasses
from typing import Iterable, Set

from absl import logging
import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.nlp.data import pretrain_dataloader
from official.nlp.tasks import masked_lm
from realformer_tf.compat import model_garden as compat_model_garden
from realformer_tf.data import resumable_pretraining


@dataclasses.dataclass
class RealFormerMaskedLMConfig(masked_lm.MaskedLMConfig):
  """Model Garden's `MaskedLMConfig` plus `vocab_file`, the records'
  vocabulary: checked against the encoder's `vocab_size` (unless empty) and
  recorded for fine-tuning, not read by training."""
  vocab_file: str = ""


_REPORTED: Set[str] = set()  # Variables already said to get no gradient.


def report_untrained(names: Iterable[str]) -> None:
  """Says once per process which variables get no gradient (a warning unless
  the encoder's pooler)."""
  new = sorted(set(names) - _REPORTED)
  if not new:
    return
  _REPORTED.update(new)
  # The encoder's pooler; the NSP head's own (`pooler_dense`) must train.
  if all("/pooler_transform/" in name for name in new):
    logging.info(
        "Not trained by masked-LM pre-training (no gradient reaches them): "
        "%s. The encoder's pooler goes unused here: the NSP head has its "
        "own dense layer, which GLUE fine-tuning takes (init_cls_pooler).",
        ", ".join(new))
  else:
    logging.warning(
        "No gradient reaches %s: masked-LM pre-training leaves them as "
        "they are.", ", ".join(new))


@task_factory.register_task_cls(RealFormerMaskedLMConfig)
class MaskedLMTask(masked_lm.MaskedLMTask):
  """`masked_lm.MaskedLMTask` whose train step honours a loss scale (Model
  Garden's does not: tests/compat/model_garden_test.py), whose workers share
  a file-shuffle seed and whose training input resumes where a stopped run
  was (`resume_input_at`)."""

  # The records a stopped run trained on, which the training input skips.
  _input_resume_records = 0

  def resume_input_at(self, records: int) -> None:
    """Makes `build_inputs` skip the first `records` training records (the
    trainer calls it before building the datasets)."""
    self._input_resume_records = records

  def build_inputs(self, params, input_context=None):
    params = compat_model_garden.with_shared_seed(params, input_context)
    if (params.input_path == "dummy" or
        type(params) is not pretrain_dataloader.BertPretrainDataConfig):  # pylint: disable=unidiomatic-typecheck
      return super().build_inputs(params, input_context)
    skip = self._input_resume_records if params.is_training else 0
    if skip and params.seed is None:
      logging.warning(
          "task.train_data.seed is unset, so the records are shuffled anew "
          "in every process: this run resumed after %d records reads a new "
          "order, not the one the stopped run would have read. Set "
          "task.train_data.seed for a run whose resumed batches are the "
          "uninterrupted run's.", skip)
      skip = 0
    return resumable_pretraining.ResumablePretrainDataLoader(
        params, skip).load(input_context)

  def train_step(self, inputs, model: tf_keras.Model,
                 optimizer: tf_keras.optimizers.Optimizer, metrics):
    scales = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=True)
      loss = self.build_losses(
          labels=inputs,
          model_outputs=outputs,
          metrics=metrics,
          aux_losses=model.losses)
      scaled_loss = loss
      if self.task_config.scale_loss:
        # As Model Garden: the gradient all-reduce sums over replicas.
        scaled_loss = (
            loss / tf.distribute.get_strategy().num_replicas_in_sync)
      if scales:
        scaled_loss = optimizer.get_scaled_loss(scaled_loss)
    tvars = model.trainable_variables
    grads = tape.gradient(scaled_loss, tvars)
    if scales:
      grads = optimizer.get_unscaled_gradients(grads)
    # Left out of the update: tf_keras warns at every trace otherwise.
    report_untrained(v.name for g, v in zip(grads, tvars) if g is None)
    optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, tvars) if g is not None])
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}
