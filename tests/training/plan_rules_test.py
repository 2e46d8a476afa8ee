"""Tests for realformer_tf/training/plan_rules.py (and the checkpoint facts
of plan_facts.py): rules over hand-built plans, all run, one refusal listing
every problem; the word embedding's rows found in each kind of checkpoint,
and a vocabulary of another size refused."""

import json
import os
import re

import pytest
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import exp_factory
from realformer_tf.checkpoints import errors
from realformer_tf.configs import experiments
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import tokenization
from realformer_tf.training import plan_facts
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from tests.helpers import train_runs as utils


def _fit(vocab_file, vocab_key, checkpoint, checkpoint_key, trained=None):
  reader = plan_facts.Reader()
  return plan_rules.vocab_fit_problem(
      reader.vocab(vocab_key, vocab_file), checkpoint, checkpoint_key,
      reader.embedding(checkpoint), trained)


def _plan(mode="train", **facts):
  """A hand-built plan of the quickstart's config: no file behind it."""
  params = exp_factory.get_exp_config(experiments.QUICKSTART)
  fields = dict(params=params, mode=mode, model_dir="/runs/x",
                num_replicas=1, splits=(), vocabs=(), init=None, resume=None,
                previous=None, quickstart=None,
                derived=(), problems=())
  fields.update(facts)
  return run_plan.RunPlan(**fields)


def test_a_lone_problem_is_raised_as_it_is():
  mismatch = errors.CheckpointMismatchError("does not fit")
  init = plan_facts.InitRun("/runs/pre", None, None, None, problem=mismatch)
  with pytest.raises(errors.CheckpointMismatchError) as e:
    plan_rules.check(_plan(init=init))
  assert e.value is mismatch
  split = plan_facts.Split("task.train_data", None, "a.tfrecord",
                           problems=("task.train_data.input_path matches no "
                                     "file: a.tfrecord",))
  with pytest.raises(ValueError) as e:
    plan_rules.check(_plan(splits=(split,)))
  assert str(e.value) == ("task.train_data.input_path matches no file: "
                          "a.tfrecord")
  plan_rules.check(_plan())  # A plan without problems passes.


def test_every_rule_runs_and_one_refusal_lists_every_problem():
  params = exp_factory.get_exp_config(experiments.QUICKSTART)
  params.trainer.train_steps = -1
  split = plan_facts.Split("task.train_data", None, "a.tfrecord",
                           problems=("first problem", "second problem"))
  vocab = plan_facts.Vocab("task.vocab_file", "v.txt", problem="bad vocab")
  plan = _plan(mode="eval", params=params, splits=(split,), vocabs=(vocab,))
  with pytest.raises(ValueError) as e:
    plan_rules.check(plan)
  lines = str(e.value).split("\n")
  assert lines[0] == "4 problems; nothing was run or written:"
  assert lines[1:4] == ["- first problem", "- second problem", "- bad vocab"]
  assert lines[4].startswith("- --mode=eval: no checkpoint in --model_dir="
                             "'/runs/x'")
  # The value rules run on evaluation keys only: train_steps is not one.
  plan = _plan(params=params)
  assert [str(p) for p in plan_rules.problems(plan, (plan_rules.values,))] == [
      "Config values out of range: trainer.train_steps=-1 must be positive "
      "to train."]


def test_records_of_another_vocabulary_than_the_init_runs():
  run_vocab = plan_facts.Vocab("run", "/pre/vocab.txt", ("[PAD]",) * 10,
                               "a" * 64)
  init = plan_facts.InitRun("/pre", None, run_vocab, None)
  meta = ("/glue/mrpc_meta_data.json",
          {"vocab_sha256": "b" * 64, "vocab_file": "/other.txt",
           "vocab_size": 12})
  split = plan_facts.Split("task.train_data", None, "/glue/t.tf_record",
                           files=("/glue/t.tf_record",),
                           meta=(("/glue/t.tf_record", meta),))
  [problem] = plan_rules.problems(_plan(init=init, splits=(split,)),
                                  (plan_rules.records_vocabulary,))
  assert problem == (
      "task.train_data.input_path: '/glue/t.tf_record' was converted with "
      "vocabulary /other.txt (12 tokens, sha256 bbbbbbbbbbbb) (see "
      "/glue/mrpc_meta_data.json), but task.init_checkpoint='/pre' was "
      "trained with /pre/vocab.txt (10 tokens, sha256 aaaaaaaaaaaa): convert "
      "the data again with --vocab_file=/pre/vocab.txt.")


def _save(path, **variables):
  checkpoint = tf.train.Checkpoint(**variables)
  return checkpoint.write(path)


