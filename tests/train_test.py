"""train.py end to end: quickstart, bad inputs, NaN stop, kill/resume, distribution.

Subprocess tests run train.py (or tests/helpers/distributed_loss_worker.py) exactly as
a user would; the others call `realformer_tf.training.train_lib` in-process.
All models are tiny (hidden 16-32, 1-2 layers, seq 16-32).
"""

import dataclasses
import gc
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from typing import List, Optional

import numpy as np
import pytest
import tensorflow as tf

from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.configs import registry
from realformer_tf.configs import validation
from realformer_tf.training import run_lock
from realformer_tf.training import train_lib
from realformer_tf.training import trainer as trainer_lib
from tests.helpers import shared_data
from tests.helpers import train_runs as utils

CONFIGS = os.path.join(utils.REPO_ROOT, "official_configs")


@dataclasses.dataclass
class Flags(train_utils.ParseConfigOptions):
  """The flags train.py passes to `train_lib.run`."""
  mode: str = "train"
  model_dir: str = ""
  quickstart_input_files: Optional[List[str]] = None
  enable_async_checkpointing: bool = False


def run_in_process(model_dir, config_files, mode="train", params_override="",
                   experiment=experiments.PRETRAINING):
  return train_lib.run(Flags(
      experiment=experiment, config_file=list(config_files),
      params_override=params_override, tpu=None, mode=mode,
      model_dir=str(model_dir)))


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
      run_in_process(model_dir, [run["config_file"]], mode=mode,
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
    train_lib.prepare_and_validate(params, "train", str(model_dir))
  assert not model_dir.exists()  # No data cache built (or overwritten).
  params = experiments.realformer_quickstart()
  params.override({"task": {"validation_data": {"seq_length": 16}}})
  with pytest.raises(ValueError, match=r"one set of records, but "
                     r"task.train_data.seq_length=32 != "
                     r"task.validation_data.seq_length=16"):
    train_lib.prepare_and_validate(params, "train", str(model_dir))
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
      run_in_process(model_dir, [run["config_file"]])
    assert str(e.value).startswith(
        f"--model_dir={str(model_dir)!r} {where}, not a directory"), e.value
  assert not_a_dir.read_text() == "kept"


def test_unknown_experiment_from_the_command_line(tmp_path):
  model_dir = tmp_path / "model"
  proc = utils.run_train(str(model_dir), experiment="realformer/pretrain",
                         timeout=180)
  assert proc.returncode != 0
  (line,) = [l for l in proc.stderr.splitlines() if "Unknown --experiment" in l]
  assert ("Unknown --experiment='realformer/pretrain'; registered RealFormer "
          "experiments: " in line)
  listed = line.split("experiments: ")[1].rstrip(".").split(", ")
  assert {experiments.PRETRAINING, experiments.QUICKSTART} <= set(listed)
  assert not model_dir.exists()


# --------------------------------------------------------------------------
# Input pipeline.
# --------------------------------------------------------------------------


def test_input_pipeline_is_tpu_ready(tmp_path):
  """Paper recipe on TPU: static shapes, per-replica batches, drop_remainder."""
  records = utils.write_pretraining_records(
      str(tmp_path / "train.tfrecord"), 4, seq_length=512,
      max_predictions=80)
  params = train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=experiments.PRETRAINING,
      config_file=[os.path.join(CONFIGS, "models", "bert_small.yaml"),
                   os.path.join(CONFIGS, "experiments", "pretrain_paper.yaml"),
                   os.path.join(CONFIGS, "runtime", "tpu.yaml")],
      params_override=(f"task.train_data.input_path={records},"
                       f"task.validation_data.input_path={records}")))
  task = task_factory.get_task(params.task)
  # 2 hosts x 4 cores: each host's pipeline batches for one replica.
  context = tf.distribute.InputContext(
      num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=8)
  for data in (params.task.train_data, params.task.validation_data):
    assert data.drop_remainder
    spec = task.build_inputs(data, input_context=context).element_spec
    assert set(spec) == {"input_word_ids", "input_mask", "input_type_ids",
                         "masked_lm_positions", "masked_lm_ids",
                         "masked_lm_weights", "next_sentence_labels"}
    for name, tensor_spec in spec.items():
      assert tensor_spec.shape.is_fully_defined(), (name, tensor_spec)
      assert tensor_spec.shape[0] == data.global_batch_size // 8, name
    assert spec["input_word_ids"].shape == (64, 512)
    assert spec["masked_lm_ids"].shape == (64, 80)
    assert spec["input_word_ids"].dtype == tf.int32  # TPU-friendly ints.
  validation.validate_batch_sizes(params, "train_and_eval", 8)
  with pytest.raises(ValueError, match=r"global_batch_size=512 is not "
                     r"divisible by the 3 replicas"):
    validation.validate_batch_sizes(params, "train", 3)


