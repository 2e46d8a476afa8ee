"""Orbit's `Controller`, that calls a checkpoint saved only once it is.

Orbit prints "saved checkpoint" when an async save starts, and TensorFlow
raises a failed write only at the next save (or not at all for the last one).
Here the line is printed by a write callback, and after every train loop and
sync a failed write raises `CheckpointSaveError`, its leftovers removed.
"""

import copy
import os
from typing import Optional

import orbit
import tensorflow as tf

from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.compat import tensorflow as compat_tf
from realformer_tf.training import run_summary
from realformer_tf.training import stop_signals


class CheckpointSaveError(RuntimeError):
  """Writing a checkpoint failed; training stopped."""

  def __init__(self, message: str, path: str):
    super().__init__(message)
    self.path = path


def _cause(error: Optional[BaseException]) -> str:
  if error is None:
    return "the write ended without completing"
  message = getattr(error, "message", None) or str(error)
  lines = [line.strip() for line in message.strip().splitlines()]
  if lines and lines[0] == "in user code:":
    # AutoGraph's message: the frames, then the original "Type: message".
    cause = lines[-1]
  else:
    cause = f"{type(error).__name__}: {lines[0] if lines else ''}"
  if (isinstance(error, tf.errors.ResourceExhaustedError) or
      "No space left" in message):
    cause += " (the disk is full?)"
  return cause


class Controller(orbit.Controller):
  """See the module docstring."""

  # Class defaults, so set before Orbit's constructor, which may restore a
  # checkpoint.
  _unconfirmed_save = None  # An async save not yet known complete.
  _last_written = None  # Set by `_written` (a background thread).

  def restore_checkpoint(self, checkpoint_path: Optional[str] = None):
    """Orbit's; a damaged byte: `run_directory.damaged_checkpoint_error`."""
    try:
      return super().restore_checkpoint(checkpoint_path)
    except tf.errors.DataLossError as e:
      raise run_directory.damaged_checkpoint_error(
          checkpoint_path or self.checkpoint_manager.latest_checkpoint,
          e) from None

  def _written(self, save_path: str) -> None:
    """Write callback: `save_path` is complete on disk."""
    self._last_written = save_path
    run_summary.console(f"saved checkpoint to {save_path}.")

  def _fail(self, path: str, error: Optional[BaseException]) -> None:
    removed = []
    for temp in tf.io.gfile.glob(f"{path}_temp*"):
      utils.remove(temp)
      removed.append(temp)
    self._unconfirmed_save = None
    latest = run_directory.newest_checkpoint(
        self.checkpoint_manager.directory)
    raise CheckpointSaveError(
        f"Saving checkpoint {path} failed: {_cause(error)}. Training stopped "
        f"at step {int(self.global_step.numpy())}. The last good checkpoint, "
        f"{latest or 'none'}, is kept as it was"
        + (f"; removed the partial {', '.join(removed)}" if removed else "") +
        ". Fix the cause (e.g. free disk space), then rerun the same command "
        "to resume from it.", path) from error

  def _pending_save(self) -> Optional[str]:
    """The last async save's path, until its write callback confirmed it."""
    path = self._unconfirmed_save
    return None if path == self._last_written else path

  def _check_saves(self, synced: bool) -> None:
    """Raises `CheckpointSaveError` if the unconfirmed async save failed (or
    has ended, `synced`, unconfirmed)."""
    path = self._pending_save()
    if path is None:
      return
    error = compat_tf.take_async_error(self.checkpoint_manager.checkpoint)
    if error is not None or synced:
      self._fail(path, error)

  def _maybe_save_checkpoint(self, check_interval: bool = True) -> bool:
    """Orbit's, with the "saved" line and the errors of the module docstring."""
    manager = self.checkpoint_manager
    if not (manager and manager.checkpoint_interval):
      return False
    self._check_saves(synced=False)
    step = int(self.global_step.numpy())
    # Model Garden's `run_experiment` keeps the default checkpoint name.
    path = os.path.join(manager.directory, f"ckpt-{step}")
    options = copy.copy(self._checkpoint_options)
    options.experimental_write_callbacks = [self._written]
    # A stop signal must not break TensorFlow's trace of the async copy.
    with stop_signals.held():
      try:
        saved = manager.save(checkpoint_number=step,
                             check_interval=check_interval, options=options)
      except (tf.errors.OpError, OSError, ValueError, RuntimeError) as e:
        # A sync write failed, or an async one raised the previous failure.
        self._fail(self._pending_save() or path, e)
      if saved is not None and self._enable_async_checkpoint_saving:
        self._unconfirmed_save = saved
    return saved is not None

  def _sync_on_async_checkpointing(self) -> None:
    super()._sync_on_async_checkpointing()
    self._check_saves(synced=True)

  def save_at_stop(self) -> None:
    """At a stop signal: saves the current step unless a checkpoint holds it;
    a failed write raises `CheckpointSaveError`."""
    manager = self.checkpoint_manager
    if manager is None:
      return
    self._sync_on_async_checkpointing()
    step = int(self.global_step.numpy())
    latest = manager.latest_checkpoint
    if step == 0 or (latest and latest.endswith(f"-{step}")):
      return
    compat_tf.set_last_checkpoint_step(manager, None)
    if self._maybe_save_checkpoint(check_interval=False):
      self._sync_on_async_checkpointing()
