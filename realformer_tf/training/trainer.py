"""Model Garden's `Trainer`, + `examples_per_second`, a diverged loss stop
and a stop signal acted on at the next step (`create_train_loop_fn`).

Every step's loss is checked, and `NonFiniteLossError` names the first bad step
before any checkpoint holds diverged weights (Model Garden's recovery checks
only the loop's mean loss).
"""

import math
import time
from typing import Optional, Tuple

from absl import logging
import tensorflow as tf
import tf_keras

from official.core import base_trainer
from realformer_tf.checkpoints import run_directory
from realformer_tf.tasks import masked_lm as masked_lm_task
from realformer_tf.training import stop_signals


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or Inf."""

  def __init__(self, message: str, step: int):
    super().__init__(message)
    self.step = step


class LossMeanWithNonFiniteTracking(tf_keras.metrics.Mean):
  """The `training_loss` `Mean` that also finds the loop's first bad step.

  `first_nonfinite_step()`: the loop's 1-based step whose loss was not finite
  or above `upper_bound` (0: none); `first_nonfinite_loss()`: its mean loss.
  """

  def __init__(self, upper_bound: float = float("inf")):
    super().__init__(name="training_loss", dtype=tf.float32)
    # Every replica holds the same (all-reduced) values.
    only_first = tf.VariableAggregation.ONLY_FIRST_REPLICA
    self._steps = self.add_weight(
        "loop_steps", initializer="zeros", aggregation=only_first)
    self._first_bad = self.add_weight(
        "first_nonfinite_step", initializer="zeros", aggregation=only_first)
    self._first_bad_loss = self.add_weight(
        "first_nonfinite_loss", initializer="zeros", aggregation=only_first)
    # `reset_state` zeroes it too: `train_loop_begin` sets it again.
    self._upper_bound = tf.Variable(
        upper_bound, dtype=self.dtype, trainable=False, name="upper_bound",
        aggregation=only_first)
    self._first_bounded_step = tf.Variable(
        1.0, dtype=self.dtype, trainable=False, name="first_bounded_step",
        aggregation=only_first)

  def set_upper_bound(self, value: float, first_step: int = 1) -> None:
    """Steps `first_step`, ... (1-based, in the loop) must stay <= `value`."""
    self._upper_bound.assign(value)
    self._first_bounded_step.assign(float(first_step))

  def update_state(self, values, sample_weight=None):
    values = tf.cast(values, self.dtype)
    # Called per replica (`base_trainer.Trainer.train_step`).
    context = tf.distribute.get_replica_context()
    total = tf.reduce_sum(context.all_reduce(tf.distribute.ReduceOp.SUM,
                                             values))
    mean = total / context.num_replicas_in_sync
    steps = self._steps.assign_add(1.0)
    is_bad = tf.logical_or(
        tf.logical_not(tf.math.is_finite(total)),
        tf.logical_and(mean > self._upper_bound,
                       steps >= self._first_bounded_step))
    is_first = tf.logical_and(is_bad, tf.equal(self._first_bad, 0.0))
    self._first_bad.assign(tf.where(is_first, steps, self._first_bad))
    self._first_bad_loss.assign(
        tf.where(is_first, mean, self._first_bad_loss))
    return super().update_state(values, sample_weight)

  def first_nonfinite_step(self) -> int:
    return int(self._first_bad.numpy())

  def first_nonfinite_loss(self) -> float:
    return float(self._first_bad_loss.numpy())


class _EvalOnlyCheckpoint(tf.train.Checkpoint):
  """A checkpoint restored for evaluation: the optimizer's values go unused."""

  def restore(self, save_path, options=None):
    # Else TensorFlow warns once per optimizer value left in the file.
    return super().restore(save_path, options=options).expect_partial()


# The checkpoint key of the records a pre-training run trained on.
_INPUT_RECORDS_KEY = "input_records/.ATTRIBUTES/VARIABLE_VALUE"


def _input_position(checkpoint: Optional[str], batch_size: int
                   ) -> Tuple[int, int]:
  """(step, records trained on) of the checkpoint a run resumes ((0, 0):
  none); without a recorded count, as if trained at `batch_size` (logged)."""
  step = run_directory.checkpoint_step(checkpoint)
  if not checkpoint:
    return step, 0
  reader = tf.train.load_checkpoint(checkpoint)
  if reader.has_tensor(_INPUT_RECORDS_KEY):
    return step, int(reader.get_tensor(_INPUT_RECORDS_KEY))
  logging.warning(
      "%s does not record how many records the stopped run trained on: "
      "taken as %d steps of this run's global batch size %d. If it trained "
      "with another one, the batches from here are not the ones it would "
      "have read next.", checkpoint, step, batch_size)
  return step, step * batch_size


