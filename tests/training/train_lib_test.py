"""Tests for realformer_tf/training/train_lib.py, in-process: bad inputs
refused before anything is written, modes, seeds, reruns and stale temps.

All models are tiny (hidden 16-32, 1-2 layers, seq 16-32); train.py itself
(subprocesses, kill-and-resume, distribution) is tested in tests/train_test.py.
"""

import gc
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.core import run_lock
from realformer_tf.training import run_plan
from realformer_tf.training import train_lib
from tests.helpers import file_trees
from tests.helpers import train_runs as utils


def _checked(params, mode, model_dir):
  """The checked run's locked config (every rule, the data built)."""
  with train_lib.checked_run(params, mode, model_dir) as run:
    return run.plan.params


# --------------------------------------------------------------------------
# Bad inputs: a clear error before anything is written.
# --------------------------------------------------------------------------


def _override(**sections):
  return json.dumps(sections)


def _bad_input_cases(tmp_path, run):
  """(name, params_override, mode, expected message fragments)."""
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")
  not_vocab = tmp_path / "not_vocab.txt"
  not_vocab.write_text("this is a sentence, not a vocabulary\nand another\n")
  big_vocab = utils.write_vocab(str(tmp_path / "big_vocab.txt"), size=100)
  seq24 = dict(seq_length=24)
  # Good records, then (same file) records with ids up to 99 > vocab 64.
  mixed = str(tmp_path / "mixed.tfrecord")
  good = utils.write_pretraining_records(str(tmp_path / "good.tfrecord"), 4)
  wide = utils.write_pretraining_records(str(tmp_path / "wide.tfrecord"), 8,
                                         vocab_size=100)
  with tf.io.TFRecordWriter(mixed) as writer:
    for record in tf.data.TFRecordDataset([good, wide]):
      writer.write(record.numpy())
  truncated = tmp_path / "truncated.tfrecord"
  with open(run["train_file"], "rb") as f:
    truncated.write_bytes(f.read()[:-7])
  return [
      ("fractional train_steps",
       _override(trainer=dict(train_steps=1.5)), "train",
       ["trainer.train_steps=1.5 must be an int, not float"]),
      ("non-numeric train_steps",
       _override(trainer=dict(train_steps="abc")), "train",
       ["trainer.train_steps='abc' must be an int, not str"]),
      ("token ids beyond vocab_size after the first record",
       _override(task=dict(train_data=dict(input_path=mixed))), "train",
       ["task.model.encoder.any.vocab_size=64", mixed, "token id",
        "'input_ids'"]),
      ("truncated record file",
       _override(task=dict(train_data=dict(input_path=str(truncated)))),
       "train", [str(truncated), "cannot be read to the end"]),
      ("eval without a checkpoint", "", "eval",
       ["--mode=eval: no checkpoint in --model_dir=",
        "no trained model to evaluate"]),
      ("empty input path",
       _override(task=dict(train_data=dict(input_path=""))), "train",
       ["task.train_data.input_path is empty"]),
      ("glob matching nothing",
       _override(task=dict(train_data=dict(
           input_path=str(tmp_path / "nothing-*.tfrecord")))), "train",
       ["task.train_data.input_path", "nothing-*.tfrecord",
        "matches no file"]),
      ("missing file",
       _override(task=dict(train_data=dict(
           input_path=f"{run['train_file']},{tmp_path}/gone.tfrecord"))),
       "train", ["task.train_data.input_path", "gone.tfrecord",
                 "does not exist"]),
      ("empty file",
       _override(task=dict(train_data=dict(input_path=str(empty)))), "train",
       ["task.train_data.input_path", str(empty), "is an empty file"]),
      ("missing eval file in train_and_eval",
       _override(task=dict(validation_data=dict(
           input_path=str(tmp_path / "eval-gone.tfrecord")))),
       "train_and_eval",
       ["task.validation_data.input_path", "eval-gone.tfrecord"]),
      ("vocab file that is not a vocabulary",
       _override(task=dict(vocab_file=str(not_vocab))), "train",
       ["task.vocab_file=", str(not_vocab), "not a WordPiece vocabulary"]),
      ("vocab larger than the embedding table",
       _override(task=dict(vocab_file=big_vocab)), "train",
       ["task.vocab_file=", "100 tokens",
        "task.model.encoder.any.vocab_size=64"]),
      ("seq_length above max_position_embeddings",
       _override(task=dict(train_data=dict(seq_length=64))), "train",
       ["task.train_data.seq_length=64",
        "task.model.encoder.any.max_position_embeddings=32"]),
      ("records of another seq_length",
       _override(task=dict(train_data=seq24)), "train",
       ["task.train_data.seq_length=24", run["train_file"],
        "'input_ids' of length 16"]),
      ("token ids beyond vocab_size",
       _override(task=dict(vocab_file="", model=dict(encoder=dict(
           type="any", any=dict(vocab_size=32))))), "train",
       ["task.model.encoder.any.vocab_size=32", run["train_file"],
        "token id"]),
      ("summary interval not a multiple of steps_per_loop",
       _override(trainer=dict(summary_interval=3)), "train",
       ["trainer.summary_interval=3", "trainer.steps_per_loop=2"]),
      ("unsupported mode", "", "continuous_train_and_eval",
       ["--mode='continuous_train_and_eval'", "train_and_eval"]),
      # Trains as gradient ascent to rc 0 if accepted.
      ("negative learning rate",
       _override(trainer=dict(optimizer_config=dict(learning_rate=dict(
           polynomial=dict(initial_learning_rate=-0.001))))), "train",
       ["trainer.optimizer_config.learning_rate.polynomial."
        "initial_learning_rate=-0.001 must be positive"]),
      # Issue 38 item 10: YAML's NaN passed every range check (`nan <= 0`
      # is False), built the data, then stopped at step 2.
      ("YAML .nan learning rate",
       "{trainer: {optimizer_config: {learning_rate: {polynomial: "
       "{initial_learning_rate: .nan}}}}}", "train",
       ["trainer.optimizer_config.learning_rate.polynomial."
        "initial_learning_rate=nan must be a finite number"]),
      ("dropout rate above 1",
       _override(task=dict(model=dict(encoder=dict(any=dict(
           dropout_rate=1.5))))), "train",
       ["task.model.encoder.any.dropout_rate=1.5 must be in [0, 1)"]),
      ("Keras policy name as mixed_precision_dtype",
       _override(runtime=dict(mixed_precision_dtype="mixed_float16")), "train",
       ["runtime.mixed_precision_dtype='mixed_float16' is not one of "
        "float32, float16, bfloat16"]),
  ]


