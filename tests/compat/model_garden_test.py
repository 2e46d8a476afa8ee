"""Upstream Model Garden defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once Model Garden fixes it:
then the workaround named in its docstring can go.
"""

import os
import random
import tempfile
import types

import orbit
import tensorflow as tf
import tf_keras

from official.core import actions
from official.core import input_reader
from official.core import train_lib
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
  assert not scaled, ("upstream scales the loss: delete "
                      "tasks.masked_lm.MaskedLMTask.train_step")


def test_sharded_workers_shuffle_the_files_with_seeds_of_their_own():
  """`compat.model_garden.with_shared_seed`: without `seed`, each worker
  draws one (`random`), so the workers' shards overlap and files go unread."""
  files = [f"file{i}".encode() for i in range(8)]
  read, state = set(), random.getstate()
  try:
    for worker in (0, 1):
      random.seed(worker + 1)  # Two processes, two Python random states.
      dataset = input_reader._shard_files_then_read(  # pylint: disable=protected-access
          files, tf.data.Dataset.from_tensors,
          tf.distribute.InputContext(num_input_pipelines=2,
                                     input_pipeline_id=worker),
          seed=None, is_training=True, sharding=True)
      read.update(dataset.take(4).as_numpy_iterator())
  finally:
    random.setstate(state)
  assert read <= set(files), read
  assert len(read) < len(files), (
      "upstream fixed the per-worker file seed: delete "
      "compat.model_garden.with_shared_seed")


def test_the_preemption_checkpoint_keeps_the_run_training(monkeypatch):
  """`compat.model_garden.set_preemption_exit`
  (`multi_worker.stop_after_preemption_checkpoint`)."""
  built = []
  monkeypatch.setattr(orbit.actions, "SaveCheckpointIfPreempted",
                      lambda *args, **kwargs: built.append(kwargs))
  params = types.SimpleNamespace(task=None, trainer=types.SimpleNamespace(
      recovery_max_trials=-1, preemption_on_demand_checkpoint=True))
  trainer = types.SimpleNamespace(
      global_step=None,
      strategy=types.SimpleNamespace(cluster_resolver=object()))
  actions.get_train_actions(params, trainer, "", None)
  assert built == [{"keep_running_after_save": True}], (
      "upstream fixed keep_running_after_save: delete "
      "compat.model_garden.set_preemption_exit")


def test_a_worker_checkpoints_to_a_fresh_temporary_folder_it_leaves():
  """`multi_worker.remove_worker_checkpoints` (the folder is left) and
  `align_checkpoint_interval` (no checkpoint there to count from)."""
  runner = types.SimpleNamespace(
      trainer=types.SimpleNamespace(
          checkpoint=tf.train.Checkpoint(), global_step=tf.Variable(0),
          initialize=None),
      model_dir="unused", params=types.SimpleNamespace(
          trainer=types.SimpleNamespace(checkpoint_interval=1)),
      strategy=types.SimpleNamespace(
          extended=types.SimpleNamespace(should_checkpoint=False)))
  manager = train_lib.OrbitExperimentRunner._maybe_build_checkpoint_manager(  # pylint: disable=protected-access
      runner)
  try:
    assert os.path.dirname(manager.directory) == tempfile.gettempdir(), (
        "upstream moved a worker's checkpoints: review "
        "multi_worker.remove_worker_checkpoints")
    assert manager.latest_checkpoint is None
  finally:
    os.rmdir(manager.directory)
