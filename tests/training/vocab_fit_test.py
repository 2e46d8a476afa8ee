"""Tests for realformer_tf/training/vocab_fit.py: the word embedding's rows
found in each kind of checkpoint, and a vocabulary of another size refused."""

import json
import os

import pytest
import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf.data import tokenization
from realformer_tf.training import vocab_fit
from tests.helpers import train_runs as utils


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
  assert vocab_fit.embedding_rows(prefix) == (
      prefix, 30,
      "encoder/_embedding_layer/embeddings/.ATTRIBUTES/VARIABLE_VALUE")


def test_rows_of_a_pretraining_checkpoint(tmp_path):
  # The MLM head's tied table: the shared variable is saved under it only.
  head = tf.Module()
  head.embedding_table = tf.Variable(tf.zeros([65, 4]))
  prefix = _save(str(tmp_path / "ckpt-4"), masked_lm=head)
  assert vocab_fit.embedding_rows(prefix)[1:] == (
      65, "masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE")


def test_rows_of_a_tf1_checkpoint(tmp_path):
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("bert/embeddings/word_embeddings", [40, 4])
    tf.compat.v1.get_variable("bert/embeddings/position_embeddings", [8, 4])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(session, str(tmp_path / "model.ckpt"))
  assert vocab_fit.embedding_rows(prefix)[1:] == (
      40, "bert/embeddings/word_embeddings")


def test_vocabulary_of_another_size_is_refused(tmp_path):
  head = tf.Module()
  head.embedding_table = tf.Variable(tf.zeros([utils.TINY_VOCAB_SIZE, 4]))
  prefix = _save(str(tmp_path / "ckpt-4"), masked_lm=head)
  fits = utils.write_vocab(str(tmp_path / "fits.txt"))
  vocab_fit.check_vocab_fits(fits, "task.vocab_file", prefix,
                             "task.init_checkpoint")
  small = utils.write_vocab(str(tmp_path / "small.txt"), size=40)
  with pytest.raises(ValueError) as e:
    vocab_fit.check_vocab_fits(small, "task.vocab_file", prefix,
                               "task.init_checkpoint")
  assert (f"task.vocab_file={small!r} has 40 tokens, but the word embedding "
          f"of task.init_checkpoint={prefix!r} ({prefix}: masked_lm/"
          f"embedding_table/.ATTRIBUTES/VARIABLE_VALUE) has "
          f"{utils.TINY_VOCAB_SIZE} rows") in str(e.value)


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
  vocab_fit.check_vocab_fits(own, "--vocab_file", prefix, "--model_dir",
                             trained_sha256=trained)
  other = utils.write_vocab(str(tmp_path / "other.txt"), size=40)
  for vocab, trained_sha256 in ((other, trained), (own, None)):
    with pytest.raises(ValueError, match=r"has \d+ tokens, but the word "
                       r"embedding"):
      vocab_fit.check_vocab_fits(vocab, "--vocab_file", prefix,
                                 "--model_dir", trained_sha256=trained_sha256)
  # A run whose records' meta data names `own`: its trained vocabulary.
  config = cfg.ExperimentConfig(task=cfg.TaskConfig(
      train_data=cfg.DataConfig(input_path=str(tmp_path / "t.tf_record"))))
  (tmp_path / "t.tf_record").write_bytes(b"")
  (tmp_path / "mrpc_meta_data.json").write_text(json.dumps(dict(
      tokenization.vocab_meta(own), splits={"train": {
          "file": "t.tf_record"}})))
  assert vocab_fit.trained_vocab_sha256(config) == trained


def test_a_checkpoint_without_a_known_embedding_is_not_compared(tmp_path):
  prefix = _save(str(tmp_path / "ckpt-1"), v=tf.Variable(tf.zeros([3, 3])))
  assert vocab_fit.embedding_rows(prefix) is None
  vocab_fit.check_vocab_fits(
      utils.write_vocab(str(tmp_path / "v.txt")), "task.vocab_file", prefix,
      "task.init_checkpoint")
  assert os.path.exists(prefix + ".index")
