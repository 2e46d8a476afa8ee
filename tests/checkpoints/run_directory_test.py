"""Tests of realformer_tf/checkpoints/run_directory.py: a run's config and
encoder config, its newest readable checkpoint, its lock, and the backup a
killed swap leaves."""

import os

import pytest
import tensorflow as tf
import yaml

from official.core import train_utils
from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.core import writes
from tests.helpers import file_trees
from tests.helpers import kill_writer


def _save(directory, steps):
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(tf.ones([64]))), directory,
      max_to_keep=5)
  return [manager.save(checkpoint_number=s) for s in steps]


def _quickstart_run(model_dir, **encoder):
  config = experiments.realformer_quickstart()
  config.override({"task": {"vocab_file": "/data/vocab.txt", "model": {
      "encoder": {"any": dict(residual_attention="mean", **encoder)}}}})
  train_utils.serialize_config(config, str(model_dir))
  return config


def test_params_yaml_rebuilds_the_config(tmp_path):
  config = _quickstart_run(tmp_path, num_layers=3)
  rebuilt = run_directory.load_experiment_config(str(tmp_path))
  assert rebuilt.as_dict() == config.as_dict()
  # The factory's classes, not plain YAML: the encoder keeps its builder.
  assert isinstance(rebuilt.task.model.encoder.get(),
                    encoders.RealFormerEncoderConfig)


def test_missing_or_anonymous_params_yaml_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=str(tmp_path / "params.yaml")):
    run_directory.load_experiment_config(str(tmp_path))
  (tmp_path / "params.yaml").write_text("task:\n  vocab_file: ''\n")
  with pytest.raises(ValueError, match="has no task.name"):
    run_directory.load_experiment_config(str(tmp_path))


def test_find_run_and_its_files(tmp_path):
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  _quickstart_run(run_dir)
  (prefix,) = _save(str(run_dir), [7])
  for path in (str(run_dir), prefix, str(run_dir) + "/"):
    run = run_directory.find_run(path)
    assert run.directory == str(run_dir)
  assert run.vocab_file == "/data/vocab.txt"
  assert run.params_path == str(run_dir / "params.yaml")
  assert run_directory.resolve_checkpoint(run.directory, "x") == prefix
  assert run_directory.find_run(str(tmp_path)) is None
  assert run_directory.find_run("") is None


