"""Tests for realformer_tf/training/run_dirs.py: a run directory's files."""

import os

import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.training import run_dirs


def test_a_run_is_found_from_its_dir_or_a_checkpoint_in_it(tmp_path):
  run = str(tmp_path / "run")
  assert run_dirs.latest_checkpoint(run) is None
  assert run_dirs.run_of(run) == (None, None)
  params = exp_factory.get_exp_config(experiments.QUICKSTART)
  os.makedirs(run)
  train_utils.serialize_config(params, run)
  prefix = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.0)), run, max_to_keep=1).save(
          checkpoint_number=3)
  assert run_dirs.latest_checkpoint(run) == prefix
  assert run_dirs.has_params(run)
  for name in (run, run + "/", prefix):
    found, config = run_dirs.run_of(name)
    assert os.path.normpath(found) == run
    assert config.task.name == experiments.QUICKSTART
  assert run_dirs.run_of(str(tmp_path)) == (None, None)
  assert run_dirs.quickstart_data_dir(run) == os.path.join(run, "data")
