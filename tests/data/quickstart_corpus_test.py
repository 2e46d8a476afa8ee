"""Tests for the cached quickstart pre-training set."""
import gzip
import json
import logging
import os
import re
import random
import runpy
import sys

import pytest
import setuptools
import tensorflow as tf

from official.nlp.data import pretrain_dataloader
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import tokenization

WORDS = ("time year people way day man thing woman life child world school "
         "state family student group country problem hand part place case "
         "week company system program question work government number night "
         "point home water room mother area money story fact month lot right "
         "study book eye job word business issue side kind head house service "
         "friend father power hour game line end member law car city").split()
SMALL = dict(vocab_size=200, max_seq_length=32, max_predictions_per_seq=5,
             eval_fraction=0.1)


def write_corpus(path, num_docs=20, seed=0):
  rng = random.Random(seed)
  lines = []
  for d in range(num_docs):
    for _ in range(rng.randint(4, 8)):
      sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10)))
      lines.append(f"Doc{d} says: {sentence}.")
    lines.append("")
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return str(path)


def read_docs(path):
  docs, current = [], []
  for line in open(path, encoding="utf-8").read().split("\n"):
    if line:
      current.append(line)
    elif current:
      docs.append(tuple(current))
      current = []
  return docs


def count_records(path):
  return sum(1 for _ in tf.data.TFRecordDataset(path))


def mtimes(data_dir):
  return {f: os.stat(os.path.join(data_dir, f)).st_mtime_ns
          for f in os.listdir(data_dir)}


def load_first_batch(path, seq_length, max_pred):
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=path, seq_length=seq_length, max_predictions_per_seq=max_pred,
      global_batch_size=2, is_training=False)
  return next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))


def test_input_files_build_split_and_cache(tmp_path):
  corpus = write_corpus(tmp_path / "corpus.txt")
  data_dir = str(tmp_path / "qs")
  result = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL)

  assert set(result) == {"train_file", "eval_file", "vocab_file", "vocab_size",
                         "num_train_examples", "num_eval_examples", "python"}
  assert result["python"] is None  # Not the stdlib corpus.
  vocab = tokenization.load_vocab(result["vocab_file"])
  assert result["vocab_size"] == len(vocab) and vocab[0] == "[PAD]"
  assert result["num_train_examples"] == count_records(result["train_file"])
  assert result["num_eval_examples"] == count_records(result["eval_file"])
  assert result["num_train_examples"] > 5 * result["num_eval_examples"] > 0

  # Split by whole documents: 2 of 20 held out, none in both splits.
  train_docs = read_docs(os.path.join(data_dir, "corpus_train.txt"))
  eval_docs = read_docs(os.path.join(data_dir, "corpus_eval.txt"))
  assert (len(train_docs), len(eval_docs)) == (18, 2)
  assert sorted(train_docs + eval_docs) == sorted(read_docs(corpus))

  manifest = json.load(open(os.path.join(data_dir, "manifest.json")))
  assert manifest["counts"]["num_train_examples"] == (
      result["num_train_examples"])
  assert manifest["key"]["inputs"][0]["path"] == os.path.abspath(corpus)

  batch = load_first_batch(result["train_file"], 32, 5)
  assert batch["input_word_ids"].shape == (2, 32)
  assert int(tf.reduce_max(batch["input_word_ids"])) < result["vocab_size"]
  assert (batch["input_word_ids"][:, 0].numpy() == vocab.index("[CLS]")).all()

  # Same arguments: a cache hit, nothing rewritten.
  before = mtimes(data_dir)
  assert quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL) == result
  assert mtimes(data_dir) == before

  # Another seed: rebuilt, with another split.
  other = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], seed=1, **SMALL)
  assert json.load(open(os.path.join(data_dir, "manifest.json")))[
      "key"]["seed"] == 1
  assert read_docs(os.path.join(data_dir, "corpus_eval.txt")) != eval_docs
  assert other["num_train_examples"] == count_records(other["train_file"])

  # Changed input text: rebuilt.
  write_corpus(tmp_path / "corpus.txt", num_docs=30, seed=5)
  changed = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], seed=1, **SMALL)
  assert len(read_docs(os.path.join(data_dir, "corpus_eval.txt"))) == 3
  assert changed["num_train_examples"] > other["num_train_examples"]


