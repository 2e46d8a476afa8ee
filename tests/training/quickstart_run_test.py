"""Tests for realformer_tf/training/quickstart_run.py: the quickstart's data
planned without writing (a run's own data: tests/training/preflight_test)."""

import os

import pytest

from official.core import exp_factory
from realformer_tf.configs import experiments
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.training import quickstart_run
from tests.helpers import train_runs


def _quickstart():
  return train_runs.quickstart_params(16, 2, vocab_size=100)


def test_other_experiments_build_nothing():
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  assert quickstart_run.plan(params, "/nonexistent", None) is None
  with pytest.raises(ValueError, match="--quickstart_input_files only "
                     "applies to --experiment=realformer/quickstart"):
    quickstart_run.plan(params, "/nonexistent", None, ["a.txt"])


def test_one_input_path_or_two_lengths_are_refused(tmp_path):
  params = _quickstart()
  params.task.train_data.input_path = "x.tfrecord"
  with pytest.raises(ValueError, match="set both task.train_data.input_path"):
    quickstart_run.plan(params, str(tmp_path), None)
  params = _quickstart()
  params.task.validation_data.seq_length = 32
  with pytest.raises(ValueError, match=r"task.train_data.seq_length=16 != "
                     r"task.validation_data.seq_length=32"):
    quickstart_run.plan(params, str(tmp_path), None)
  assert not os.listdir(tmp_path)


def test_plan_writes_nothing_then_build_then_cached(tmp_path):
  corpus = train_runs.write_corpus(tmp_path / "text.txt")
  model_dir = str(tmp_path / "run")
  params = _quickstart()
  plan = quickstart_run.plan(params, model_dir, None, [corpus])
  assert not plan.cached and not os.path.exists(model_dir)
  assert params.task.vocab_file == ""
  quickstart_run.build(params, plan)
  vocab = os.path.join(model_dir, "data", "vocab.txt")
  assert params.task.vocab_file == vocab
  with open(vocab) as f:
    size = len(f.read().splitlines())
  assert params.task.model.encoder.any.vocab_size == size
  again = _quickstart()
  assert quickstart_run.plan(again, model_dir, None, [corpus]).cached
  assert again.task.vocab_file == vocab
  assert again.task.model.encoder.any.vocab_size == size
