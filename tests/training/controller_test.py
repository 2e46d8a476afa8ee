"""A checkpoint is called saved only once it is; a failed write stops the run;
a stopped run saves the step it stopped at.

The write of `ckpt-4` is made to fail as a full disk does (TensorFlow's
saver leaves `ckpt-4_temp/` and raises ResourceExhaustedError), in the
background thread of an async save (train.py's default) and in a plain one.
"""

import os
import signal

import orbit
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint as tf_checkpoint

from official.core import train_utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.training import controller as controller_lib
from realformer_tf.training import stop_signals
from realformer_tf.training import train_lib
from tests.helpers import train_runs as utils


def _fail_writing(monkeypatch, name: str) -> None:
  """Makes the checkpoint writer fail for checkpoint `name` (disk full)."""
  real_save = tf_checkpoint.TrackableSaver.save

  def save(self, file_prefix, *args, **kwargs):
    prefix = tf.compat.as_str(getattr(file_prefix, "numpy",
                                      lambda: file_prefix)())
    if os.path.basename(prefix) == name:
      os.makedirs(f"{prefix}_temp")
      part = f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001"
      with open(part, "wb") as f:
        f.write(b"\0" * 64)
      raise tf.errors.ResourceExhaustedError(
          None, None, f"{part}; No space left on device")
    return real_save(self, file_prefix, *args, **kwargs)

  monkeypatch.setattr(tf_checkpoint.TrackableSaver, "save", save)


@pytest.mark.parametrize("enable_async", [True, False])
def test_failed_checkpoint_write_stops_the_run_naming_it(
    tmp_path, monkeypatch, capsys, enable_async):
  run = utils.make_tiny_run(tmp_path, train_steps=6, num_train=32,
                            num_eval=8)
  params = train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=experiments.PRETRAINING, config_file=[run["config_file"]],
      params_override="", tpu=None))
  model_dir = str(tmp_path / "model")
  _fail_writing(monkeypatch, "ckpt-4")
  with pytest.raises(controller_lib.CheckpointSaveError) as e:
    train_lib.run_experiment(params, "train", model_dir,
                             enable_async_checkpointing=enable_async)
  message = str(e.value)
  good, bad = f"{model_dir}/ckpt-2", f"{model_dir}/ckpt-4"
  assert e.value.path == bad
  assert f"Saving checkpoint {bad} failed: ResourceExhaustedError: " in message
  assert "No space left on device" in message
  assert "(the disk is full?)" in message
  assert f"The last good checkpoint, {good}, is kept as it was" in message
  assert f"removed the partial {bad}_temp" in message
  # Stopped at once: at the end of the loop the async write failed in
  # (steps 5-6), or at once for a plain write.
  assert f"Training stopped at step {6 if enable_async else 4}." in message

  out = capsys.readouterr().out
  assert f"saved checkpoint to {good}." in out
  assert "saved checkpoint to " + bad not in out
  assert tf.train.latest_checkpoint(model_dir) == good
  assert run_directory.checkpoint_step(good) == 2
  assert not tf.io.gfile.glob(f"{bad}*")
  assert sorted(os.listdir(model_dir)) == [
      "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
      # The records' scan (they have no manifest), kept for a restart.
      "data_scan.json", "params.yaml", "train"]  # The lock is released too.
  assert run_directory.LOCK_FILE not in os.listdir(model_dir)


@pytest.mark.parametrize("enable_async", [True, False])
@pytest.mark.parametrize("inside_save", [True, False])
def test_a_stopped_run_saves_the_step_it_stopped_at(
    tmp_path, monkeypatch, capsys, enable_async, inside_save):
  """A stop at step 4, between the periodic saves of steps 2 and 8: either
  after the loop (`inside_save=False`) or inside the manager's save of step 4,
  after it marked the step saved and before it wrote (as a signal cuts it).
  """
  run = utils.make_tiny_run(tmp_path, train_steps=8, num_train=32,
                            num_eval=8, checkpoint_interval=6)
  params = train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=experiments.PRETRAINING, config_file=[run["config_file"]],
      params_override="", tpu=None))
  model_dir = str(tmp_path / "model")
  real_save = tf.train.CheckpointManager.save
  stopped = []

  def save(self, checkpoint_number=None, check_interval=True, options=None):
    step = int(self._step_counter.numpy())  # pylint: disable=protected-access
    if step == 4 and not stopped:
      stopped.append(step)
      if inside_save:
        self._last_checkpoint_step = step  # pylint: disable=protected-access
      raise stop_signals.Stopped(signal.SIGTERM)
    return real_save(self, checkpoint_number, check_interval, options)

  monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
  with pytest.raises(stop_signals.Stopped) as e:
    train_lib.run_experiment(params, "train", model_dir,
                             enable_async_checkpointing=enable_async)
  assert e.value.step == 4
  saved = f"{model_dir}/ckpt-4"
  assert tf.train.latest_checkpoint(model_dir) == saved
  out = capsys.readouterr().out
  assert f"saved checkpoint to {saved}." in out
  assert (f"stopped at step 4 by SIGTERM; latest checkpoint: {saved} "
          "(step 4).") in out
  assert run_directory.checkpoint_step(saved) == 4
  assert run_directory.LOCK_FILE not in os.listdir(model_dir)


