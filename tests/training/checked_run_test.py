"""Tests for train_lib.checked_run (the run plan derived, every rule checked,
then the lock): no check refuses after a write; a quickstart run's data is never rebuilt
from other inputs (issue 30 item 0)."""

import os
import shutil

import pytest
import tensorflow as tf

from official.core import exp_factory
from realformer_tf.configs import finetuning
from realformer_tf.training import train_lib
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


def _checked(params, mode, model_dir, quickstart_input_files=None):
  """The checked run's locked config (every rule; the quickstart's data
  built)."""
  with train_lib.checked_run(params, mode, model_dir,
                             quickstart_input_files) as run:
    return run.plan.params


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory):
  """A quickstart run's directory (its data from corpus "a", params.yaml and
  a checkpoint), as train.py leaves it after its first checkpoint."""
  tmp = tmp_path_factory.mktemp("run")
  corpus_a = _corpus(tmp / "a.txt", _WORDS["a"])
  model_dir = str(tmp / "run")
  params = _checked(_quickstart(), "train", model_dir,
                                          [corpus_a])
  train_lib.write_params_yaml(params, model_dir)
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
    _checked(_quickstart(), "train_and_eval", model_dir,
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
    _checked(other, "eval", model_dir, [corpus_a])
  with pytest.raises(ValueError, match=r"corpus: files .*a.txt .* the Python "
                     r"[0-9.]+ standard library's docstrings now"):
    _checked(_quickstart(), "train", model_dir)
  assert file_trees.files_under(os.path.join(model_dir, "data")) == before


def test_a_runs_own_corpus_resumes_on_its_data_unwritten(quickstart_run):
  _, model_dir, corpus_a, first = quickstart_run
  before = file_trees.files_under(model_dir)
  params = _checked(_quickstart(), "train_and_eval",
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
  params = _checked(_quickstart(), "train", copy,
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
    _checked(_quickstart(), "train", bare, [corpus_a])
  assert not os.path.exists(os.path.join(bare, "data"))


def test_config_values_are_checked_before_the_run_dir(tmp_path):
  params = _quickstart()
  params.trainer.train_steps = -1
  model_dir = tmp_path / "file"
  model_dir.write_text("x")
  # The model_dir's path is checked first (cheapest, names the flag) ...
  with pytest.raises(ValueError, match="is a file"):
    _checked(params, "train", str(model_dir))
  # ... then values, before any data is planned or written.
  with pytest.raises(ValueError, match=r"trainer.train_steps=-1 must be "
                     "positive"):
    _checked(params, "train", str(tmp_path / "new"))
  assert not (tmp_path / "new").exists()


def _copy_with_two_checkpoints(model_dir, copy):
  """A copy of the run, trained on to a second checkpoint, ckpt-4."""
  shutil.copytree(model_dir, copy)
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(2.0)), copy,
                             max_to_keep=2).save(checkpoint_number=4)
  return os.path.join(copy, "ckpt-2"), os.path.join(copy, "ckpt-4")


def _refused_unwritten(copy, corpora, fragments):
  """Every command (the run's corpus and another, each mode) is refused
  naming `fragments`, and leaves every file of `copy` as it was."""
  before = file_trees.files_under(copy)
  for corpus, mode in zip(corpora, ("train", "train_and_eval", "eval")):
    with pytest.raises(ValueError) as e:
      _checked(_quickstart(), mode, copy, [corpus])
    for fragment in fragments:
      assert fragment in str(e.value), (mode, str(e.value))
  assert file_trees.files_under(copy) == before


def test_a_run_without_its_state_file_is_not_trained_again(quickstart_run,
                                                           tmp_path):
  """Issue 38 item 1: `rm D/checkpoint` (a copy that left it out), the same
  command: rc 0, trained from step 0 over ckpt-2 and ckpt-4."""
  tmp, model_dir, corpus_a, _ = quickstart_run
  copy = str(tmp_path / "copy")
  _, newest = _copy_with_two_checkpoints(model_dir, copy)
  os.remove(os.path.join(copy, "checkpoint"))
  corpus_b = _corpus(tmp / "b.txt", _WORDS["b"])
  _refused_unwritten(copy, [corpus_a, corpus_b, corpus_a], [
      f"--model_dir={copy!r} holds checkpoints (ckpt-4, ckpt-2) but no "
      "'checkpoint' state file", "nothing was run or written",
      f"update_checkpoint_state({copy!r}, {newest!r})"])


@pytest.mark.parametrize("damage", ["index gone", "data truncated"])
def test_a_run_whose_newest_checkpoint_is_not_whole_is_refused(
    quickstart_run, tmp_path, damage):
  """Issue 38 item 2: `rm D/ckpt-N.index` (the state file still names it),
  then another corpus: D/data/vocab.txt rebuilt, params.yaml rewritten, then
  a raw NotFoundError; the same corpus: params.yaml rewritten, the same
  error. Item 9: its data cut short, train.py resume and --mode=eval warned
  "using" the older one, rewrote params.yaml, then restored the damaged one
  (IndexError)."""
  tmp, model_dir, corpus_a, _ = quickstart_run
  corpus_b = _corpus(tmp / "b.txt", _WORDS["b"])
  copy = str(tmp_path / "copy")
  older, newest = _copy_with_two_checkpoints(model_dir, copy)
  if damage == "index gone":
    os.remove(newest + ".index")
    why = f"{newest}.index does not exist"
  else:
    with open(newest + ".data-00000-of-00001", "r+b") as f:
      f.truncate(4)
    why = "hold 4 bytes, less than the"
  _refused_unwritten(copy, [corpus_b, corpus_a, corpus_a], [
      f"--model_dir={copy!r}: its newest checkpoint, ckpt-4 (named by "
      f"{copy}/checkpoint), is not whole: ", why,
      "nothing was run or written",
      f"update_checkpoint_state({copy!r}, {older!r})"])


def test_another_experiments_run_is_named_not_called_a_quickstart(
    quickstart_run, tmp_path):
  """Issue 38 item 11: a GLUE run directory given to the quickstart was
  called "a quickstart run"; and its broken params.yaml gave a raw
  ParserError."""
  _, model_dir, corpus_a, _ = quickstart_run
  copy = str(tmp_path / "glue")
  shutil.copytree(model_dir, copy)
  glue = exp_factory.get_exp_config(finetuning.GLUE)
  train_lib.write_params_yaml(glue, copy)
  before = file_trees.files_under(copy)
  with pytest.raises(ValueError) as e:
    _checked(_quickstart(), "train", copy, [corpus_a])
  assert str(e.value).startswith(
      f"--model_dir={copy!r} holds a run of another experiment (task.name="
      f"{glue.task.name!r} in {copy}/params.yaml), not a "
      "realformer/quickstart run"), e.value
  assert "quickstart run (" not in str(e.value)
  # Before its first checkpoint too: its params.yaml is not overwritten.
  fresh = tmp_path / "glue_fresh"
  fresh.mkdir()
  train_lib.write_params_yaml(glue, str(fresh))
  fresh_files = file_trees.files_under(str(fresh))
  with pytest.raises(ValueError, match="holds a run of another experiment"):
    _checked(_quickstart(), "train", str(fresh),
                                   [corpus_a])
  assert file_trees.files_under(str(fresh)) == fresh_files
  with open(os.path.join(copy, "params.yaml"), "a") as f:
    f.write("task: [unclosed\n")
  with pytest.raises(ValueError, match=rf"^{copy}/params.yaml:\d+:\d+: not "
                     "valid YAML"):
    _checked(_quickstart(), "train", copy, [corpus_a])
  del before["params.yaml"]
  after = file_trees.files_under(copy)
  del after["params.yaml"]
  assert after == before


@pytest.mark.parametrize("read_only", ["run", "summaries"])
def test_an_eval_of_a_read_only_run_is_refused_before_it_runs(
    quickstart_run, tmp_path, monkeypatch, read_only):
  """Issue 38 item 8, eval's side: `--mode=eval` takes no lock, so on a
  read-only run it evaluated, then died in TensorFlow's raw
  PermissionDeniedError from CreateSummaryFileWriter (validation/). Checked
  with `os.access`, which a read-only file system or permissions answer
  (faked here: CI's root writes through permissions)."""
  tmp, model_dir, corpus_a, _ = quickstart_run
  copy = str(tmp_path / "copy")
  shutil.copytree(model_dir, copy)
  blocked = copy if read_only == "run" else os.path.join(copy, "validation")
  os.makedirs(os.path.join(copy, "validation"), exist_ok=True)
  access = os.access
  monkeypatch.setattr(os, "access", lambda path, how: (
      how != os.W_OK or os.path.abspath(path) != blocked) and access(
          path, how))
  before = file_trees.files_under(copy)
  for mode in ("eval", "continuous_eval"):
    with pytest.raises(ValueError) as e:
      _checked(_quickstart(), mode, copy, [corpus_a])
    assert (f"--mode={mode} writes its summaries to {copy}/validation and "
            f"operative_config.{mode}.gin to --model_dir={copy!r}, but "
            f"{blocked} is not writable") in str(e.value)
    assert ("a writable folder" if read_only == "run" else
            "trainer.validation_summary_subdir=") in str(e.value)
  assert file_trees.files_under(copy) == before
  monkeypatch.setattr(os, "access", access)
  _checked(_quickstart(), "eval", copy, [corpus_a])