def test_bad_inputs_fail_before_anything_is_written(tmp_path):
  run = utils.make_tiny_run(tmp_path)
  cases = _bad_input_cases(tmp_path, run)
  for i, (name, override, mode, fragments) in enumerate(cases):
    model_dir = tmp_path / f"model_{i}"
    with pytest.raises(ValueError) as e:
      utils.run_in_process(model_dir, [run["config_file"]], mode=mode,
                     params_override=override)
    for fragment in fragments:
      assert fragment in str(e.value), (name, str(e.value))
    assert not model_dir.exists(), name


def test_bad_quickstart_config_fails_before_its_data_is_built(tmp_path):
  model_dir = tmp_path / "quickstart"
  params = experiments.realformer_quickstart()
  params.override({"task": {"train_data": {"seq_length": 128},
                            "validation_data": {"seq_length": 128}}})
  with pytest.raises(ValueError, match=r"task.train_data.seq_length=128 "
                     r"exceeds .*max_position_embeddings=64"):
    _checked(params, "train", str(model_dir))
  assert not model_dir.exists()  # No data cache built (or overwritten).
  params = experiments.realformer_quickstart()
  params.override({"task": {"validation_data": {"seq_length": 16}}})
  with pytest.raises(ValueError, match=r"one set of records, but "
                     r"task.train_data.seq_length=32 != "
                     r"task.validation_data.seq_length=16"):
    _checked(params, "train", str(model_dir))
  assert not model_dir.exists()
  params = experiments.realformer_quickstart()
  params.override({"task": {"train_data": {"global_batch_size": 0}}})
  with pytest.raises(ValueError, match=r"task.train_data.global_batch_size=0 "
                     r"must be positive"):
    train_lib.run_experiment(params, "train_and_eval", str(model_dir))
  assert not model_dir.exists()


