"""Upstream Model Garden defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once Model Garden fixes it:
then the workaround named in its docstring can go.
"""

import types

import tensorflow as tf
import tf_keras

from official.nlp.tasks import masked_lm


def test_masked_lm_train_step_never_scales_the_loss():
  """`tasks.masked_lm.MaskedLMTask.train_step`: under float16 a
  `LossScaleOptimizer`'s scale never reaches the gradients, which underflow."""
  model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
  inputs = tf.ones([2, 3])
  model(inputs)
  optimizer = tf_keras.mixed_precision.LossScaleOptimizer(
      tf_keras.optimizers.SGD(0.1), dynamic=False, initial_scale=1024.0)
  scaled = []
  get_scaled_loss = optimizer.get_scaled_loss
  optimizer.get_scaled_loss = lambda loss: scaled.append(loss) or (
      get_scaled_loss(loss))
  task = types.SimpleNamespace(
      task_config=types.SimpleNamespace(scale_loss=False), loss="loss",
      build_losses=lambda labels, model_outputs, metrics, aux_losses: (
          tf.reduce_sum(model_outputs)),
      process_metrics=lambda *args: None)
  logs = masked_lm.MaskedLMTask.train_step(task, inputs, model, optimizer,
                                           metrics=[])
  assert "loss" in logs
  assert not scaled
