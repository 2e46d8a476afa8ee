"""Tests for realformer_tf/configs/registry.py: every experiment registered
under its own name, the task's encoder found (a run's params.yaml is read
back by checkpoints/run_directory.py)."""

import pytest

from official.core import exp_factory
from realformer_tf.configs import experiments
from realformer_tf.configs import registry


@pytest.mark.parametrize("name", registry.EXPERIMENTS)
def test_each_experiment_records_its_own_name(name):
  assert exp_factory.get_exp_config(name).task.name == name


def test_task_encoder():
  config = experiments.realformer_quickstart()
  key, encoder = registry.task_encoder(config)
  assert key == "task.model.encoder.any"
  assert encoder is config.task.model.encoder.any
  translation = exp_factory.get_exp_config("realformer/translation")
  assert registry.task_encoder(translation) == (
      "task.model.encoder", translation.task.model.encoder)
