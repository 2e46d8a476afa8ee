"""Exporter errors before anything is written, and the command line."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official.core import train_utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.serving import export
from realformer_tf.training import plan_facts
from tests.helpers import file_trees
from tests.helpers import kill_writer
from tests.helpers import serving as common
from tests.helpers import squad as common_squad


@pytest.fixture(scope="module")
def glue_runs(tmp_path_factory):
  """Tiny SST-2 and STS-B runs (params.yaml + checkpoint), not exported."""
  root = str(tmp_path_factory.mktemp("runs"))
  return {head: common.make_model_dir(root, head) for head in ("sst2", "stsb")}


def _no_output(export_dir):
  parent = os.path.dirname(export_dir)
  return not os.path.exists(export_dir) and not any(
      name.startswith(os.path.basename(export_dir) + ".tmp")
      for name in os.listdir(parent))


def test_missing_params_yaml(tmp_path):
  out = str(tmp_path / "out")
  with pytest.raises(FileNotFoundError, match="params.yaml not found"):
    export.export_model(str(tmp_path), out)
  assert _no_output(out)


def test_missing_checkpoint(tmp_path, glue_runs):
  model_dir = str(tmp_path / "run")
  os.makedirs(model_dir)
  shutil.copy(os.path.join(glue_runs["stsb"][0], "params.yaml"), model_dir)
  out = str(tmp_path / "out")
  with pytest.raises(ValueError, match="directory without a checkpoint"):
    export.export_model(model_dir, out)
  with pytest.raises(ValueError, match="ckpt-7.index does not exist"):
    export.export_model(model_dir, out,
                        checkpoint_path=os.path.join(model_dir, "ckpt-7"))
  assert _no_output(out)


def test_checkpoint_of_another_model(tmp_path, glue_runs):
  """An SST-2 (2 classes) checkpoint does not fit the STS-B (1 output) model."""
  out = str(tmp_path / "out")
  with pytest.raises(ValueError, match="does not hold the variables"):
    export.export_model(glue_runs["stsb"][0], out,
                        checkpoint_path=glue_runs["sst2"][0],
                        vocab_file=glue_runs["stsb"][1])
  assert _no_output(out)


def test_text_signatures_need_a_vocabulary(tmp_path, glue_runs):
  """STS-B records no vocabulary (no GLUE meta data): --vocab_file needed."""
  out = str(tmp_path / "out")
  with pytest.raises(ValueError, match="pass --vocab_file"):
    export.export_model(glue_runs["stsb"][0], out)
  assert _no_output(out)


def test_vocabulary_larger_than_the_model(tmp_path, glue_runs):
  vocab = str(tmp_path / "big.txt")
  with open(vocab, "w") as f:
    f.write("\n".join(common.VOCAB + ["extra1", "extra2"]) + "\n")
  out = str(tmp_path / "out")
  with pytest.raises(ValueError, match="more than the model's vocab_size"):
    export.export_model(glue_runs["stsb"][0], out, vocab_file=vocab)
  bad = str(tmp_path / "bad.txt")
  with open(bad, "w") as f:
    f.write("[PAD]\n[UNK]\n")
  with pytest.raises(ValueError, match=r"--vocab_file.*lacks the special"):
    export.export_model(glue_runs["stsb"][0], out, vocab_file=bad)
  assert _no_output(out)


def test_vocabulary_of_another_size_than_the_embedding(tmp_path, glue_runs):
  """Issue 30 item 0: a smaller vocabulary exported (with a log line) and
  served ids the model never learned for those tokens."""
  vocab = str(tmp_path / "small.txt")
  with open(vocab, "w") as f:
    f.write("\n".join(common.VOCAB[:-2]) + "\n")
  out = str(tmp_path / "out")
  with pytest.raises(ValueError) as e:
    export.export_model(glue_runs["stsb"][0], out, vocab_file=vocab)
  assert (f"--vocab_file={vocab!r} has {len(common.VOCAB) - 2} tokens, but "
          "the word embedding of --model_dir=") in str(e.value)
  assert f"has {len(common.VOCAB)} rows" in str(e.value)
  assert _no_output(out)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_seq_length=33), r"max_seq_length=33 must be in \[3, "
     r"max_position_embeddings=32\]"),
    (dict(return_attention="all"), "return_attention='all'"),
])
def test_bad_options(tmp_path, glue_runs, kwargs, message):
  out = str(tmp_path / "out")
  with pytest.raises(ValueError, match=message):
    export.export_model(glue_runs["sst2"][0], out, **kwargs)
  assert _no_output(out)


def test_export_dir_not_empty(tmp_path, glue_runs):
  out = tmp_path / "out"
  out.mkdir()
  (out / "keep.txt").write_text("x")
  with pytest.raises(ValueError, match="exists and is not empty"):
    export.export_model(glue_runs["sst2"][0], str(out))
  assert os.listdir(out) == ["keep.txt"]


def test_overwrite_refuses_the_run_and_its_parent(glue_runs):
  """38.3: `--export_dir=D --overwrite` with D the run itself (params.yaml,
  ckpt-1, checkpoint), or any folder above it, is refused naming what it
  holds; nothing under the runs' folder changes."""
  model_dir = glue_runs["sst2"][0]
  runs = os.path.dirname(model_dir)
  before = file_trees.files_under(runs)
  with pytest.raises(ValueError, match=(
      r"--export_dir: .*/sst2 is a train.py run directory \(it holds "
      r"params.yaml\): checkpoint, ckpt-1.data-00000-of-00001, ckpt-1.index"
      r", data, params.yaml are not part of a SavedModel, so it is not "
      r"replaced.*"
      "pass another --export_dir")):
    export.export_model(model_dir, model_dir, serve_text=False,
                        overwrite=True)
  for parent in (runs, os.path.dirname(runs)):
    with pytest.raises(ValueError, match=(
        rf"{re.escape(parent)} is not a SavedModel: .* not part of a "
        "SavedModel")):
      export.export_model(model_dir, parent, serve_text=False,
                          overwrite=True)
  assert file_trees.files_under(runs) == before


