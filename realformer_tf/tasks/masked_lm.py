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
"""

import dataclasses

import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.nlp.tasks import masked_lm


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


@task_factory.register_task_cls(RealFormerMaskedLMConfig)
class MaskedLMTask(masked_lm.MaskedLMTask):
  """`masked_lm.MaskedLMTask` whose train step honours a loss scale."""

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
    optimizer.apply_gradients(list(zip(grads, tvars)))
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}
