"""Tests for realformer_tf/training/input_checks.py, as a run plan's data
rules use them: record kinds and token ids of GLUE/SQuAD/pre-training
records, unreadable files.

(The pre-training input checks are also exercised end to end, through
train_lib, in tests/training/train_lib_test.py.)"""

import logging
import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from tests.helpers import train_runs as utils

SEQ = 16
VOCAB = 64


def _check(params, mode, rules=(plan_rules.data_sets,)):
  """The plan's data-set and vocabulary rules (or `rules`)."""
  plan_rules.check(run_plan.derive(params, mode, tempfile.mkdtemp()), rules)


def _int(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _write(path, examples):
  with tf.io.TFRecordWriter(str(path)) as writer:
    for features in examples:
      writer.write(tf.train.Example(features=tf.train.Features(
          feature={k: _int(v) for k, v in features.items()}))
                   .SerializeToString())
  return str(path)


def _pair_examples(n, max_id=VOCAB - 1, squad=False, seed=0):
  """GLUE (or SQuAD train) records; the last one holds id `max_id`."""
  rng = np.random.RandomState(seed)
  examples = []
  for i in range(n):
    ids = [2] + list(rng.randint(5, VOCAB, SEQ - 2)) + [3]
    if i == n - 1:
      ids[1] = max_id
    features = {"input_ids": ids, "input_mask": [1] * SEQ,
                "segment_ids": [0] * SEQ}
    if squad:
      features.update(start_positions=[1], end_positions=[2])
    else:
      features.update(label_ids=[i % 2], example_id=[i])
    examples.append(features)
  return examples


def _config(name, train_path, seq=SEQ, vocab_size=VOCAB):
  params = exp_factory.get_exp_config(name)
  params.override({
      "task": {"model": {"encoder": {"any": {
          "vocab_size": vocab_size, "max_position_embeddings": 32}}},
               "train_data": {"input_path": train_path, "seq_length": seq}},
      "trainer": {"train_steps": 4, "optimizer_config": {
          "learning_rate": {"polynomial": {"decay_steps": 4}}}},
  })
  return params


EXPERIMENTS = [("glue", "realformer/glue", False),
               ("squad", "realformer/squad", True)]


@pytest.mark.parametrize("name,experiment,squad", EXPERIMENTS)
def test_finetuning_records_pass(tmp_path, name, experiment, squad):
  del name
  path = _write(tmp_path / "train.tf_record", _pair_examples(5, squad=squad))
  _check(_config(experiment, path), "train")


@pytest.mark.parametrize("name,experiment,squad", EXPERIMENTS)
def test_token_id_beyond_vocab_in_a_later_record(tmp_path, name, experiment,
                                                 squad):
  del name
  good = _write(tmp_path / "a.tf_record", _pair_examples(3, squad=squad))
  bad = _write(tmp_path / "b.tf_record",
               _pair_examples(5, max_id=3892, squad=squad))
  with pytest.raises(ValueError) as e:
    _check(_config(experiment, f"{good},{bad}"),
                                   "train")
  message = str(e.value)
  for fragment in ("task.model.encoder.any.vocab_size=64", bad,
                   "token id 3892", "'input_ids'", "another vocabulary"):
    assert fragment in message, message


@pytest.mark.parametrize("name,experiment,squad", EXPERIMENTS)
def test_pretraining_records_given_to_finetuning(tmp_path, name, experiment,
                                                 squad):
  del name
  path = utils.write_pretraining_records(str(tmp_path / "pretrain.tfrecord"),
                                         4)
  with pytest.raises(ValueError) as e:
    _check(_config(experiment, path), "train")
  message = str(e.value)
  assert path in message and "task.train_data.input_path" in message
  missing = "start_positions" if squad else "label_ids"
  assert f"no '{missing}' feature" in message, message
  what = "SQuAD training records" if squad else "GLUE sentence-pair records"
  assert f"Expected {what}" in message, message


@pytest.mark.parametrize("name,experiment,squad", EXPERIMENTS)
def test_records_of_another_seq_length(tmp_path, name, experiment, squad):
  del name
  path = _write(tmp_path / "train.tf_record", _pair_examples(2, squad=squad))
  with pytest.raises(ValueError, match=r"task.train_data.seq_length=32, but "
                     r"the records in .*'input_ids' of length 16"):
    _check(_config(experiment, path, seq=32),
                                   "train")


def test_glue_records_given_to_pretraining(tmp_path):
  path = _write(tmp_path / "glue.tf_record", _pair_examples(2))
  params = exp_factory.get_exp_config("realformer/pretraining")
  params.override({"task": {"train_data": {"input_path": path}},
                   "trainer": {"optimizer_config": {"learning_rate": {
                       "polynomial": {"decay_steps": 1000000}}}}})
  with pytest.raises(ValueError) as e:
    _check(params, "train")
  assert "no 'masked_lm_positions' feature" in str(e.value)
  assert "Expected BERT pre-training records" in str(e.value)


def test_truncated_record_file_is_named(tmp_path):
  path = _write(tmp_path / "train.tf_record", _pair_examples(50))
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:-10])
  with pytest.raises(ValueError) as e:
    _check(_config("realformer/glue", path), "train")
  assert f"{path!r} cannot be read to the end" in str(e.value)
  assert "truncated or corrupt" in str(e.value)


