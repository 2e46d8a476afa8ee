"""Tests for realformer_tf/configs/registry.py: every experiment registered
under its own name, a run's params.yaml rebuilt, the task's encoder found."""

import pytest

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.configs import registry


@pytest.mark.parametrize("name", registry.EXPERIMENTS)
def test_each_experiment_records_its_own_name(name):
  assert exp_factory.get_exp_config(name).task.name == name


def test_params_yaml_rebuilds_the_config(tmp_path):
  config = experiments.realformer_quickstart()
  config.override({"task": {"model": {"encoder": {"any": {
      "residual_attention": "mean", "num_layers": 3}}}}})
  train_utils.serialize_config(config, str(tmp_path))
  rebuilt = registry.load_experiment_config(str(tmp_path))
  assert rebuilt.as_dict() == config.as_dict()
  # The factory's classes, not plain YAML: the encoder keeps its builder.
  assert isinstance(rebuilt.task.model.encoder.get(),
                    encoders.RealFormerEncoderConfig)


def test_missing_or_anonymous_params_yaml_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=str(tmp_path / "params.yaml")):
    registry.load_experiment_config(str(tmp_path))
  (tmp_path / "params.yaml").write_text("task:\n  vocab_file: ''\n")
  with pytest.raises(ValueError, match="has no task.name"):
    registry.load_experiment_config(str(tmp_path))


def test_task_encoder():
  config = experiments.realformer_quickstart()
  key, encoder = registry.task_encoder(config)
  assert key == "task.model.encoder.any"
  assert encoder is config.task.model.encoder.any
  translation = exp_factory.get_exp_config("realformer/translation")
  assert registry.task_encoder(translation) == (
      "task.model.encoder", translation.task.model.encoder)