# --------------------------------------------------------------------------
# NaN / Inf loss.
# --------------------------------------------------------------------------


def test_nan_loss_stops_the_run_naming_the_step(tmp_path):
  # Batch 8 in file order (shuffle buffer 1): example 19 is in step 3.
  run = utils.make_tiny_run(tmp_path, poison_index=19, train_steps=6,
                            steps_per_loop=2, checkpoint_interval=2)
  model_dir = tmp_path / "model"
  with pytest.raises(trainer_lib.NonFiniteLossError) as e:
    run_in_process(model_dir, [run["config_file"]])
  assert e.value.step == 3
  message = str(e.value)
  assert "non-finite (nan) at step 3" in message
  assert "steps 3-4" in message
  assert f"latest checkpoint: {model_dir}/ckpt-2" in message
  # Nothing after the NaN was saved.
  assert [os.path.basename(p) for p in
          utils.list_checkpoints(str(model_dir))] == ["ckpt-2"]


def test_finite_divergence_stops_the_run_naming_the_step(tmp_path):
  # Loss ~4.8 (MLM over 64 tokens + NSP) > the bound from step 3 on.
  run = utils.make_tiny_run(tmp_path, train_steps=6, steps_per_loop=2,
                            checkpoint_interval=2)
  model_dir = tmp_path / "model"
  with pytest.raises(trainer_lib.NonFiniteLossError) as e:
    run_in_process(model_dir, [run["config_file"]], params_override=(
        "trainer.loss_upper_bound=1.0,trainer.recovery_begin_steps=3"))
  assert e.value.step == 3
  message = str(e.value)
  assert "diverged (above trainer.loss_upper_bound=1)" in message, message
  assert "at step 3 (train loop of steps 3-4)" in message
  assert f"latest checkpoint: {model_dir}/ckpt-2" in message
  assert [os.path.basename(p) for p in
          utils.list_checkpoints(str(model_dir))] == ["ckpt-2"]


def test_loss_tracking_flags_the_first_step_above_the_bound():
  metric = trainer_lib.LossMeanWithNonFiniteTracking(upper_bound=1e6)
  for value in (3.0, 2e6, float("nan"), 4.0):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 2
  assert metric.first_nonfinite_loss() == 2e6
  metric.reset_state()
  metric.set_upper_bound(float("inf"))
  for value in (3.0, 2e6, float("inf")):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 3
  metric.reset_state()
  metric.set_upper_bound(1e6, first_step=3)  # Before it: not bounded.
  for value in (2e6, 3.0, 5e6):
    metric.update_state(tf.constant(value))
  assert metric.first_nonfinite_step() == 3