def test_a_moved_run_finds_its_vocabulary_or_names_vocab_file(tmp_path):
  """38.11: params.yaml records an absolute vocabulary path; after the run
  directory is moved, the file at the same place in the run is used (and
  named), else the error names --vocab_file."""
  model_dir, vocab_file, _, _ = common.make_model_dir(str(tmp_path / "old"),
                                                      "pretraining")
  os.makedirs(os.path.join(model_dir, "data"))
  shutil.copy(vocab_file, os.path.join(model_dir, "data", "vocab.txt"))
  run_config = run_directory.load_experiment_config(model_dir)
  run_config.task.vocab_file = os.path.join(model_dir, "data", "vocab.txt")
  train_utils.serialize_config(run_config, model_dir)
  moved = str(tmp_path / "moved")
  shutil.move(model_dir, moved)
  task = run_directory.load_experiment_config(moved).task
  head = export.head_of(task)
  vocab, _ = export.text_vocab(task, head, moved, len(common.VOCAB),
                               plan_facts.Reader())
  assert vocab.path == os.path.join(moved, "data", "vocab.txt")
  assert list(vocab.tokens) == common.VOCAB
  os.remove(os.path.join(moved, "data", "vocab.txt"))
  with pytest.raises(ValueError, match=(
      r"task.vocab_file records the vocabulary '.*/old/pretraining/data/"
      r"vocab.txt', which does not exist \(was the run directory moved\?\)"
      r".*pass --vocab_file")):
    export.export_model(moved, str(tmp_path / "out"))
  assert _no_output(str(tmp_path / "out"))


def _files(directory):
  return {os.path.relpath(os.path.join(root, name), directory):
          open(os.path.join(root, name), "rb").read()
          for root, _, names in os.walk(directory) for name in names}


def test_killed_overwrite_leaves_the_previous_export(tmp_path, glue_runs):
  """--overwrite SIGKILLed between setting the old export aside and renaming
  the new one in: the next run restores the previous export byte for byte
  and removes the killed run's `<export_dir>.tmp-PID`."""
  model_dir = glue_runs["sst2"][0]
  out = str(tmp_path / "out")
  # The previous export: its bytes are what is checked, so a stand-in (a
  # real export would add a minute of tracing and nothing to the check).
  os.makedirs(os.path.join(out, "variables"))
  for name, data in (("saved_model.pb", b"previous graph"),
                     ("variables/variables.index", b"\x00previous index")):
    with open(os.path.join(out, name), "wb") as f:
      f.write(data)
  before = _files(out)
  kill_writer.run_killed(1, "realformer_tf.serving.export", "export_model",
                         model_dir=model_dir, export_dir=out,
                         serve_text=False, overwrite=True)
  assert sorted(re.sub(r"-\d+", "-PID", name)
                for name in os.listdir(tmp_path)) == [
                    "out.old-PID", "out.old-PID.owner", "out.tmp-PID",
                    "out.tmp-PID.owner"]
  with pytest.raises(ValueError, match="exists and is not empty"):
    export.export_model(model_dir, out, serve_text=False)
  assert os.listdir(tmp_path) == ["out"]
  assert _files(out) == before


