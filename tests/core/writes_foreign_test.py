"""The kill suite's writers that prove ownership by a manifest of ours
(issue 46, item 3): the translation converter (`translation_meta_data.json`)
and both reproductions' reports (results.json, the manifest of the others;
the Keras 3 runs' result.json, data and checkpoints). A user's file at each target path is kept
and the refusal names it; a SIGKILL at each rename leaves old or new whole.
"""

import json
import os
import re

import numpy as np
import pytest

from realformer_tf import utils
from realformer_tf.core import writes
from realformer_tf.data import output_sets
from realformer_tf.data import translation
from realformer_tf.reproduce import plan as tf_keras_plan
from realformer_tf.reproduce.keras3 import data
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import report
from realformer_tf.reproduce.keras3 import run
from realformer_tf.reproduce.keras3 import train
from tests.helpers import file_trees
from tests.helpers import keras3_reproduction
from tests.helpers import kill_writer


def _named(path, call):
  """`call` refuses the user's file at `path`, naming it; nothing changes."""
  before = file_trees.files_under(os.path.dirname(path))
  with pytest.raises(FileExistsError, match=re.escape(
      f"{path} exists and no manifest of realformer_tf lists it (not written "
      "by us), so nothing was written: move it away")):
    call()
  assert file_trees.files_under(os.path.dirname(path)) == before


def convert(tsv, output_dir, vocab_size):
  """`kill_writer`'s target: one translation conversion."""
  return translation.convert([tsv], output_dir, dev_files=[tsv],
                             vocab_size=vocab_size)


def _tsv(tmp_path):
  path = tmp_path / "pairs.tsv"
  path.write_text("".join(f"red house {i}\tdas rote haus {i}\n"
                          for i in range(40)))
  return str(path)


def _whole_translation(out):
  """The vocabulary size of the whole set in `out`; raises if it is mixed."""
  meta = os.path.join(out, translation.META_DATA)
  manifest = output_sets.read_manifest(meta)
  output_sets.check_set(meta, manifest)
  return len(open(os.path.join(out, "sentencepiece.vocab")).readlines())


def test_translation_keeps_a_users_file_at_each_path(tmp_path):
  tsv, out = _tsv(tmp_path), tmp_path / "out"
  out.mkdir()
  for name in ("sentencepiece.model", "sentencepiece.vocab",
               "train.tf_record", "dev.tf_record", translation.META_DATA):
    (out / name).write_text("mine")
    _named(str(out / name), lambda: convert(tsv, str(out), 26))
    (out / name).unlink()
  convert(tsv, str(out), 26)
  convert(tsv, str(out), 30)  # Ours now: replaced.
  assert _whole_translation(str(out)) == 30


def test_translation_killed_at_each_rename_is_finished_whole(tmp_path):
  tsv, out = _tsv(tmp_path), str(tmp_path / "out")
  for kill_at in (1, 5):  # Its first and last (the manifest) of 5 renames.
    convert(tsv, out, 26)
    kill_writer.run_killed(kill_at, "tests.core.writes_foreign_test",
                           "convert", tsv=tsv, output_dir=out, vocab_size=30)
    if kill_at == 1:  # Before its first rename: the old set, whole.
      assert _whole_translation(out) == 26
    else:  # New files beside the old manifest: refused.
      with pytest.raises(ValueError, match="it is not the file"):
        _whole_translation(out)
    (journal,) = [n for n in os.listdir(out) if ".pending-" in n]
    assert writes.sweep(out, utils.GFILE_OPS) == [os.path.join(out, journal)]
    assert _whole_translation(out) == 30
    assert not [n for n in os.listdir(out) if ".tmp-" in n]


def test_the_tf_keras_reports_keep_a_users_file(tmp_path):
  for name in tf_keras_plan.REPORT:
    (tmp_path / name).write_text("mine")
    _named(str(tmp_path / name), lambda: tf_keras_plan.check_options(
        tf_keras_plan.Options(output_dir=str(tmp_path))))
    (tmp_path / name).unlink()


