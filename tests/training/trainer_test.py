"""Tests for realformer_tf/training/trainer.py: a NaN or diverged loss stops
the run naming its step, before anything from the loop is checkpointed."""

import os

import pytest
import tensorflow as tf

from realformer_tf.training import trainer as trainer_lib
from tests.helpers import train_runs as utils


def test_nan_loss_stops_the_run_naming_the_step(tmp_path):
  # Batch 8 in file order (shuffle buffer 1): example 19 is in step 3.
  run = utils.make_tiny_run(tmp_path, poison_index=19, train_steps=6,
                            steps_per_loop=2, checkpoint_interval=2)
  model_dir = tmp_path / "model"
  with pytest.raises(trainer_lib.NonFiniteLossError) as e:
    utils.run_in_process(model_dir, [run["config_file"]])
  assert e.value.step == 3
  message = str(e.value)
  assert "non-finite (nan) at step 3" in message
  assert "steps 3-4" in message
  assert f"latest checkpoint: {model_dir}/ckpt-2" in message
  # Nothing after the NaN was saved.
  assert [os.path.basename(p) for p in
          utils.list_checkpoints(str(model_dir))] == ["ckpt-2"]


def test_finite_divergence_stops_the_run_naming_the_step(tmp_path):
  # Loss ~4.8 (MLM over 64 tokens + NSP) > the bound from step 3 on.
  run = utils.make_tiny_run(tmp_path, train_steps=6, steps_per_loop=2,
                            checkpoint_interval=2)
  model_dir = tmp_path / "model"
  with pytest.raises(trainer_lib.NonFiniteLossError) as e:
    utils.run_in_process(model_dir, [run["config_file"]], params_override=(
        "trainer.loss_upper_bound=1.0,trainer.recovery_begin_steps=3"))
  assert e.value.step == 3
  message = str(e.value)
  assert "diverged (above trainer.loss_upper_bound=1)" in message, message
  assert "at step 3 (train loop of steps 3-4)" in message
  assert f"latest checkpoint: {model_dir}/ckpt-2" in message
  assert [os.path.basename(p) for p in
          utils.list_checkpoints(str(model_dir))] == ["ckpt-2"]


def test_loss_tracking_flags_the_first_step_above_the_bound():
  metric = trainer_lib.LossMeanWithNonFiniteTracking(upper_bound=1e6)
  for value in (3.0, 2e6, float("nan"), 4.0):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 2
  assert metric.first_nonfinite_loss() == 2e6
  metric.reset_state()
  metric.set_upper_bound(float("inf"))
  for value in (3.0, 2e6, float("inf")):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 3
  metric.reset_state()
  metric.set_upper_bound(1e6, first_step=3)  # Before it: not bounded.
  for value in (2e6, 3.0, 5e6):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 3
