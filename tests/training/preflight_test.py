"""Tests for realformer_tf/training/preflight.py: one pass of checks, none
of which refuses after a write; a quickstart run's data is never rebuilt
from other inputs (issue 30 item 0)."""

import os
import shutil

import pytest
import tensorflow as tf

from official.core import train_utils
from realformer_tf.training import preflight
from tests.helpers import file_trees
from tests.helpers import train_runs

_WORDS = {
    "a": "the cat sat on a mat and the dog ran to the park where birds sing",
    "b": "quantum fields interact through gauge bosons while fermions obey",
}


def _corpus(path, words):
  """Twelve documents of eight sentences of `words`."""
  words = words.split()

  def sentence(d, s):
    return " ".join(words[(d + s + i) % len(words)]
                    for i in range(6)).capitalize() + "."

  return train_runs.write_corpus(path, 12, 8, sentence)


def _quickstart():
  return train_runs.quickstart_params(
      32, 5, vocab_size=300, hidden_size=16, num_layers=1,
      num_attention_heads=2, intermediate_size=32,
      max_position_embeddings=32)


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
  """A quickstart run's directory (its data from corpus "a", params.yaml and
  a checkpoint), as train.py leaves it after its first checkpoint."""
  tmp = tmp_path_factory.mktemp("run")
  corpus_a = _corpus(tmp / "a.txt", _WORDS["a"])
  model_dir = str(tmp / "run")
  params = preflight.prepare_and_validate(_quickstart(), "train", model_dir,
                                          [corpus_a])
  train_utils.serialize_config(params, model_dir)
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)),
                             model_dir, max_to_keep=1).save(
                                 checkpoint_number=2)
  return tmp, model_dir, corpus_a, params


def test_a_runs_data_is_not_rebuilt_from_another_corpus(quickstart_run):
  """Before: `D/data` (vocab.txt, records) was rebuilt from the new corpus,
  and only then "holds checkpoints of another model" refused: the run's
  vocabulary was gone."""
  tmp, model_dir, corpus_a, _ = quickstart_run
  corpus_b = _corpus(tmp / "b.txt", _WORDS["b"])
  before = file_trees.files_under(os.path.join(model_dir, "data"))
  with pytest.raises(ValueError) as e:
    preflight.prepare_and_validate(_quickstart(), "train_and_eval", model_dir,
                                   [corpus_b])
  message = str(e.value)
  for fragment in (f"--model_dir={model_dir!r} holds a quickstart run",
                   "ckpt-2", f"corpus: files {corpus_a} (sha256 ",
                   f"{os.path.join(model_dir, 'data', 'manifest.json')}, "
                   f"files {corpus_b} (sha256 ", "Its data is kept",
                   "use a new --model_dir"):
    assert fragment in message, message
  # Another vocabulary size (or Python's stdlib corpus) is refused the same.
  other = _quickstart()
  other.task.model.encoder.any.vocab_size = 200
  with pytest.raises(ValueError, match=r"vocab_size: 300 in .*manifest.json, "
                     r"200 now"):
    preflight.prepare_and_validate(other, "eval", model_dir, [corpus_a])
  with pytest.raises(ValueError, match=r"corpus: files .*a.txt .* the Python "
                     r"[0-9.]+ standard library's docstrings now"):
    preflight.prepare_and_validate(_quickstart(), "train", model_dir)
  assert file_trees.files_under(os.path.join(model_dir, "data")) == before


def test_a_runs_own_corpus_resumes_on_its_data_unwritten(quickstart_run):
  _, model_dir, corpus_a, first = quickstart_run
  before = file_trees.files_under(model_dir)
  params = preflight.prepare_and_validate(_quickstart(), "train_and_eval",
                                          model_dir, [corpus_a])
  assert params.task.vocab_file == first.task.vocab_file
  assert (params.task.model.encoder.any.vocab_size ==
          first.task.model.encoder.any.vocab_size)
  assert file_trees.files_under(model_dir) == before


def test_a_runs_damaged_data_is_rebuilt_from_the_same_inputs(quickstart_run,
                                                            tmp_path):
  _, model_dir, corpus_a, first = quickstart_run
  copy = str(tmp_path / "copy")
  shutil.copytree(model_dir, copy)
  vocab = os.path.join(copy, "data", "vocab.txt")
  with open(vocab, "rb") as f:
    tokens = f.read()
  with open(os.path.join(copy, "data", "eval.tfrecord"), "ab") as f:
    f.write(b"x")  # No longer what its manifest lists.
  params = preflight.prepare_and_validate(_quickstart(), "train", copy,
                                          [corpus_a])
  with open(vocab, "rb") as f:
    assert f.read() == tokens
  assert (params.task.model.encoder.any.vocab_size ==
          first.task.model.encoder.any.vocab_size)


def test_a_run_without_its_data_manifest_is_refused(quickstart_run, tmp_path):
  _, model_dir, corpus_a, _ = quickstart_run
  bare = str(tmp_path / "bare")
  os.makedirs(bare)
  for name in os.listdir(model_dir):
    if name != "data":
      os.link(os.path.join(model_dir, name), os.path.join(bare, name))
  with pytest.raises(ValueError, match=r"holds a quickstart run .* no "
                     r"readable .*data/manifest.json"):
    preflight.prepare_and_validate(_quickstart(), "train", bare, [corpus_a])
  assert not os.path.exists(os.path.join(bare, "data"))


def test_config_values_are_checked_before_the_run_dir(tmp_path):
  params = _quickstart()
  params.trainer.train_steps = -1
  model_dir = tmp_path / "file"
  model_dir.write_text("x")
  # The model_dir's path is checked first (cheapest, names the flag) ...
  with pytest.raises(ValueError, match="is a file"):
    preflight.prepare_and_validate(params, "train", str(model_dir))
  # ... then values, before any data is planned or written.
  with pytest.raises(ValueError, match=r"trainer.train_steps=-1 must be "
                     "positive"):
    preflight.prepare_and_validate(params, "train", str(tmp_path / "new"))
  assert not (tmp_path / "new").exists()