def test_newest_checkpoint_is_the_state_files_unread(tmp_path):
  """What a resumed run restores: the newest named, even if damaged (the
  readers' `resolve_checkpoint` falls back past it)."""
  assert run_directory.newest_checkpoint(str(tmp_path / "none")) is None
  assert run_directory.newest_checkpoint("") is None
  older, newer = _save(str(tmp_path), [1, 2])
  with open(newer + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  assert run_directory.newest_checkpoint(str(tmp_path)) == newer
  assert run_directory.resolve_checkpoint(str(tmp_path), "x") == older
  assert run_directory.params_path(str(tmp_path)) == str(
      tmp_path / "params.yaml")


def test_encoder_config_from_params_or_encoder_yaml(tmp_path):
  _quickstart_run(tmp_path)
  where, config = run_directory.encoder_config(str(tmp_path / "ckpt-1"))
  assert where.endswith("params.yaml: task.model.encoder.any")
  assert config.residual_attention == "mean"
  converted = tmp_path / "converted"
  converted.mkdir()
  (converted / "encoder.yaml").write_text(yaml.safe_dump(
      {"task": {"model": {"encoder": {"type": "any", "any": {
          "residual_attention": "none"}}}}}))
  where, config = run_directory.encoder_config(str(converted))
  assert where.endswith("encoder.yaml: task.model.encoder")
  assert config.get().residual_attention == "none"
  (converted / "encoder.yaml").write_text("task: {model: 3}\n")
  with pytest.raises(ValueError, match="encoder.yaml does not hold"):
    run_directory.encoder_config(str(converted))
  (tmp_path / "bare").mkdir()
  with pytest.raises(ValueError, match="Neither .*bare/params.yaml nor "
                     ".*bare/encoder.yaml exists.*pass encoder_config="):
    run_directory.encoder_config(str(tmp_path / "bare"))


def test_a_directory_set_aside_by_a_killed_swap_is_named(tmp_path):
  path = str(tmp_path / "converted")
  pid = kill_writer.dead_pid()
  backup = f"{path}.old-{pid}"
  os.makedirs(backup)
  file_trees.claim_as_ours(backup, pid)
  assert writes.interrupted_swap(path, utils.GFILE_OPS) == backup
  for read in (lambda: run_directory.resolve_checkpoint(path, "init"),
               lambda: run_directory.encoder_config(path),
               lambda: run_directory.load_experiment_config(path)):
    with pytest.raises(ValueError, match=f"does not exist, but {backup} "
                       "holds it"):
      read()
  writes.recover(path, utils.GFILE_OPS)  # What writers do.
  assert os.listdir(tmp_path) == ["converted"]
  assert writes.interrupted_swap(path, utils.GFILE_OPS) is None


def test_prefix_and_directory(tmp_path):
  first, second = _save(str(tmp_path), [1, 2])
  assert run_directory.resolve_checkpoint(str(tmp_path), "x") == second
  assert run_directory.resolve_checkpoint(first, "x") == first


def test_falls_back_past_deleted_truncated_and_short_data(tmp_path, caplog):
  first, second, third, fourth = _save(str(tmp_path), [1, 2, 3, 4])
  with open(fourth + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)  # 64 floats, the save counter, the object graph: 444.
  os.remove(third + ".index")
  with open(second + ".index", "r+b") as f:
    f.truncate(10)
  assert run_directory.check_files(fourth).endswith(
      "hold 100 bytes, less than the 444 bytes of tensors its index lists "
      "(truncated)")
  with caplog.at_level("WARNING"):
    assert run_directory.resolve_checkpoint(str(tmp_path), "x") == first
  assert "skipped unreadable newer checkpoints" in caplog.text
  for name in (fourth, third, second):
    assert name in caplog.text


def _save_many(directory, steps):
  """Checkpoints of 300 variables: an object graph of about 30 kB, the
  string tensor a sum of the fixed-size tensors leaves out."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(
      vs=[tf.Variable(tf.ones([4])) for _ in range(300)]), directory,
      max_to_keep=5)
  return [manager.save(checkpoint_number=s) for s in steps]


@pytest.mark.parametrize("cut", [1, 20_000])
def test_a_cut_shorter_than_the_object_graph_is_caught(tmp_path, cut):
  """Issue 46 item 5: the fixed-size tensors' bytes (300 x 16 and the save
  counter) fit in what is left, so a sum of them passed a data file cut by
  less than the object graph; each tensor's offset and size in the index
  do not."""
  older, newest = _save_many(str(tmp_path), [2, 4])
  data = newest + ".data-00000-of-00001"
  size = os.path.getsize(data)
  assert size - cut > 300 * 16 + 8
  with open(data, "r+b") as f:
    f.truncate(size - cut)
  assert run_directory.check_files(newest) == (
      f"{newest}.data-* hold {size - cut} bytes, less than the {size} bytes "
      "of tensors its index lists (truncated)")
  assert run_directory.check_files(older) is None
  error = tf.errors.DataLossError(None, None, "Checksum does not match")
  assert str(run_directory.damaged_checkpoint_error(newest, error)) == (
      f"Checkpoint {newest} is damaged (DataLossError: Checksum does not "
      f"match), so nothing was run. Its newest older whole checkpoint is "
      f"{older}: point the run's state file at it with tf.compat.v1.train."
      f"update_checkpoint_state({str(tmp_path)!r}, {older!r}).")
  assert str(run_directory.damaged_checkpoint_error(older, error)).endswith(
      "No older checkpoint of the run is whole.")
  assert run_directory.resolve_checkpoint(str(tmp_path), "x") == older


def test_every_shard_is_checked_against_its_own_tensors(tmp_path):
  """A checkpoint written in two shards (a sharding policy of one tensor a
  shard): cutting either is caught."""
  variables = [tf.Variable(tf.ones([64]) * i) for i in range(2)]
  options = tf.train.CheckpointOptions(
      experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(
          max_shard_size=300))
  prefix = tf.train.Checkpoint(vs=variables).write(
      str(tmp_path / "ckpt-1"), options=options)
  shards = sorted(tf.io.gfile.glob(prefix + ".data-*"))
  assert len(shards) > 1 and run_directory.check_files(prefix) is None
  for shard in shards:
    content = open(shard, "rb").read()
    with open(shard, "wb") as f:
      f.write(content[:-1])
    assert run_directory.check_files(prefix).endswith("(truncated)"), shard
    with open(shard, "wb") as f:
      f.write(content)


def test_readers_of_a_run_without_its_state_file_take_its_newest_whole_ckpt(
    tmp_path, caplog):
  """Issue 38: a copy of `ckpt-*` without the `checkpoint` state file was
  called "a directory without a checkpoint" by every reader (export,
  analysis, load_run, an init checkpoint). Readers take its newest whole
  `ckpt-N`, by step, and say so; training refuses it
  (`run_resume_test`)."""
  d = str(tmp_path)
  first, second, third = _save(d, [5, 10, 40])
  os.remove(os.path.join(d, "checkpoint"))
  with open(third + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  with caplog.at_level("WARNING"):
    assert run_directory.resolve_checkpoint(d, "--model_dir") == second
  assert "no 'checkpoint' state file" in caplog.text
  assert "ckpt-40, ckpt-10, ckpt-5" in caplog.text
  assert "skipped unreadable newer checkpoints" in caplog.text
  for prefix in (first, second, third):
    for f in tf.io.gfile.glob(prefix + ".*"):
      os.remove(f)
  with pytest.raises(ValueError, match="without a checkpoint.*no ckpt-"):
    run_directory.resolve_checkpoint(d, "--model_dir")


def test_read_latest_skips_what_read_cannot_read(tmp_path):
  first, second = _save(str(tmp_path), [1, 2])

  def read(prefix):
    if prefix == second:
      raise tf.errors.DataLossError(None, None, "Checksum does not match")
    return "read " + prefix

  assert run_directory.read_latest(str(tmp_path), "x", read) == (
      first, "read " + first)


def test_errors_name_the_argument(tmp_path):
  d = str(tmp_path)
  with pytest.raises(ValueError, match="task.init_checkpoint=.*without"):
    run_directory.resolve_checkpoint(d, "task.init_checkpoint")
  with pytest.raises(ValueError, match="ckpt-9.index does not exist"):
    run_directory.resolve_checkpoint(os.path.join(d, "ckpt-9"), "--checkpoint")
  with pytest.raises(ValueError, match="is empty"):
    run_directory.resolve_checkpoint("", "--checkpoint")
  (prefix,) = _save(d, [4])
  with open(prefix + ".index", "r+b") as f:
    f.truncate(10)
  with pytest.raises(ValueError, match="--checkpoint=.*not a readable"):
    run_directory.resolve_checkpoint(prefix, "--checkpoint")
  with pytest.raises(ValueError, match="no readable checkpoint"):
    run_directory.resolve_checkpoint(d, "--checkpoint")


def test_broken_yaml_is_named_with_its_line(tmp_path):
  """Issue 38 item 11: a raw yaml ParserError."""
  _quickstart_run(tmp_path)
  params = tmp_path / "params.yaml"
  lines = params.read_text().splitlines()
  lines[2] = lines[2] + ": [unclosed"
  params.write_text("\n".join(lines) + "\n")
  with pytest.raises(ValueError, match=rf"^{params}:3:\d+: not valid YAML "
                     r"\(.*\)\. Fix that line"):
    run_directory.load_experiment_config(str(tmp_path))
  converted = tmp_path / "converted"
  converted.mkdir()
  (converted / "encoder.yaml").write_text("task:\n  model: {encoder: [\n")
  with pytest.raises(ValueError, match=rf"^{converted}/encoder.yaml:\d+:\d+: "
                     "not valid YAML"):
    run_directory.encoder_config(str(converted))
