"""Tests for realformer_tf/training/modes.py: train.py's modes and the data
configs each reads."""

from official.core import exp_factory
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.training import modes


def test_modes_are_model_gardens():
  assert set(modes.MODES) == {"train", "eval", "train_and_eval",
                              "continuous_eval", "train_and_post_eval"}
  assert set(modes.TRAIN_MODES) | set(modes.EVAL_MODES) == set(modes.MODES)
  assert set(modes.TRAIN_MODES) & set(modes.EVAL_MODES) == {
      "train_and_eval", "train_and_post_eval"}


def test_data_configs_read_by_each_mode():
  params = exp_factory.get_exp_config("realformer/quickstart")
  train, evaluation = params.task.train_data, params.task.validation_data
  expected = {
      "train": [("task.train_data", train)],
      "eval": [("task.validation_data", evaluation)],
      "continuous_eval": [("task.validation_data", evaluation)],
      "train_and_eval": [("task.train_data", train),
                         ("task.validation_data", evaluation)],
      "train_and_post_eval": [("task.train_data", train),
                              ("task.validation_data", evaluation)],
  }
  for mode, pairs in expected.items():
    found = modes.data_configs(params, mode)
    assert [key for key, _ in found] == [key for key, _ in pairs], mode
    assert all(a is b for (_, a), (_, b) in zip(found, pairs)), mode
  assert modes.data_configs(params, "continuous_train_and_eval") == []