def test_rows_of_an_encoder_checkpoint(tmp_path):
  encoder = tf.Module()
  encoder._embedding_layer = tf.Module()  # pylint: disable=protected-access
  encoder._embedding_layer.embeddings = tf.Variable(tf.zeros([30, 4]))  # pylint: disable=protected-access
  encoder._position_embedding_layer = tf.Module()  # pylint: disable=protected-access
  encoder._position_embedding_layer.embeddings = tf.Variable(  # pylint: disable=protected-access
      tf.zeros([16, 4]))
  prefix = _save(str(tmp_path / "ckpt-1"), encoder=encoder)
  assert plan_facts.Reader().embedding(prefix) == (
      prefix, 30,
      "encoder/_embedding_layer/embeddings/.ATTRIBUTES/VARIABLE_VALUE")


def test_rows_of_a_pretraining_checkpoint(tmp_path):
  # The MLM head's tied table: the shared variable is saved under it only.
  head = tf.Module()
  head.embedding_table = tf.Variable(tf.zeros([65, 4]))
  prefix = _save(str(tmp_path / "ckpt-4"), masked_lm=head)
  assert plan_facts.Reader().embedding(prefix)[1:] == (
      65, "masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE")


def test_rows_of_a_tf1_checkpoint(tmp_path):
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("bert/embeddings/word_embeddings", [40, 4])
    tf.compat.v1.get_variable("bert/embeddings/position_embeddings", [8, 4])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(session, str(tmp_path / "model.ckpt"))
  assert plan_facts.Reader().embedding(prefix)[1:] == (
      40, "bert/embeddings/word_embeddings")


def test_vocabulary_of_another_size_is_refused(tmp_path):
  head = tf.Module()
  head.embedding_table = tf.Variable(tf.zeros([utils.TINY_VOCAB_SIZE, 4]))
  prefix = _save(str(tmp_path / "ckpt-4"), masked_lm=head)
  fits = utils.write_vocab(str(tmp_path / "fits.txt"))
  assert _fit(fits, "task.vocab_file", prefix, "task.init_checkpoint") is None
  small = utils.write_vocab(str(tmp_path / "small.txt"), size=40)
  problem = _fit(small, "task.vocab_file", prefix, "task.init_checkpoint")
  assert (f"task.vocab_file={small!r} has 40 tokens, but the word embedding "
          f"of task.init_checkpoint={prefix!r} ({prefix}: masked_lm/"
          f"embedding_table/.ATTRIBUTES/VARIABLE_VALUE) has "
          f"{utils.TINY_VOCAB_SIZE} rows") in problem


def test_padded_embedding_fits_its_own_vocabulary_only(tmp_path):
  """Issue 39: vocab_size above the vocabulary (padded) trains, so export
  and fine-tuning accept it with the vocabulary it was trained with; a
  smaller vocabulary of other bytes, or a larger one, is still refused."""
  head = tf.Module()
  head.embedding_table = tf.Variable(tf.zeros([utils.TINY_VOCAB_SIZE + 24,
                                               4]))
  prefix = _save(str(tmp_path / "ckpt-4"), masked_lm=head)
  own = utils.write_vocab(str(tmp_path / "own.txt"))
  # What the converter recorded when the training records were written.
  trained = tokenization.vocab_meta(own)["vocab_sha256"]
  assert _fit(own, "--vocab_file", prefix, "--model_dir", trained) is None
  other = utils.write_vocab(str(tmp_path / "other.txt"), size=40)
  for vocab, trained_sha256 in ((other, trained), (own, None)):
    assert re.search(r"has \d+ tokens, but the word embedding", _fit(
        vocab, "--vocab_file", prefix, "--model_dir", trained_sha256))
  # A run whose records' meta data names `own`: its trained vocabulary.
  config = cfg.ExperimentConfig(task=cfg.TaskConfig(
      train_data=cfg.DataConfig(input_path=str(tmp_path / "t.tf_record"))))
  (tmp_path / "t.tf_record").write_bytes(b"")
  (tmp_path / "mrpc_meta_data.json").write_text(json.dumps(dict(
      tokenization.vocab_meta(own), splits={"train": {
          "file": "t.tf_record"}})))
  assert plan_facts.Reader().trained_vocab_sha256(config) == trained


def test_a_checkpoint_without_a_known_embedding_is_not_compared(tmp_path):
  prefix = _save(str(tmp_path / "ckpt-1"), v=tf.Variable(tf.zeros([3, 3])))
  assert plan_facts.Reader().embedding(prefix) is None
  assert _fit(utils.write_vocab(str(tmp_path / "v.txt")), "task.vocab_file",
              prefix, "task.init_checkpoint") is None
  assert os.path.exists(prefix + ".index")