def test_model_dir_that_is_a_file_is_refused(tmp_path):
  run = utils.make_tiny_run(tmp_path)
  not_a_dir = tmp_path / "model.txt"
  not_a_dir.write_text("kept")
  for model_dir, where in (
      (not_a_dir, "is a file"),
      (not_a_dir / "run", f"is under {str(not_a_dir)!r}, which is a file")):
    with pytest.raises(ValueError) as e:
      utils.run_in_process(model_dir, [run["config_file"]])
    assert str(e.value).startswith(
        f"--model_dir={str(model_dir)!r} {where}, not a directory"), e.value
  assert not_a_dir.read_text() == "kept"


# --------------------------------------------------------------------------
# Modes, seeds and reruns.
# --------------------------------------------------------------------------


def _restore_warnings(caplog):
  """TensorFlow's warnings about checkpoint values nothing restored into."""
  gc.collect()  # They are logged when the restore status is collected.
  return [r.getMessage() for r in caplog.records
          if "could not be found in the restored object" in r.getMessage()
          or "Unresolved object in checkpoint" in r.getMessage()]


def test_train_then_eval_and_continuous_eval(tmp_path, caplog):
  run = utils.make_tiny_run(tmp_path, train_steps=4)
  model_dir = tmp_path / "model"
  assert utils.run_in_process(model_dir, [run["config_file"]], mode="train") == {}
  params_yaml = model_dir / "params.yaml"
  written = params_yaml.stat().st_mtime_ns
  assert run_directory.load_experiment_config(str(model_dir)).task.vocab_file \
      == run["vocab_file"]

  evaluated = utils.run_in_process(model_dir, [run["config_file"]], mode="eval")
  assert 0.0 <= float(evaluated["masked_lm_accuracy"]) <= 1.0
  assert np.isfinite(float(evaluated["validation_loss"]))
  # A live run holds the directory: a second training run fails at once,
  # naming it, and writes nothing; the eval modes (which write only
  # validation/ summaries) run beside it. Stops by itself: the latest
  # checkpoint is at trainer.train_steps.
  with run_lock.hold(str(model_dir)) as holder:
    with pytest.raises(run_lock.ModelDirBusyError) as e:
      utils.run_in_process(model_dir, [run["config_file"]], mode="train_and_eval")
    assert (f"--model_dir={model_dir} is in use by another run: pid "
            f"{os.getpid()} on host {holder['host']!r} since "
            f"{holder['since']}") in str(e.value)
    continuous = utils.run_in_process(model_dir, [run["config_file"]],
                                mode="continuous_eval")
  assert not (model_dir / run_directory.LOCK_FILE).exists()
  # Same weights, same eval data: the same numbers.
  for key in ("masked_lm_accuracy", "validation_loss"):
    np.testing.assert_allclose(float(continuous[key]),
                               float(evaluated[key]), rtol=1e-6)
  # Both restored the model only: no warning per unused optimizer value.
  assert not _restore_warnings(caplog)
  # Eval modes leave params.yaml alone (no race with a train job).
  assert params_yaml.stat().st_mtime_ns == written
  assert run_directory.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == 4

  # Issue 38 item 9: the newest checkpoint cut short. Resume and --mode=eval
  # warned "using ckpt-2", rewrote params.yaml, then restored ckpt-4 anyway
  # (IndexError: Read less bytes than requested). Refused, nothing written.
  with open(model_dir / "ckpt-4.data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  before = file_trees.files_under(model_dir)
  for mode in ("eval", "train"):
    with pytest.raises(ValueError, match=r"its newest checkpoint, ckpt-4 .*is "
                       r"not whole: .*hold 100 bytes, less than .*"
                       r"update_checkpoint_state\(.*ckpt-2'\)"):
      utils.run_in_process(model_dir, [run["config_file"]], mode=mode,
                           params_override="trainer.train_steps=6")
  assert file_trees.files_under(model_dir) == before


def _trained_weights(model_dir, config_file, seed):
  utils.run_in_process(model_dir, [config_file], mode="train",
                 params_override=f"task.train_data.seed={seed}")
  reader = tf.train.load_checkpoint(str(model_dir))
  return {name: reader.get_tensor(name)
          for name in sorted(reader.get_variable_to_shape_map())
          if name.startswith("encoder/")}


def test_train_data_seed_makes_a_run_repeatable(tmp_path):
  """`task.train_data.seed` seeds initialisation and dropout too."""
  run = utils.make_tiny_run(tmp_path, train_steps=2)
  first, again, other = (
      _trained_weights(tmp_path / name, run["config_file"], seed)
      for name, seed in (("a", 3), ("b", 3), ("c", 4)))
  assert first.keys() == again.keys() == other.keys() and len(first) > 10
  for name in first:
    np.testing.assert_array_equal(first[name], again[name], err_msg=name)
  assert any(not np.array_equal(first[n], other[n]) for n in first)


def test_reruns_final_eval_refuses_other_model(tmp_path, capsys, caplog):
  run = utils.make_tiny_run(tmp_path, train_steps=4)
  model_dir = tmp_path / "model"
  first = utils.run_in_process(model_dir, [run["config_file"]],
                         mode="train_and_eval")
  record_path = model_dir / run_plan.FINAL_EVAL_FILE
  with open(record_path) as f:
    record = json.load(f)
  assert record["step"] == 4
  np.testing.assert_allclose(record["metrics"]["masked_lm_accuracy"],
                             float(first["masked_lm_accuracy"]), rtol=1e-6)

  # Killed during the final eval: the rerun runs it (same weights, same
  # numbers) and trains no further.
  record_path.unlink()
  capsys.readouterr()
  again = utils.run_in_process(model_dir, [run["config_file"]],
                         mode="train_and_eval")
  out = capsys.readouterr().out
  assert "its final evaluation never finished: running it now" in out
  assert "final eval | step: 4 |" in out
  # It restores the model only: no warning per unused optimizer value.
  assert not _restore_warnings(caplog)
  np.testing.assert_allclose(float(again["masked_lm_accuracy"]),
                             float(first["masked_lm_accuracy"]), rtol=1e-6)
  assert record_path.exists()
  assert run_directory.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == 4

  # Nothing left to do: says so, returns the recorded metrics.
  done = utils.run_in_process(model_dir, [run["config_file"]],
                        mode="train_and_eval")
  assert "already complete at step 4 (trainer.train_steps=4)" in (
      capsys.readouterr().out)
  assert not _restore_warnings(caplog)
  assert done == record["metrics"] or done["masked_lm_accuracy"] == (
      pytest.approx(record["metrics"]["masked_lm_accuracy"]))

  # Another model size: refused before params.yaml is touched.
  params_yaml = model_dir / "params.yaml"
  before = params_yaml.read_bytes()
  with pytest.raises(ValueError) as e:
    utils.run_in_process(model_dir, [run["config_file"]], params_override=_override(
        task=dict(model=dict(encoder=dict(type="any", any=dict(
            num_layers=3))))))
  message = str(e.value)
  assert "holds checkpoints of another model" in message
  assert ("task.model.encoder.any.num_layers: 2 in params.yaml, 3 now"
          in message), message
  assert params_yaml.read_bytes() == before


def test_stale_temps_of_killed_runs_are_cleaned(tmp_path):
  model_dir = tmp_path / "model"
  (model_dir / "ckpt-4_temp").mkdir(parents=True)
  (model_dir / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001"
  ).write_bytes(b"x")
  (model_dir / "data").mkdir()
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  stale = model_dir / "data" / f"corpus_train.txt.tmp-{dead.stdout.strip()}"
  stale.write_text("partial")
  file_trees.claim_as_ours(stale, int(dead.stdout))
  live = model_dir / f"final_eval.json.tmp-{os.getpid()}"
  live.write_text("being written")
  file_trees.claim_as_ours(live, os.getpid())
  kept = model_dir / "data" / "corpus_train.txt"
  kept.write_text("done")
  # 38.4: a user's files named like our temporaries, without our owner
  # record (a dated copy; a dead pid's name), are not train.py's to delete.
  users = [model_dir / "mymodel.tmp-20240102",
           model_dir / "data" / f"notes.txt.tmp-{dead.stdout.strip()}"]
  for path in users:
    path.write_text("mine")
  removed = train_lib.clean_stale_temps(str(model_dir))
  assert sorted(removed) == sorted([str(model_dir / "ckpt-4_temp"),
                                    str(stale)])
  assert live.exists() and kept.exists()
  assert [path.read_text() for path in users] == ["mine", "mine"]
  assert not stale.exists() and not (model_dir / "ckpt-4_temp").exists()


def test_a_users_params_yaml_is_refused_before_anything_is_written(
    tmp_path):
  """A name is no proof: a params.yaml without our first line
  (`run_plan.PARAMS_HEADER`) is refused, named and kept, before a write."""
  run = utils.make_tiny_run(tmp_path, train_steps=2)
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  (model_dir / "params.yaml").write_text("task:\n  name: mine\n")
  before = file_trees.files_under(model_dir)
  with pytest.raises(FileExistsError, match="^" + re.escape(
      f"{model_dir}/params.yaml exists and no manifest of realformer_tf "
      "lists it (not written by us), so nothing was written: move it away, "
      "or write elsewhere.") + "$"):
    utils.run_in_process(model_dir, [run["config_file"]])
  assert file_trees.files_under(model_dir) == before


def test_params_yaml_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
  """Model Garden's `serialize_config` writes params.yaml in place, at every
  run's start: a kill inside that write left it truncated, and resume,
  export and `load_run` read it. A write stopped part way now leaves the
  previous file byte for byte, and no temporary behind."""
  model_dir = str(tmp_path)
  params = experiments.realformer_quickstart()
  train_lib.write_params_yaml(params, model_dir)
  path = run_directory.params_path(model_dir)
  with open(path, "rb") as f:
    before = f.read()
  assert before.startswith(run_plan.PARAMS_HEADER.encode())
  assert run_directory.load_experiment_config(model_dir).as_dict() == (
      params.as_dict())
  written_to = []

  def stopped_write(unused_params, file_path):
    written_to.append(file_path)
    with open(file_path, "w") as f:
      f.write("task:\n  model:\n")  # Cut short here.
    raise KeyboardInterrupt

  monkeypatch.setattr(train_lib.hyperparams, "save_params_dict_to_yaml",
                      stopped_write)
  params.trainer.train_steps = 7
  with pytest.raises(KeyboardInterrupt):
    train_lib.write_params_yaml(params, model_dir)
  assert written_to and written_to[0] != path
  with open(path, "rb") as f:
    assert f.read() == before
  assert os.listdir(model_dir) == ["params.yaml"]


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
  run = utils.make_tiny_run(tmp_path)
  fresh = tmp_path / "fresh"
  flags = dict(experiment="realformer/pretraining",
               config_file=[run["config_file"]], params_override="",
               tpu=None, mode="train")
  train_lib.dry_run(utils.Flags(model_dir=str(fresh), **flags))
  assert not fresh.exists()  # A new run: nothing created.
  text = capsys.readouterr().out
  assert f"Plan for --mode=train --model_dir={fresh}:" in text
  assert f"  task.train_data: 1 file(s) ({run['train_file']})" in text
  assert f"  task.vocab_file: {run['vocab_file']} (64 tokens, sha256 " in text
  assert "  resumes: nothing (a new run)" in text
  model_dir = tmp_path / "run"
  utils.run_in_process(model_dir, [run["config_file"]])
  before = file_trees.files_under(str(model_dir))
  train_lib.dry_run(utils.Flags(model_dir=str(model_dir), **flags))
  assert file_trees.files_under(str(model_dir)) == before  # Byte for byte.
  assert f"  resumes: {model_dir}/ckpt-6" in capsys.readouterr().out
  with pytest.raises(ValueError, match="must be positive"):
    train_lib.dry_run(utils.Flags(
        model_dir=str(model_dir), **dict(
            flags, params_override="task.train_data.global_batch_size=0")))
  assert file_trees.files_under(str(model_dir)) == before