def _run_with_vocab(run_dir, vocab_size):
  """A train.py run directory's params.yaml recording a vocabulary of
  `vocab_size` tokens (what `check_records_vocabulary` reads)."""
  os.makedirs(run_dir)
  vocab = utils.write_vocab(os.path.join(run_dir, "vocab.txt"), vocab_size)
  params = exp_factory.get_exp_config("realformer/pretraining")
  params.override({"task": {"vocab_file": vocab}})
  train_utils.serialize_config(params, run_dir)
  return vocab


def test_records_without_meta_data_are_checked_as_far_as_possible(tmp_path,
                                                                  caplog):
  """38.6: MRPC records copied without mrpc_meta_data.json, fine-tuned from
  a run of a 48-token vocabulary: ids within it give a warning that the
  vocabulary could not be verified (naming the files and the run's
  vocabulary); an id past it is refused, naming the id and the fix."""
  run_dir = str(tmp_path / "pretrain")
  vocab = _run_with_vocab(run_dir, 48)
  fits = _write(tmp_path / "mrpc_train.tf_record",
                [dict(example, input_ids=[2, 40] + [7] * (SEQ - 3) + [3])
                 for example in _pair_examples(3)])
  params = _config("realformer/glue", fits)
  params.task.init_checkpoint = run_dir
  with caplog.at_level(logging.WARNING):
    _check(params, "train", (plan_rules.records_vocabulary,))
  assert re.search(
      rf"task.train_data.input_path: {re.escape(fits)} has no converter "
      rf"meta data .* could not be verified against {re.escape(vocab)} \(48 "
      r"tokens\).*largest token id is 40, which fits", caplog.text)
  (tmp_path / "past").mkdir()
  # The id past the vocabulary in record 1200: every record is read.
  past = _write(tmp_path / "past" / "mrpc_train.tf_record",
                [dict(example, input_ids=[2, 40] + [7] * (SEQ - 3) + [3])
                 for example in _pair_examples(1199)] +
                _pair_examples(1, max_id=VOCAB - 1))
  params.task.train_data.input_path = past
  with pytest.raises(ValueError, match=(
      rf"{re.escape(past)}' holds token id {VOCAB - 1} \(the largest in its "
      rf"records\), but task.init_checkpoint=.*pretrain' was trained with "
      rf"{re.escape(vocab)} \(48 tokens.*--vocab_file=")):
    _check(params, "train", (plan_rules.records_vocabulary,))


def _pretraining_params(input_path):
  params = exp_factory.get_exp_config("realformer/pretraining")
  params.override(utils.tiny_overrides(input_path, "dummy"))
  return params


def test_a_shard_set_is_checked_whole_before_training(tmp_path):
  pattern = utils.write_pretraining_shards(str(tmp_path / "train"), 3, 4)
  params = _pretraining_params(pattern)
  _check(params, "train")
  # A shard rewritten by another conversion: not the set its manifest lists.
  shard = str(tmp_path / "train-00002-of-00003.tfrecord")
  utils.write_pretraining_records(shard, 4, seed=99)
  with pytest.raises(ValueError) as e:
    _check(params, "train")
  assert f"task.train_data.input_path={pattern!r}: {shard}" in str(e.value)
  # A set missing a shard (a killed writer), even without its manifest.
  os.remove(shard)
  os.remove(str(tmp_path / "train_pretraining_meta_data.json"))
  params = _pretraining_params(str(tmp_path / "train-*"))
  with pytest.raises(ValueError) as e:
    _check(params, "train")
  assert ("task.train_data.input_path: the shard set "
          f"{tmp_path}/train-?????-of-00003.tfrecord is incomplete: 2 of 3 "
          "shards, missing train-00002-of-00003.tfrecord") in str(e.value)


def test_a_file_of_other_bytes_or_other_records_is_named(tmp_path):
  text = tmp_path / "train.tf_record"
  text.write_text("not records\n")
  with pytest.raises(ValueError, match=rf"{re.escape(str(text))}' is not a "
                     r"readable TFRecord file \(DataLossError: "):
    _check(_config("realformer/glue", str(text)), "train")
  other = tmp_path / "other.tf_record"
  with tf.io.TFRecordWriter(str(other)) as writer:
    writer.write(b"\xff not an Example")
  with pytest.raises(ValueError, match=rf"the first record of "
                     rf"{re.escape(repr(str(other)))} is not a tf.train.Example"):
    _check(_config("realformer/glue", str(other)), "train")
