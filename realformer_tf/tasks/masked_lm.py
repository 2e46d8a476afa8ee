"""Model Garden's `MaskedLMTask` with the float16 loss scaling it lacks.

`official/nlp/tasks/masked_lm.py` `MaskedLMTask.train_step` computes the
gradients of the raw loss and hands them to the optimizer, even when Model
Garden's trainer wrapped it in a `LossScaleOptimizer` (runtime
`mixed_precision_dtype: float16`, `official/core/base_trainer.py` via
`performance.configure_optimizer`): the loss is never scaled (Keras warns
"You forgot to call LossScaleOptimizer.get_scaled_loss()"), so small float16
gradients underflow to zero. `official/core/base_task.py` `Task.train_step`
does it right; this is that handling applied to the masked-LM step, which
otherwise is Model Garden's, line for line (including `task.scale_loss`).

Sharded input (a file pattern of shards, `data.shards`) is Model Garden's
`InputReader`: files shuffled every epoch, sharded per worker by the
strategy's input context, interleaved (official/core/input_reader.py:104-147).
One thing it gets wrong: with `seed` unset it shuffles the file list with a
seed each worker draws for itself (line 124-125, "We need a seed ... so that
... the files do not overlap", then `_get_random_integer()` per process), so
two workers' shards of the shuffled list overlap and some files go unread in
an epoch. `build_inputs` gives the workers one seed (`SHARED_FILE_SEED`)
when there are several input pipelines and none is set. A resumed run's
training records skip what the stopped run read (`resumable_pretraining`:
Model Garden does not checkpoint the input iterator).

Variables the loss does not reach are left out of the optimizer's update,
and said once, in words: the encoder's pooler is one (Model Garden's NSP
head has its own dense layer, which GLUE fine-tuning takes:
`init_cls_pooler`). Left in, tf_keras warns at every trace of the step
(`tf_keras/src/optimizers/utils.py:82`, "Gradients do not exist ... did you
forget to provide a `loss` argument?": four times in the quickstart's run).
"""

import dataclasses
from typing import Iterable, Set

from absl import logging
import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.nlp.data import pretrain_dataloader
from official.nlp.tasks import masked_lm
from realformer_tf.data import resumable_pretraining


@dataclasses.dataclass
class RealFormerMaskedLMConfig(masked_lm.MaskedLMConfig):
  """Model Garden's `MaskedLMConfig` plus the vocabulary the data was made with.

  Attributes:
    vocab_file: The WordPiece vocabulary the pre-training records were
      tokenized with. Not read by training (the records hold token ids), but
      checked before training starts (a valid vocabulary whose size equals
      `model.encoder.*.vocab_size`) and recorded in `params.yaml` for
      fine-tuning. Empty: not checked.
  """
  vocab_file: str = ""


# The file-shuffle seed every worker uses when `train_data.seed` is unset.
SHARED_FILE_SEED = 20201228  # RealFormer's arXiv date.


def with_shared_seed(params, input_context=None):
  """`params` (a data config) with `SHARED_FILE_SEED` as its seed when it
  reads several files for several input pipelines and sets none (see the
  module docstring); else `params` unchanged."""
  pipelines = input_context.num_input_pipelines if input_context else 1
  if (pipelines > 1 and params.is_training and params.seed is None and
      params.input_path != "dummy"):
    logging.info("%s.seed is unset: the %d input pipelines shuffle the file "
                 "list with seed %d, so that each reads its own files.",
                 "task.train_data", pipelines, SHARED_FILE_SEED)
    return params.replace(seed=SHARED_FILE_SEED)
  return params


_REPORTED: Set[str] = set()  # Variables already said to get no gradient.


def report_untrained(names: Iterable[str]) -> None:
  """Says once per process which variables get no gradient: an info line
  for the encoder's pooler (expected), a warning for anything else."""
  new = sorted(set(names) - _REPORTED)
  if not new:
    return
  _REPORTED.update(new)
  # `pooler_transform`: the encoder's pooler (BertEncoderV2's name, ours
  # too); the NSP head's own is `pooler_dense`, and must be trained.
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
  """`masked_lm.MaskedLMTask` whose train step honours a loss scale, whose
  workers share a file-shuffle seed and whose training input resumes where
  a stopped run was (`resume_input_at`)."""

  # The records a stopped run trained on, which the training input skips.
  _input_resume_records = 0

  def resume_input_at(self, records: int) -> None:
    """Makes `build_inputs` start the training records `records` in
    (`resumable_pretraining`): the trainer calls it with the count the
    checkpoint it restores holds, before it builds the datasets."""
    self._input_resume_records = records

  def build_inputs(self, params, input_context=None):
    params = with_shared_seed(params, input_context)
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
      # Computes per-replica loss.
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
    report_untrained(v.name for g, v in zip(grads, tvars) if g is None)
    optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, tvars) if g is not None])
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}