def write_report(output_dir, version):
  """`kill_writer`'s target: the Keras 3 report of handmade results."""
  plan = plan_lib.make_plan(plan_lib.Options(output_dir=output_dir,
                                             size="tiny", seeds=1))
  sequences = data.Sequences(train=np.zeros((20, 8), np.int32),
                             eval=np.zeros((4, 8), np.int32),
                             vocab=["x"] * 30, source="handmade")
  results = {arch: [{"arch": arch, "seed": 0, "seconds": 1.0,
                     "batch_digest": "0" * 64, "device": "cpu",
                     "dtype_policy": "float32",
                     "eval_logs": {"masked_lm_accuracy": version / 10,
                                   "lm_example_loss": 1.0},
                     "curves": {"train": [[1, 0.1]],
                                "validation": [[2, version / 10]]}}]
             for arch in plan_lib.ARCHS}
  report.write_results(plan, sequences, results)


def _whole_report(output_dir):
  """The version of the whole report in `output_dir`; raises if mixed."""
  path = lambda name: os.path.join(output_dir, name)
  summary = json.load(open(path(plan_lib.RESULTS_JSON)))
  assert summary["writer"] == plan_lib.WRITER
  for name, fingerprint in summary["files"].items():
    assert writes.size_of(path(name)) == fingerprint, name
  version = round(10 * summary["pretraining_runs"]["post_ln"][0][
      "eval_logs"]["masked_lm_accuracy"])
  assert f"| {100 * version / 10:.2f}" in open(path(plan_lib.RESULTS_MD)
                                               ).read().replace(" ± ", "| ")
  return version


def test_the_keras3_report_keeps_a_users_file_and_is_whole(tmp_path):
  out = str(tmp_path)
  for name in plan_lib.REPORT:
    (tmp_path / name).write_text("mine")
    _named(str(tmp_path / name), lambda: write_report(out, 1))
    (tmp_path / name).unlink()
  plan = plan_lib.make_plan(plan_lib.Options(output_dir=out, size="tiny",
                                             seeds=1, archs=["post_ln"]))
  result = os.path.join(plan.runs[0].run_dir, plan_lib.RESULT_FILE)
  os.makedirs(os.path.dirname(result))
  open(result, "w").write("{}")
  _named(result, lambda: run.execute(plan))
  os.remove(result)
  points = 3  # results.md, curves.png, then the manifest results.json.
  for kill_at in (1, points):
    write_report(out, 1)
    kill_writer.run_killed(kill_at, "tests.core.writes_foreign_test",
                           "write_report", output_dir=out, version=2)
    if kill_at == 1:  # Before its first rename: the old report, whole.
      assert _whole_report(out) == 1
    else:  # A new results.md beside the old manifest: not whole.
      with pytest.raises(AssertionError):
        _whole_report(out)
    plan_lib.make_plan(plan_lib.Options(output_dir=out))  # Its leftovers.
    writes.sweep(out, writes.OS_OPS)
    assert _whole_report(out) == 2
    assert not [n for n in os.listdir(out) if ".tmp-" in n or
                ".pending-" in n]


def test_the_keras3_data_and_checkpoint_keep_a_users_file(tmp_path):
  """vocab.txt and sequences.npz are one set (data.json, its manifest);
  a checkpoint records its writer: a user's file at each path is refused
  before anything is written; ours are replaced."""
  out = str(tmp_path / "out")
  plan = plan_lib.make_plan(plan_lib.Options(output_dir=out, size="tiny",
                                             seeds=1, archs=["post_ln"]))
  data_dir = os.path.join(out, "data")
  checkpoint = os.path.join(plan.runs[0].run_dir, plan_lib.CHECKPOINT_FILE)
  for path in (os.path.join(data_dir, data.VOCAB_FILE),
               os.path.join(data_dir, data.SEQUENCES_FILE), checkpoint):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("mine")
    _named(path, lambda: run.execute(plan))
    os.remove(path)
  corpus = keras3_reproduction.write_corpus(str(tmp_path))
  data.prepare(data_dir, [corpus], vocab_size=200, seq_length=16)
  data.prepare(data_dir, [corpus], vocab_size=100, seq_length=16)  # Ours.
  data.check(data_dir)
  assert len(open(os.path.join(data_dir, data.VOCAB_FILE)).readlines()) <= 100
  state = ([np.zeros(2, np.float32)], [], [])
  for step in (1, 2):  # Ours: replaced.
    train.save_checkpoint(checkpoint, state, {"step": step})
    train.check_checkpoint(checkpoint)
  assert train.load_checkpoint(checkpoint, state)[1] == {"step": 2}
