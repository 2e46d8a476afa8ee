"""TensorFlow workarounds (tests/compat/tensorflow_test.py)."""


def set_last_checkpoint_step(manager, step) -> None:
  """`CheckpointManager.save` marks its step saved before writing it."""
  manager._last_checkpoint_step = step  # pylint: disable=protected-access


def take_async_error(checkpoint):
  """Takes (clears) an async write's error, which `sync()` never raises."""
  helper = getattr(checkpoint, "_async_checkpointer_impl", None)
  error = getattr(helper, "_async_error", None)
  if error is not None:
    helper._async_error = None  # pylint: disable=protected-access
  return error
