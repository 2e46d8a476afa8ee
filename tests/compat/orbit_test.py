"""Upstream Orbit defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once Orbit fixes it: then
the workaround named in its message can go.
"""

import os
import types

import orbit
from orbit import controller as orbit_controller
import tensorflow as tf

from realformer_tf.compat import tensorflow as compat_tf


def test_an_async_save_is_called_saved_before_it_is_written(
    tmp_path, monkeypatch):
  """`training.controller.Controller` (its write callback says "saved")."""
  blocker = tmp_path / "file"
  blocker.write_text("")
  checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
  step = tf.Variable(1, dtype=tf.int64)
  said = []
  monkeypatch.setattr(orbit_controller, "_log", said.append)
  fake = types.SimpleNamespace(
      checkpoint_manager=tf.train.CheckpointManager(
          checkpoint, os.path.join(blocker, "c"), max_to_keep=1,
          step_counter=step, checkpoint_interval=1),
      global_step=step, _checkpoint_options=tf.train.CheckpointOptions(
          experimental_enable_async_checkpoint=True))
  assert orbit.Controller._maybe_save_checkpoint(fake)  # pylint: disable=protected-access
  checkpoint.sync()
  assert isinstance(compat_tf.take_async_error(checkpoint), tf.errors.OpError)
  assert [line for line in said if line.startswith("saved checkpoint")], (
      "upstream says saved once written: delete training.controller's "
      "write callback")