def test_damaged_or_unfinished_cache_is_rebuilt(tmp_path):
  corpus = write_corpus(tmp_path / "corpus.txt")
  data_dir = str(tmp_path / "qs")
  result = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL)
  good = open(result["train_file"], "rb").read()

  # A truncated record file (e.g. copied half-way) is detected and rebuilt.
  with open(result["train_file"], "wb") as f:
    f.write(good[:100])
  assert quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL) == result
  assert open(result["train_file"], "rb").read() == good

  # Without our manifest, files at its paths are nobody's we know (a killed
  # build leaves its journal, and the next one finishes it): refused, named,
  # kept, as is a look-alike of our temporaries; once moved, rebuilt.
  os.remove(os.path.join(data_dir, "manifest.json"))
  with open(result["train_file"] + ".tmp-999", "wb") as f:
    f.write(b"partial")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{result['train_file']}, ") + ".* exist and no manifest of "
                     "realformer_tf lists them"):
    quickstart_corpus.prepare_quickstart_data(data_dir, input_files=[corpus],
                                              **SMALL)
  for name in os.listdir(data_dir):
    if ".tmp-" not in name:
      os.remove(os.path.join(data_dir, name))
  assert quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL) == result
  assert open(result["train_file"], "rb").read() == good
  assert open(result["train_file"] + ".tmp-999", "rb").read() == b"partial"


def test_a_failed_rebuild_leaves_the_previous_cache_whole(tmp_path,
                                                         monkeypatch):
  """The cache is one output set: a rebuild that dies before its renames
  leaves every previous file (manifest included) as it was, still a hit."""
  corpus = write_corpus(tmp_path / "corpus.txt")
  data_dir = str(tmp_path / "qs")
  result = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL)
  files = lambda: {f: open(os.path.join(data_dir, f), "rb").read()
                   for f in os.listdir(data_dir)}
  before = files()

  def killed(*args, **kwargs):
    raise KeyboardInterrupt("killed")

  monkeypatch.setattr(pretraining_data, "create_pretraining_data", killed)
  with pytest.raises(KeyboardInterrupt):
    quickstart_corpus.prepare_quickstart_data(
        data_dir, input_files=[corpus], seed=1, **SMALL)
  assert files() == before
  monkeypatch.undo()
  stamps = mtimes(data_dir)
  assert quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=[corpus], **SMALL) == result
  assert mtimes(data_dir) == stamps  # A cache hit: nothing rewritten.


@pytest.mark.parametrize("kwargs, message", [
    (dict(input_files=["MISSING"]), r"missing\.txt' does not exist"),
    (dict(input_files=["ONE_DOC"]), r"one_doc\.txt\) has 1 document"),
    (dict(input_files=[]), "No input files"),
    (dict(eval_fraction=0.0), r"eval_fraction must be in \(0, 1\)"),
    (dict(eval_fraction=1.0), r"eval_fraction must be in \(0, 1\)"),
    (dict(vocab_size=8), "vocab_size must be at least 16"),
    (dict(max_seq_length=4), "max_seq_length must be >= 8"),
])
def test_bad_arguments_raise_before_writing(tmp_path, kwargs, message):
  one_doc = tmp_path / "one_doc.txt"
  one_doc.write_text("A single document.\nWith two sentences.\n")
  names = {"MISSING": str(tmp_path / "missing.txt"), "ONE_DOC": str(one_doc)}
  if "input_files" in kwargs:
    kwargs = dict(kwargs, input_files=[names[f] for f in kwargs["input_files"]])
  data_dir = tmp_path / "qs"
  with pytest.raises(ValueError, match=message):
    quickstart_corpus.prepare_quickstart_data(str(data_dir), **kwargs)
  assert not data_dir.exists()