# --------------------------------------------------------------------------
# Modes.
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
  assert run_in_process(model_dir, [run["config_file"]], mode="train") == {}
  params_yaml = model_dir / "params.yaml"
  written = params_yaml.stat().st_mtime_ns
  assert registry.load_experiment_config(str(model_dir)).task.vocab_file \
      == run["vocab_file"]

  evaluated = run_in_process(model_dir, [run["config_file"]], mode="eval")
  assert 0.0 <= float(evaluated["masked_lm_accuracy"]) <= 1.0
  assert np.isfinite(float(evaluated["validation_loss"]))
  # A live run holds the directory: a second training run fails at once,
  # naming it, and writes nothing; the eval modes (which write only
  # validation/ summaries) run beside it. Stops by itself: the latest
  # checkpoint is at trainer.train_steps.
  with run_lock.hold(str(model_dir)) as holder:
    with pytest.raises(run_lock.ModelDirBusyError) as e:
      run_in_process(model_dir, [run["config_file"]], mode="train_and_eval")
    assert (f"--model_dir={model_dir} is in use by another run: pid "
            f"{os.getpid()} on host {holder['host']!r} since "
            f"{holder['since']}") in str(e.value)
    continuous = run_in_process(model_dir, [run["config_file"]],
                                mode="continuous_eval")
  assert not (model_dir / run_lock.LOCK_FILE).exists()
  # Same weights, same eval data: the same numbers.
  for key in ("masked_lm_accuracy", "validation_loss"):
    np.testing.assert_allclose(float(continuous[key]),
                               float(evaluated[key]), rtol=1e-6)
  # Both restored the model only: no warning per unused optimizer value.
  assert not _restore_warnings(caplog)
  # Eval modes leave params.yaml alone (no race with a train job).
  assert params_yaml.stat().st_mtime_ns == written
  assert train_lib.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == 4


