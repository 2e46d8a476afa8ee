"""Tests for realformer_tf/training/run_plan.py: the modes and the data
configs each reads, the config's derivations (the schedule following a lone
trainer.train_steps, the quickstart's data), all on a copy, writing nothing."""

import os
import re
import tempfile

from absl.testing import parameterized
import pytest
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf import utils
from realformer_tf.configs import experiments
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.configs import squad
from realformer_tf.core import writes
from realformer_tf.data import quickstart_corpus
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from realformer_tf.training import train_lib
from tests.helpers import train_runs

_DECAY = "trainer.optimizer_config.learning_rate.polynomial.decay_steps"
_WARMUP = "trainer.optimizer_config.warmup.polynomial.warmup_steps"


def test_modes_are_model_gardens():
  assert set(run_plan.MODES) == {"train", "eval", "train_and_eval",
                                 "continuous_eval", "train_and_post_eval"}
  assert set(run_plan.TRAIN_MODES) | set(run_plan.EVAL_MODES) == set(
      run_plan.MODES)
  assert set(run_plan.TRAIN_MODES) & set(run_plan.EVAL_MODES) == {
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
    found = run_plan.data_configs(params, mode)
    assert [key for key, _ in found] == [key for key, _ in pairs], mode
    assert all(a is b for (_, a), (_, b) in zip(found, pairs)), mode
  assert run_plan.data_configs(params, "continuous_train_and_eval") == []


def test_an_unknown_mode_is_refused():
  with pytest.raises(ValueError, match="--mode='fit' is not supported by "
                     "train.py; use one of train, train_and_eval"):
    run_plan.derive(exp_factory.get_exp_config(experiments.QUICKSTART),
                    "fit", "/nonexistent")


def _flags(experiment, params_override="", config_file=None):
  return train_utils.ParseConfigOptions(
      experiment=experiment, config_file=config_file or [],
      params_override=params_override, tpu=None)


class ScheduleTest(tf.test.TestCase, parameterized.TestCase):

  def test_dotted_keys_and_last_source_wins(self):
    explicit = run_plan.explicit_keys([
        ("a.yaml", {"trainer": {"train_steps": 5, "optimizer_config": {
            "learning_rate": {"polynomial": {"decay_steps": 5}}}}}),
        ("--params_override", {"trainer": {"train_steps": 7}})])
    self.assertEqual(explicit["trainer.train_steps"], (1, "--params_override"))
    self.assertEqual(explicit[_DECAY], (0, "a.yaml"))

  @parameterized.named_parameters(
      # Quickstart: 2500 steps, warm-up 100; train_steps=300 alone.
      ("only_train_steps", {"trainer.train_steps": (0, "o")}, 300, 12),
      ("decay_set_too", {"trainer.train_steps": (0, "o"), _DECAY: (0, "o")},
       2500, 100),
      ("warmup_set_too", {"trainer.train_steps": (0, "o"), _WARMUP: (0, "o")},
       300, 100),
      ("decay_set_later", {"trainer.train_steps": (0, "a"), _DECAY: (1, "b")},
       2500, 100),
      ("nothing_set", {}, 2500, 100),
  )
  def test_follow_train_steps(self, explicit, decay, warmup):
    params = exp_factory.get_exp_config(experiments.QUICKSTART)
    if explicit:
      params.trainer.train_steps = 300
    model_dir = os.path.join(tempfile.mkdtemp(), "run")
    plan = run_plan.derive(params, "train", model_dir, explicit=explicit)
    optimizer = plan.params.trainer.optimizer_config
    self.assertEqual(optimizer.learning_rate.polynomial.decay_steps, decay)
    self.assertEqual(optimizer.warmup.polynomial.warmup_steps, warmup)
    # On a copy: the parsed config is left as it was.
    self.assertEqual(
        params.trainer.optimizer_config.learning_rate.polynomial.decay_steps,
        2500)
    self.assertFalse(os.path.exists(model_dir))

  def test_squad_train_steps_override_alone_derives(self):
    # Before: Model Garden's restriction decay_steps == train_steps failed.
    params, explicit = train_lib.parse_configuration_and_sources(
        _flags(squad.SQUAD, "trainer.train_steps=20"))
    plan = run_plan.derive(params, "train", tempfile.mkdtemp(),
                           explicit=explicit)
    optimizer = plan.params.trainer.optimizer_config
    self.assertEqual(plan.params.trainer.train_steps, 20)
    self.assertEqual(optimizer.learning_rate.polynomial.decay_steps, 20)
    # 10% warm-up kept: 821 of 8213 -> 2 of 20.
    self.assertEqual(optimizer.warmup.polynomial.warmup_steps, 2)
    self.assertIn("decay_steps: 8213 -> 20", plan.derived[0])

  def test_explicit_decay_is_kept_and_checked(self):
    params, explicit = train_lib.parse_configuration_and_sources(
        _flags(squad.SQUAD, f"trainer.train_steps=20,{_DECAY}=30"))
    plan = run_plan.derive(params, "train", tempfile.mkdtemp(),
                           explicit=explicit)
    with self.assertRaisesRegex(ValueError, "decay_steps"):
      plan_rules.check(plan, (plan_rules.derivation,))


def _quickstart():
  return train_runs.quickstart_params(16, 2, vocab_size=100)


def _quickstart_problems(params, model_dir, files=None):
  plan = run_plan.derive(params, "train", model_dir,
                         quickstart_input_files=files)
  return [str(p) for p in plan_rules.problems(plan, (plan_rules.derivation,))]


def test_other_experiments_build_nothing():
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  assert run_plan.derive(params, "train", "/nonexistent").quickstart is None
  assert _quickstart_problems(params, "/nonexistent", ["a.txt"]) == [
      "--quickstart_input_files only applies to --experiment="
      "realformer/quickstart, not to task.name='realformer/pretraining'."]


def test_one_input_path_or_two_lengths_are_refused(tmp_path):
  params = _quickstart()
  params.task.train_data.input_path = "x.tfrecord"
  [problem] = _quickstart_problems(params, str(tmp_path))
  assert "set both task.train_data.input_path" in problem
  params = _quickstart()
  params.task.validation_data.seq_length = 32
  [problem] = _quickstart_problems(params, str(tmp_path))
  assert ("task.train_data.seq_length=16 != task.validation_data."
          "seq_length=32") in problem
  assert not os.listdir(tmp_path)


def test_quickstart_plan_writes_nothing_then_cached_once_built(tmp_path):
  corpus = train_runs.write_corpus(tmp_path / "text.txt")
  model_dir = str(tmp_path / "run")
  params = _quickstart()
  plan = run_plan.derive(params, "train", model_dir,
                         quickstart_input_files=[corpus])
  assert plan.builds and not os.path.exists(model_dir)
  assert not plan.splits and plan.params.task.vocab_file == ""
  key = plan.quickstart.key
  quickstart_corpus.prepare_quickstart_data(
      plan.quickstart.data_dir, input_files=[corpus],
      vocab_size=key["vocab_size"], max_seq_length=key["max_seq_length"],
      max_predictions_per_seq=key["max_predictions_per_seq"],
      dupe_factor=key["dupe_factor"])
  again = run_plan.derive(params, "train", model_dir,
                          quickstart_input_files=[corpus])
  vocab = os.path.join(model_dir, "data", "vocab.txt")
  with open(vocab) as f:
    size = len(f.read().splitlines())
  assert not again.builds and again.params.task.vocab_file == vocab
  assert again.params.task.model.encoder.any.vocab_size == size
  assert params.task.vocab_file == ""  # The parsed config is unchanged.
  assert [split.key for split in again.splits] == ["task.train_data"]
  assert len(again.splits[0].files) == 1 and not again.splits[0].problems
  assert [(v.key, v.path, len(v.tokens)) for v in again.vocabs] == [
      ("task.vocab_file", vocab, size)]
  text = run_plan.describe(again)
  assert f"task.train_data: 1 file(s) ({again.splits[0].files[0]})" in text
  assert f"task.vocab_file: {vocab} ({size} tokens, sha256 " in text
  assert "resumes: nothing (a new run)" in text


def test_a_users_files_at_train_pys_paths_are_refused_ours_are_not(tmp_path):
  """Issue 46 item 3: params.yaml (ours by its first line), final_eval.json
  and data_scan.json (ours by our writer key) and a SQuAD task's predictions
  (by their manifest): a user's file of one of these names is named by the
  plan's refusal, and not read as a run's; our own are replaced."""
  params = exp_factory.get_exp_config(experiments.QUICKSTART)
  model_dir = str(tmp_path)
  names = ("params.yaml", run_plan.FINAL_EVAL_FILE, run_plan.DATA_SCAN_FILE)
  for name in names:
    (tmp_path / name).write_text("{}\n")
  plan = run_plan.derive(params, "train", model_dir)
  assert plan.foreign == tuple(str(tmp_path / name) for name in names)
  assert plan.previous is None and not plan.problems
  with pytest.raises(FileExistsError, match="^" + re.escape(
      f"{', '.join(plan.foreign)} exist and no manifest of realformer_tf "
      "lists them (not written by us), so nothing was written: move them "
      "away, or write elsewhere.") + "$"):
    plan_rules.check(plan)
  assert run_plan.foreign_outputs(params, "eval", model_dir) == ()
  with pytest.raises(FileExistsError, match="params.yaml exists and no "):
    train_lib.write_params_yaml(params, model_dir)  # The writer refuses too.
  os.remove(tmp_path / "params.yaml")
  for _ in range(2):  # Ours, replaced.
    train_lib.write_params_yaml(params, model_dir)
  for name in names[1:]:
    os.remove(tmp_path / name)
    writes.publish_json(str(tmp_path / name), {"step": 1}, train_lib.WRITER,
                        utils.GFILE_OPS)
  assert run_plan.derive(params, "train", model_dir).foreign == ()
  # SQuAD: predictions.json beside no manifest of ours.
  squad_params = exp_factory.get_exp_config(squad.SQUAD)
  squad_params.task.predictions_dir = str(tmp_path / "predictions")
  os.makedirs(squad_params.task.predictions_dir)
  predictions = tmp_path / "predictions" / "predictions.json"
  predictions.write_text("{}")
  assert run_plan.foreign_outputs(squad_params, "eval", model_dir) == (
      str(predictions),)
  squad_params.task.predictions_dir = ""  # The model dir: nothing there.
  assert run_plan.foreign_outputs(squad_params, "eval", model_dir) == ()