def test_stdlib_module_list_is_fixed_and_safe():
  modules = quickstart_corpus.STDLIB_MODULES
  assert list(modules) == sorted(set(modules))
  banned = ("tkinter", "turtle", "idlelib", "test", "this", "antigravity",
            "ssl", "sqlite3", "ctypes", "curses")
  assert not [m for m in modules if m.split(".")[0] in banned]


def test_split_sentences_and_docstrings():
  assert quickstart_corpus.split_sentences(
      "Return the sum.  It is exact!\n  See math.fsum() for floats. ok") == [
          "Return the sum.", "It is exact!", "See math.fsum() for floats. ok"]
  doc = """Summary line.

      More text here. Another sentence?
      >>> sum([1, 2])
      ... + 4
      7 is the answer.

      Closing words. Ok
      """
  # The example and its output go; too short a sentence ("Ok") is dropped.
  assert quickstart_corpus.docstring_sentences(doc) == [
      "Summary line.", "More text here.", "Another sentence?", "Closing words."]


def test_default_stdlib_corpus_is_shipped_and_cached(tmp_path, caplog):
  docs = quickstart_corpus.stdlib_documents()
  # The shipped corpus, as CPython 3.11.7 built it.
  assert (len(docs), sum(len(d) for d in docs)) == (212, 12864)
  num_chars = sum(len(s) + 1 for d in docs for s in d)
  assert 0.8e6 < num_chars < 3e6
  assert all(all(s.strip() == s and s for s in d) for d in docs)

  data_dir = str(tmp_path / "stdlib")
  # absl's logger: an earlier test may have left absl's verbosity lower.
  with caplog.at_level(logging.INFO, logger="absl"):
    result = quickstart_corpus.prepare_quickstart_data(data_dir)
  manifest = json.load(open(os.path.join(data_dir, "manifest.json")))
  assert manifest["key"]["corpus"] == "stdlib-docstrings"
  # Which Python's docstrings: the one that built the shipped file, whatever
  # runs this; the result, the log and the manifest say it.
  assert result["python"] == "3.11"
  assert manifest["key"]["python"] == "3.11.7"
  assert ("Quickstart corpus: docstrings of the Python 3.11 standard "
          "library, shipped in the package.") in caplog.text
  assert manifest["counts"]["num_train_documents"] + manifest["counts"][
      "num_eval_documents"] == len(docs)
  # The same on every Python (the module docstring's figure).
  assert result["vocab_size"] == 2334
  assert result["num_train_examples"] == count_records(result["train_file"])
  assert result["num_eval_examples"] == count_records(result["eval_file"])
  assert result["num_train_examples"] > 2000
  assert result["num_eval_examples"] > 50
  batch = load_first_batch(result["eval_file"], 64, 10)
  assert int(tf.reduce_max(batch["input_word_ids"])) < result["vocab_size"]

  before = mtimes(data_dir)
  again = quickstart_corpus.prepare_quickstart_data(data_dir)
  assert again == result
  assert json.load(open(os.path.join(data_dir, "manifest.json"))) == manifest
  assert mtimes(data_dir) == before


def test_stdlib_corpus_does_not_depend_on_the_running_python(monkeypatch):
  """Another Python's docstrings (here: every module's replaced) leave the
  corpus as shipped; it was the running Python's until issue 30."""
  shipped = quickstart_corpus.stdlib_documents()
  monkeypatch.setattr(quickstart_corpus, "module_document",
                      lambda module: ["Another Python's docstring."])
  assert quickstart_corpus.stdlib_documents() == shipped


