"""Upstream TensorFlow defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once TensorFlow fixes it:
then the workaround named in its message can go.
"""

import os

from jax.experimental import jax2tf
import jax.numpy as jnp
import pytest
import tensorflow as tf

from realformer_tf.compat import tensorflow as compat_tf


@pytest.fixture(name="unwritable")
def _unwritable(tmp_path):
  """A folder path under a plain file: every write there fails."""
  blocker = tmp_path / "file"
  blocker.write_text("")
  return str(blocker / "checkpoints")


def test_a_failed_save_marks_its_step_saved(unwritable):
  """`compat.tensorflow.set_last_checkpoint_step` (`Controller.save_at_stop`,
  `multi_worker.align_checkpoint_interval`)."""
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.0)), unwritable, max_to_keep=1,
      step_counter=tf.Variable(3, dtype=tf.int64), checkpoint_interval=1)
  with pytest.raises(tf.errors.OpError):
    manager.save()
  assert manager.save(check_interval=False) is None, (
      "upstream fixed a failed save marking its step saved: delete "
      "compat.tensorflow.set_last_checkpoint_step's call in save_at_stop")


def test_a_failed_async_write_raises_nowhere(unwritable):
  """`compat.tensorflow.take_async_error` (`training.controller`)."""
  checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
  checkpoint.save(os.path.join(unwritable, "ckpt"), options=(
      tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)))
  checkpoint.sync()  # Raises nothing.
  assert isinstance(compat_tf.take_async_error(checkpoint),
                    tf.errors.OpError), (
                        "upstream fixed async write errors: delete "
                        "compat.tensorflow.take_async_error")


def test_jax2tf_custom_gradients_cannot_be_saved_again(tmp_path):
  """`keras3.export_checks` saves with `experimental_custom_gradients=False`:
  a loaded jax2tf function's gradient captures its own inputs."""
  module = tf.Module()
  module.w = tf.Variable(2.0)
  sine = jax2tf.convert(lambda w, x: jnp.sin(w * x), with_gradient=True)
  spec = [tf.TensorSpec([2], tf.float32)]
  module.f = tf.function(lambda x: sine(module.w, x), input_signature=spec,
                         autograph=False)
  tf.saved_model.save(module, str(tmp_path / "a"))
  again = tf.Module()
  again.loaded = tf.saved_model.load(str(tmp_path / "a"))
  again.f = tf.function(again.loaded.f, input_signature=spec)
  try:
    tf.saved_model.save(again, str(tmp_path / "b"))
  except ValueError as e:
    assert "invalid capture" in str(e), e
  else:
    pytest.fail("upstream fixed saving a loaded jax2tf function again: "
                "drop export_checks' experimental_custom_gradients=False")
  tf.saved_model.save(again, str(tmp_path / "c"), options=(
      tf.saved_model.SaveOptions(experimental_custom_gradients=False)))