class Trainer(base_trainer.Trainer):
  """See the module docstring; with `train=False` it restores the model
  without the optimizer. `resume`: the plan's checkpoint (None: a new run)."""

  def __init__(self, config, task, *args, model_dir: Optional[str] = None,
               resume: Optional[str] = None, **kwargs):
    # A resumed pre-training run skips the records its checkpoint counts.
    resume_step = records = None
    if kwargs.get("train", True) and isinstance(task,
                                                masked_lm_task.MaskedLMTask):
      resume_step, records = _input_position(
          resume, config.task.train_data.global_batch_size)
      task.resume_input_at(records)
    super().__init__(config, task, *args, **kwargs)
    self._model_dir = model_dir
    self._input_resume_step = resume_step
    self._input_records = None
    if records is not None:
      self._input_records = tf.Variable(
          records, dtype=tf.int64, trainable=False, name="input_records")
      self._checkpoint.input_records = self._input_records
    if not kwargs.get("train", True):
      self._checkpoint = _EvalOnlyCheckpoint(
          global_step=self.global_step, model=self.model,
          **getattr(self.model, "checkpoint_items", {}))
    # Replaces the base class's `Mean`; parameter servers have no all-reduce.
    self._check_steps = not self._is_async
    if self._check_steps:
      self._train_loss = LossMeanWithNonFiniteTracking()
    # A stop signal ends the loop at its next step (a cluster's preemption
    # handling saves there).
    self._stop_requested = None
    if not (self._is_async or self.strategy.cluster_resolver):
      self._stop_requested = tf.Variable(
          False, trainable=False, name="stop_requested",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      stop_signals.on_stop(self._request_stop)

  def _request_stop(self) -> None:
    """Called from `stop_signals`' watcher thread, while the loop runs."""
    self._stop_requested.assign(True)

  def create_train_loop_fn(self):
    """Orbit's `create_tf_while_loop_fn` with a stop check before each step
    (Python's signal handler cannot run inside the loop's one call)."""
    options = self._train_options
    if (self._stop_requested is None or not options.use_tf_while_loop or
        options.use_tpu_summary_optimization):
      return super().create_train_loop_fn()
    step_fn, stop = self.train_step, self._stop_requested

    def loop_fn(iterator, num_steps):
      for _ in tf.range(num_steps):
        if stop.read_value():
          break
        with tf.name_scope(""):
          step_fn(iterator)

    return tf.function(loop_fn)

  def initialize(self):
    """The checkpoint manager's `init_fn`; a non-chief worker restores the
    chief's latest checkpoint (its own manager's directory is temporary)."""
    latest = (None if self.strategy.extended.should_checkpoint else
              run_directory.newest_checkpoint(self._model_dir))
    if latest:
      logging.info("Non-chief worker: restoring the chief's %s.", latest)
      self.checkpoint.restore(latest)
      return
    super().initialize()

  def train_loop_begin(self):
    stop_signals.raise_if_stopped()
    super().train_loop_begin()
    self._loop_start_step = int(self.global_step.numpy())
    if self._input_resume_step is not None:
      if self._loop_start_step != self._input_resume_step:
        logging.warning(
            "The training input was started %d steps in (the newest "
            "checkpoint in %s) but the model restored step %d: the batches "
            "from here are not the ones an uninterrupted run reads.",
            self._input_resume_step, self._model_dir, self._loop_start_step)
      self._input_resume_step = None  # Checked once: at the first loop.
    if self._check_steps:
      # As `RecoveryCondition`: from trainer.recovery_begin_steps on.
      trainer = self.config.trainer
      self._train_loss.set_upper_bound(
          trainer.loss_upper_bound,
          max(1, trainer.recovery_begin_steps - self._loop_start_step))
    self._loop_start_time = time.time()

  def train_loop_end(self):
    """The base logs + examples_per_second; raises on a non-finite loss or
    a stop signal. Counts the loop's records in `input_records`."""
    if self._input_records is not None:
      self._input_records.assign_add(
          (int(self.global_step.numpy()) - self._loop_start_step) *
          self.config.task.train_data.global_batch_size)
    stop_signals.raise_if_stopped()
    self.join()
    end_step = int(self.global_step.numpy())
    bad = self._check_steps and self._train_loss.first_nonfinite_step()
    if bad:
      self._non_finite_loss(self._loop_start_step + bad, end_step)
    logs = super().train_loop_end()
    elapsed = time.time() - self._loop_start_time
    steps = end_step - self._loop_start_step
    if elapsed > 0 and steps > 0:
      logs["examples_per_second"] = (
          steps * self.config.task.train_data.global_batch_size / elapsed)
    return logs

  def _non_finite_loss(self, step: int, end_step: int) -> None:
    value = self._train_loss.first_nonfinite_loss()
    trials = self.config.trainer.recovery_max_trials
    what = ("became non-finite" if not math.isfinite(value) else
            "diverged (above trainer.loss_upper_bound="
            f"{self.config.trainer.loss_upper_bound:g})")
    message = (
        f"Training loss {what} ({value:g}) at step {step} (train "
        f"loop of steps {self._loop_start_step + 1}-{end_step}).")
    if trials > 0:
      logging.warning("%s trainer.recovery_max_trials=%d: Model Garden's "
                      "recovery restores the last checkpoint.", message,
                      trials)
      return
    latest = run_directory.newest_checkpoint(self._model_dir)
    raise NonFiniteLossError(
        f"{message} Training stopped; nothing from this loop was "
        f"checkpointed (latest checkpoint: {latest or 'none'}). Lower "
        "trainer.optimizer_config.learning_rate, check the input data, or "
        "set trainer.recovery_max_trials > 0 to roll back and retry.", step)