def test_command_line_ids_only_export_runs_in_stock_saved_model_cli(
    tmp_path, glue_runs):
  """`--noserve_text`: no tensorflow-text ops, so plain saved_model_cli runs it.

  (A SavedModel with the text signatures does not even load there: "Op type
  not registered 'CaseFoldUTF8'", for every signature.)
  """
  model_dir, _, _, model = glue_runs["stsb"]
  out = str(tmp_path / "stsb_ids_only")
  process = subprocess.run(
      [sys.executable, "-m", "realformer_tf.serving.export",
       f"--model_dir={model_dir}", f"--export_dir={out}", "--noserve_text"],
      env=common.subprocess_env(), capture_output=True, text=True,
      timeout=300, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  result = json.loads(process.stdout[process.stdout.index("{"):])
  assert result["signatures"] == ["serve_examples", "serving_default"]
  # Progress on stderr, from the first step on (issue 39: an export said
  # nothing for its first minute).
  progress = [line for line in process.stderr.splitlines()
              if line.startswith("[export] ")]
  assert progress[0].startswith("[export] building the glue model and "
                                "restoring "), progress
  assert progress[1] == ("[export] tracing the signatures serve_examples, "
                         "serving_default (Model Garden's)"), progress
  assert re.fullmatch(r"\[export\] 2 signatures traced in \d+ s; writing the "
                      r"SavedModel \(tf\.saved_model\.save traces them "
                      r"again: about as long\)", progress[2]), progress
  assert result["custom_ops"] == []
  assert result["vocab_file"] is None
  assets = os.path.join(out, "assets")
  assert not os.path.exists(assets) or not os.listdir(assets)

  ids = [[2, 60, 61, 62, 3, 63, 64, 3], [2, 70, 3, 71, 72, 73, 3, 0]]
  mask = [[1] * 8, [1] * 7 + [0]]
  types = [[0] * 5 + [1] * 3, [0] * 3 + [1] * 4 + [0]]
  outdir = str(tmp_path / "cli")
  cli = common.saved_model_cli(
      ["run", "--dir", out, "--tag_set", "serve", "--signature_def",
       "serving_default", "--outdir", outdir, "--input_exprs",
       f"input_word_ids={ids};input_mask={mask};input_type_ids={types}"],
      with_text_ops=False)
  assert cli.returncode == 0, cli.stderr[-3000:]
  expected = model(dict(input_word_ids=tf.constant(ids),
                        input_mask=tf.constant(mask),
                        input_type_ids=tf.constant(types)), training=False)
  np.testing.assert_allclose(np.load(os.path.join(outdir, "score.npy")),
                             expected.numpy()[:, 0], atol=1e-5, rtol=1e-5)


def test_squad_run_with_its_eval_json_exports(tmp_path):
  # train.py's params.yaml of a SQuAD run names the dev JSON in
  # validation_data.input_path; building the task for export used to rebuild
  # the eval features and fail for lack of a place to write them.
  model_dir, _, config, _ = common.make_model_dir(str(tmp_path), "squad_v1")
  source = str(tmp_path / "dev.json")
  dataset = common_squad.v2_dataset()
  dataset["version"] = "1.1"
  for article in dataset["data"]:
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = [qa for qa in paragraph["qas"]
                          if not qa["is_impossible"]]
  common_squad.write_json(dataset, source)
  config.task.validation_data.input_path = source
  train_utils.serialize_config(config, model_dir)
  out = str(tmp_path / "export")
  result = export.export_model(model_dir, out, serve_text=False)
  assert result.head == "squad"
  assert os.path.exists(os.path.join(out, "saved_model.pb"))
  assert not os.path.exists(os.path.join(model_dir, "eval.tf_record"))


def test_an_export_dir_that_is_or_is_under_a_file_is_named(tmp_path,
                                                            glue_runs):
  """Under a file, TensorFlow's makedirs raised a bare
  FailedPreconditionError after the model was built."""
  a_file = tmp_path / "a_file"
  a_file.write_bytes(b"x")
  with pytest.raises(ValueError, match=re.escape(
      f"--export_dir='{a_file}' is a file, not a directory")):
    export.export_model(glue_runs["sst2"][0], str(a_file))
  with pytest.raises(ValueError, match=re.escape(
      f"--export_dir='{a_file}/sub' is under '{a_file}', which is a file")):
    export.export_model(glue_runs["sst2"][0], str(a_file / "sub"))
  assert a_file.read_bytes() == b"x"
  assert os.listdir(tmp_path) == ["a_file"]