def _trained_weights(model_dir, config_file, seed):
  run_in_process(model_dir, [config_file], mode="train",
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
  assert experiments.realformer_quickstart().task.train_data.seed == (
      experiments.QUICKSTART_SEED)


def test_reruns_final_eval_refuses_other_model(tmp_path, capsys, caplog):
  run = utils.make_tiny_run(tmp_path, train_steps=4)
  model_dir = tmp_path / "model"
  first = run_in_process(model_dir, [run["config_file"]],
                         mode="train_and_eval")
  record_path = model_dir / train_lib.FINAL_EVAL_FILE
  with open(record_path) as f:
    record = json.load(f)
  assert record["step"] == 4
  np.testing.assert_allclose(record["metrics"]["masked_lm_accuracy"],
                             float(first["masked_lm_accuracy"]), rtol=1e-6)

  # Killed during the final eval: the rerun runs it (same weights, same
  # numbers) and trains no further.
  record_path.unlink()
  capsys.readouterr()
  again = run_in_process(model_dir, [run["config_file"]],
                         mode="train_and_eval")
  out = capsys.readouterr().out
  assert "its final evaluation never finished: running it now" in out
  assert "final eval | step: 4 |" in out
  # It restores the model only: no warning per unused optimizer value.
  assert not _restore_warnings(caplog)
  np.testing.assert_allclose(float(again["masked_lm_accuracy"]),
                             float(first["masked_lm_accuracy"]), rtol=1e-6)
  assert record_path.exists()
  assert train_lib.checkpoint_step(
      tf.train.latest_checkpoint(str(model_dir))) == 4

  # Nothing left to do: says so, returns the recorded metrics.
  done = run_in_process(model_dir, [run["config_file"]],
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
    run_in_process(model_dir, [run["config_file"]], params_override=_override(
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
  live = model_dir / f"final_eval.json.tmp-{os.getpid()}"
  live.write_text("being written")
  kept = model_dir / "data" / "corpus_train.txt"
  kept.write_text("done")
  removed = train_lib.clean_stale_temps(str(model_dir))
  assert sorted(removed) == sorted([str(model_dir / "ckpt-4_temp"),
                                    str(stale)])
  assert live.exists() and kept.exists()
  assert not stale.exists() and not (model_dir / "ckpt-4_temp").exists()


# --------------------------------------------------------------------------
# Quickstart, end to end.
# --------------------------------------------------------------------------


def _quickstart_text(path, max_lines=400):
  """A few WikiText-2 paragraphs in BERT format (sentences, blank lines).

  The shared WikiText-2 valid file, or its handmade stand-in in the same
  format (`tests/helpers/shared_data.py`).
  """
  source, _ = shared_data.real_or_fixture(shared_data.WIKITEXT_VALID)
  lines = []
  with open(source, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line or line.startswith("="):
        if lines and lines[-1]:
          lines.append("")
        continue
      lines.extend(s.strip() + " ." for s in line.split(" . ") if s.strip())
      if len(lines) >= max_lines:
        break
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def test_quickstart_builds_its_data_and_trains(tmp_path):
  text = _quickstart_text(str(tmp_path / "text.txt"))
  small = utils.write_yaml(str(tmp_path / "small.yaml"), {
      "task": {
          "model": {
              "encoder": {"type": "any", "any": {
                  "vocab_size": 300, "hidden_size": 32, "num_layers": 1,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 32}},
              "cls_heads": [{"inner_dim": 32, "num_classes": 2,
                             "dropout_rate": 0.1, "name": "next_sentence"}]},
          "train_data": {"seq_length": 32, "max_predictions_per_seq": 5,
                         "global_batch_size": 8},
          "validation_data": {"seq_length": 32, "max_predictions_per_seq": 5,
                              "global_batch_size": 8}},
      "trainer": {
          "train_steps": 8, "steps_per_loop": 4, "summary_interval": 4,
          "checkpoint_interval": 4, "validation_interval": 8,
          "optimizer_config": {
              "learning_rate": {"polynomial": {"decay_steps": 8}},
              "warmup": {"polynomial": {"warmup_steps": 2}}}}})
  model_dir = tmp_path / "quickstart"
  proc, exit_delay = utils.run_train_timing_exit(
      str(model_dir), [small], experiment=experiments.QUICKSTART,
      mode="train_and_eval", extra=[f"--quickstart_input_files={text}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  # It ends with its summary (Python's finalization, skipped, could sit idle
  # for a minute).
  assert exit_delay < 2.5, exit_delay

  data_dir = model_dir / "data"
  with open(data_dir / "manifest.json") as f:
    counts = json.load(f)["counts"]
  with open(data_dir / "vocab.txt") as f:
    vocab_size = len(f.read().splitlines())
  assert counts["vocab_size"] == vocab_size <= 300
  params = registry.load_experiment_config(str(model_dir))
  assert params.task.name == experiments.QUICKSTART
  assert params.task.train_data.input_path == str(data_dir / "train.tfrecord")
  assert params.task.validation_data.input_path == str(
      data_dir / "eval.tfrecord")
  assert params.task.vocab_file == str(data_dir / "vocab.txt")
  assert params.task.model.encoder.any.vocab_size == vocab_size

  # Progress on the console: step, loss, MLM accuracy, throughput.
  out = proc.stdout
  assert "train | step:      4 | steps/sec:" in out
  for key in ("training_loss", "masked_lm_accuracy", "examples_per_second",
              "learning_rate"):
    assert f"'{key}'" in out, key
  final = [l for l in out.splitlines() if l.startswith("final eval | step: 8")]
  assert final and "masked_lm_accuracy: " in final[0], out[-2000:]
  accuracy = float(final[0].split("masked_lm_accuracy: ")[1].split()[0])
  assert 0.0 <= accuracy <= 1.0
  # TensorBoard summaries and checkpoints.
  assert tf.io.gfile.glob(str(model_dir / "train" / "events.out.tfevents.*"))
  assert tf.io.gfile.glob(
      str(model_dir / "validation" / "events.out.tfevents.*"))
  assert train_lib.checkpoint_step(tf.train.latest_checkpoint(
      str(model_dir))) == 8
  # Each progress block once (Orbit logs and prints it; the absl copy goes).
  assert (proc.stdout + proc.stderr).count(
      "train | step:      4 | steps/sec:") == 1
  # The closing lines: what was reached against what, speed, where things are.
  assert "Held-out masked-LM accuracy: " in out
  assert f"Chance (uniform over the {vocab_size}-token vocabulary)" in out
  assert "always predicting the most frequent masked token" in out
  assert "Speed: 8 training steps in " in out and "examples/s" in out
  assert (f"Checkpoint: {model_dir}/ckpt-8; config: {model_dir}/params.yaml; "
          f"TensorBoard: tensorboard --logdir {model_dir}") in out


# --------------------------------------------------------------------------
# SIGKILL and resume.
# --------------------------------------------------------------------------


def _latest_step(model_dir) -> int:
  latest = tf.train.latest_checkpoint(str(model_dir))
  return train_lib.checkpoint_step(latest) if latest else 0


def _start(model_dir, config):
  return subprocess.Popen(
      utils.train_command(str(model_dir), [config]), cwd=utils.REPO_ROOT,
      env=utils.subprocess_env(), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)


def _kill_after_checkpoint_beyond(proc, model_dir, step, rng, timeout=180):
  """SIGKILLs `proc` at a random moment after a checkpoint past `step`."""
  deadline = time.time() + timeout
  while _latest_step(model_dir) <= step:
    assert proc.poll() is None, (
        "train.py ended before it could be killed:\n" +
        proc.stdout.read()[-3000:])
    assert time.time() < deadline, "no new checkpoint in time"
    time.sleep(0.05)
  time.sleep(rng.uniform(0.0, 0.3))
  assert proc.poll() is None, "train.py finished before the kill"
  proc.send_signal(signal.SIGKILL)
  output = proc.communicate(timeout=60)[0]
  assert proc.returncode == -signal.SIGKILL
  return output


def test_sigkill_then_rerun_resumes_and_stops_at_train_steps(tmp_path):
  train_steps = 400
  run = utils.make_tiny_run(
      tmp_path, train_steps=train_steps, steps_per_loop=5,
      checkpoint_interval=10, batch_size=4, num_train=32)
  model_dir = tmp_path / "model"
  rng = random.Random(os.getpid())

  killed = _start(model_dir, run["config_file"])
  _kill_after_checkpoint_beyond(killed, model_dir, 0, rng)
  first = _latest_step(model_dir)
  assert 0 < first < train_steps
  # The killed run's lock is left behind; the reruns take it over.
  with open(model_dir / run_lock.LOCK_FILE) as f:
    assert json.load(f)["pid"] == killed.pid

  output = _kill_after_checkpoint_beyond(
      _start(model_dir, run["config_file"]), model_dir, first, rng)
  assert f"restored from checkpoint: {model_dir}/ckpt-{first}" in output
  assert f"train | step: {first:6d} | training until step {train_steps}" in (
      output)
  second = _latest_step(model_dir)
  assert first < second < train_steps

  proc = utils.run_train(str(model_dir), [run["config_file"]])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (f"Took over {model_dir / run_lock.LOCK_FILE} from pid " in
          proc.stderr), proc.stderr[-3000:]
  assert not (model_dir / run_lock.LOCK_FILE).exists()
  assert f"restored from checkpoint: {model_dir}/ckpt-{second}" in proc.stdout
  assert (f"train | step: {second:6d} | training until step {train_steps}"
          in proc.stdout)
  assert _latest_step(model_dir) == train_steps
  assert os.path.basename(tf.train.latest_checkpoint(str(model_dir))) == (
      f"ckpt-{train_steps}")
  # Every listed checkpoint is complete: all its tensors read back.
  listed = utils.list_checkpoints(str(model_dir))
  assert 1 <= len(listed) <= 3  # max_to_keep
  for path in listed:
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
    assert int(path.rsplit("-", 1)[1]) == train_lib.checkpoint_step(path)

  # A rerun after completion trains no further (with a --gin_file, which
  # train.py parses and records as Model Garden's train.py does).
  gin_file = tmp_path / "empty.gin"
  gin_file.write_text("# No bindings.\n")
  (model_dir / "operative_config.train.gin").unlink()
  proc = utils.run_train(str(model_dir), [run["config_file"]],
                         extra=[f"--gin_file={gin_file}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (model_dir / "operative_config.train.gin").exists()
  assert (f"already complete at step {train_steps} (trainer.train_steps="
          f"{train_steps}): nothing to do." in proc.stdout)
  assert "steps/sec" not in proc.stdout
  assert "Unresolved object in checkpoint" not in proc.stderr
  assert _latest_step(model_dir) == train_steps


# --------------------------------------------------------------------------
# Distribution: same losses as one device.
# --------------------------------------------------------------------------


def _worker_command(config, init, output, strategies, write_init=False):
  return [sys.executable, "-m", "tests.helpers.distributed_loss_worker",
          f"--config_file={config}", f"--init_checkpoint={init}",
          f"--strategies={strategies}", f"--output={output}", "--steps=3"] + (
              ["--write_init"] if write_init else [])


@pytest.fixture(scope="module")
def one_device_and_mirrored(tmp_path_factory):
  """Per-step losses on one device and on 2 mirrored logical CPUs."""
  tmp_path = tmp_path_factory.mktemp("mirrored")
  # scale_loss: each replica's gradient is divided by the replica count, so
  # the all-reduced (summed) gradient is the one-device mean gradient. (Model
  # Garden's default, False, sums replica gradients: N times larger.)
  # SGD: Adam's first steps divide each gradient coordinate by its own size,
  # so float-rounding differences in near-zero coordinates flip whole
  # updates and the runs drift apart by ~1e-3 within 3 steps; SGD keeps the
  # comparison at rounding level.
  run = utils.make_tiny_run(tmp_path, dropout=0.0, train_steps=3,
                            scale_loss=True, sgd=True, learning_rate=0.5)
  init = str(tmp_path / "init")
  output = str(tmp_path / "losses.json")
  proc = subprocess.run(
      _worker_command(run["config_file"], init, output,
                      "one_device,mirrored", write_init=True),
      cwd=utils.REPO_ROOT, env=utils.subprocess_env(), capture_output=True,
      text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(output) as f:
    return dict(json.load(f), config=run["config_file"], init=init,
                tmp_path=tmp_path)


def test_mirrored_strategy_matches_one_device(one_device_and_mirrored):
  one = one_device_and_mirrored["one_device"]
  mirrored = one_device_and_mirrored["mirrored"]
  assert (one["num_replicas"], mirrored["num_replicas"]) == (1, 2)
  assert one["global_step"] == mirrored["global_step"] == 3
  # Same weights, same examples, no dropout, mean gradients: the same losses
  # up to float rounding (reduction order).
  np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-4)
  assert len(set(np.round(one["losses"], 4))) == 3  # It did train.


def _free_ports(n):
  sockets = []
  for _ in range(n):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    sockets.append(s)
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def test_multi_worker_mirrored_matches_one_device(one_device_and_mirrored):
  ref = one_device_and_mirrored
  tmp_path = ref["tmp_path"]
  workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
  procs = []
  for index in range(2):
    tf_config = json.dumps({"cluster": {"worker": workers},
                            "task": {"type": "worker", "index": index}})
    procs.append(subprocess.Popen(
        _worker_command(ref["config"], ref["init"],
                        str(tmp_path / f"worker{index}.json"),
                        "multi_worker_mirrored"),
        cwd=utils.REPO_ROOT, env=utils.subprocess_env({"TF_CONFIG": tf_config}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  try:
    outputs = [p.communicate(timeout=300)[0] for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  for p, out in zip(procs, outputs):
    assert p.returncode == 0, out[-3000:]
  one = ref["one_device"]
  for index in range(2):
    with open(tmp_path / f"worker{index}.json") as f:
      worker = json.load(f)["multi_worker_mirrored"]
    assert worker["num_replicas"] == 2
    assert worker["global_step"] == 3
    np.testing.assert_allclose(worker["losses"], one["losses"], rtol=1e-4)