def _run_params(tmp_path, **overrides):
  run = utils.make_tiny_run(tmp_path, num_train=32, num_eval=8, **overrides)
  return train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=experiments.PRETRAINING, config_file=[run["config_file"]],
      params_override="", tpu=None))


def test_a_signal_inside_a_save_waits_for_the_save(tmp_path, monkeypatch,
                                                   capsys):
  """Issue 36 CI: SIGTERM during the periodic save of step 8 raised
  `Stopped` inside TensorFlow's trace of the async copy function, which
  came out as `RuntimeError: in user code:` (exit 1, "Saving checkpoint
  ckpt-2 failed"). Now the save runs to its end, then the run stops."""
  params = _run_params(tmp_path, train_steps=12, checkpoint_interval=6)
  model_dir = str(tmp_path / "model")
  real_save = tf.train.CheckpointManager.save
  events = []

  def save(self, *args, **kwargs):
    if int(self._step_counter.numpy()) == 8 and not events:  # pylint: disable=protected-access
      os.kill(os.getpid(), signal.SIGTERM)
      for _ in range(10 ** 6):  # The handler would run between these.
        pass
      events.append("the save went on")
    return real_save(self, *args, **kwargs)

  monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
  with pytest.raises(stop_signals.Stopped) as e:
    train_lib.run_experiment(params, "train", model_dir,
                             enable_async_checkpointing=True)
  assert events == ["the save went on"]
  assert e.value.step == 8
  saved = f"{model_dir}/ckpt-8"
  out = capsys.readouterr().out
  assert f"saved checkpoint to {saved}." in out
  assert (f"stopped at step 8 by SIGTERM; latest checkpoint: {saved} "
          "(step 8).") in out
  assert tf.train.latest_checkpoint(model_dir) == saved


def test_a_failed_save_names_its_own_checkpoint_and_the_original_error(
    tmp_path, monkeypatch):
  """The CI failure above also named the wrong checkpoint (ckpt-2, saved
  and confirmed, not the ckpt-8 that failed) and only AutoGraph's first
  line ("in user code:") for the cause."""
  params = _run_params(tmp_path, train_steps=12, checkpoint_interval=6)
  model_dir = str(tmp_path / "model")
  real_save = tf.train.CheckpointManager.save

  def save(self, *args, **kwargs):
    if int(self._step_counter.numpy()) == 8:  # pylint: disable=protected-access
      raise RuntimeError(
          "in user code:\n\n    File \"helper.py\", line 430, in copy\n"
          "        any(output.consumers() for output in op.outputs)\n\n"
          "    SystemError: bad argument to internal function\n")
    return real_save(self, *args, **kwargs)

  monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
  with pytest.raises(controller_lib.CheckpointSaveError) as e:
    train_lib.run_experiment(params, "train", model_dir,
                             enable_async_checkpointing=True)
  bad, good = f"{model_dir}/ckpt-8", f"{model_dir}/ckpt-2"
  assert e.value.path == bad
  assert str(e.value).startswith(
      f"Saving checkpoint {bad} failed: SystemError: bad argument to "
      "internal function. Training stopped at step 8. The last good "
      f"checkpoint, {good}, is kept as it was."), str(e.value)


class _Evaluator(orbit.runner.AbstractEvaluator):

  def evaluate(self, num_steps):
    return {}


@pytest.mark.parametrize("with_older", [True, False])
def test_a_damaged_byte_is_named_with_the_checkpoint_to_use(tmp_path,
                                                            with_older):
  """Issue 46 item 5: a flipped byte inside a tensor keeps the file's length
  (`check_files` passes) and made the restore end in TensorFlow's raw
  DataLossError traceback."""
  d = str(tmp_path)
  checkpoint = tf.train.Checkpoint(v=tf.Variable(tf.ones([1024])))
  manager = tf.train.CheckpointManager(checkpoint, d, max_to_keep=5)
  older, newest = [manager.save(checkpoint_number=s) for s in (2, 4)]
  if not with_older:
    os.remove(older + ".index")
  with open(newest + ".data-00000-of-00001", "r+b") as f:
    f.seek(2048)  # Inside `v`'s 4096 bytes, at offset 0.
    byte = f.read(1)
    f.seek(2048)
    f.write(bytes([byte[0] ^ 0xFF]))
  assert run_directory.check_files(newest) is None
  with pytest.raises(ValueError) as e:
    controller_lib.Controller(
        evaluator=_Evaluator(), global_step=tf.Variable(0, dtype=tf.int64),
        checkpoint_manager=tf.train.CheckpointManager(
            tf.train.Checkpoint(v=tf.Variable(tf.zeros([1024]))), d,
            max_to_keep=5))
  message = str(e.value)
  assert "\n" not in message
  assert message.startswith(f"Checkpoint {newest} is damaged (DataLossError: "
                            f"TensorBundle at {newest} shard 0 "), message
  assert "Checksum does not match" in message
  if with_older:
    assert message.endswith(
        f"Its newest older whole checkpoint is {older}: point the run's state "
        "file at it with tf.compat.v1.train.update_checkpoint_state("
        f"{d!r}, {older!r})."), message
  else:
    assert "No older checkpoint of the run is whole" in message