def test_shipped_corpus_rebuilds_to_the_same_bytes(tmp_path, monkeypatch):
  """`write_stdlib_corpus` of the shipped documents gives the shipped bytes:
  the format round-trips and the gzip header holds no timestamp. The
  Python's own `gzip.compress` is not used: 3.13's writes another OS byte
  (issue 39). (The documents themselves are the running process's: under
  pytest, `sys.unraisablehook` is pytest's and its docstring drops out.)"""
  monkeypatch.setattr(quickstart_corpus, "build_stdlib_documents",
                      quickstart_corpus.stdlib_documents)
  monkeypatch.setattr(gzip, "compress", None)
  path = str(tmp_path / "corpus.txt.gz")
  assert quickstart_corpus.write_stdlib_corpus(path) == os.path.getsize(path)
  with open(path, "rb") as f, open(quickstart_corpus.STDLIB_CORPUS_FILE,
                                   "rb") as shipped:
    assert f.read() == shipped.read()


_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _setup_arguments(monkeypatch):
  """What setup.py passes to `setuptools.setup`."""
  captured = {}
  monkeypatch.setattr(setuptools, "setup", lambda **kw: captured.update(kw))
  monkeypatch.chdir(_REPO_ROOT)
  runpy.run_path(os.path.join(_REPO_ROOT, "setup.py"))
  return captured


def test_setup_py_ships_the_corpus(monkeypatch):
  """Every data file in the package is in setup.py's package_data (a
  non-editable install gets nothing else) and in MANIFEST.in (sdists)."""
  root = _REPO_ROOT
  captured = _setup_arguments(monkeypatch)
  shipped = {os.path.join(package.replace(".", os.sep), name)
             for package, names in captured["package_data"].items()
             for name in names}
  data_files = {
      os.path.relpath(os.path.join(d, f), root)
      for d, _, files in os.walk(os.path.join(root, "realformer_tf"))
      for f in files if not f.endswith((".py", ".pyc"))}
  assert data_files == shipped
  manifest_in = open(os.path.join(root, "MANIFEST.in")).read().split()
  assert all(path in manifest_in for path in shipped)


def test_setup_py_classifiers_match_python_requires(monkeypatch):
  """Each Python version setup.py admits is a classifier, and only those
  (3.11: keras-hub's floor; 3.13: TensorFlow 2.20's last wheels)."""
  captured = _setup_arguments(monkeypatch)
  assert captured["python_requires"] == ">=3.11,<3.14"
  versions = [c.rsplit(" :: ", 1)[1] for c in captured["classifiers"]
              if c.startswith("Programming Language :: Python :: 3.")]
  assert versions == ["3.11", "3.12", "3.13"]


def test_missing_corpus_file_names_it(monkeypatch, tmp_path):
  monkeypatch.setattr(quickstart_corpus, "STDLIB_CORPUS_FILE",
                      str(tmp_path / "gone.txt.gz"))
  with pytest.raises(FileNotFoundError, match=r"gone\.txt\.gz is missing"):
    quickstart_corpus.stdlib_documents()


def test_dupe_factor_masks_each_train_copy_anew(tmp_path):
  corpus = write_corpus(tmp_path / "corpus.txt")
  once = quickstart_corpus.prepare_quickstart_data(
      str(tmp_path / "once"), input_files=[corpus], **SMALL)
  thrice = quickstart_corpus.prepare_quickstart_data(
      str(tmp_path / "thrice"), input_files=[corpus], dupe_factor=3, **SMALL)
  # Three masked copies of the train split; the eval split is written once.
  assert thrice["num_eval_examples"] == once["num_eval_examples"]
  assert thrice["num_train_examples"] >= 2.5 * once["num_train_examples"]

  def masked(path):
    spec = {"masked_lm_positions": tf.io.VarLenFeature(tf.int64),
            "input_ids": tf.io.VarLenFeature(tf.int64)}
    pairs = []
    for record in tf.data.TFRecordDataset(path):
      parsed = tf.io.parse_single_example(record, spec)
      pairs.append(tuple(tf.sparse.to_dense(parsed["masked_lm_positions"])
                         .numpy()))
    return pairs

  # Different masks across the copies: far more distinct position sets than
  # one copy has examples.
  assert len(set(masked(thrice["train_file"]))) > once["num_train_examples"]
