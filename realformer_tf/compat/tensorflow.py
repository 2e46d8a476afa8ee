"""TensorFlow workarounds; tests/compat/tensorflow_test.py fails once each
defect goes."""


def set_last_checkpoint_step(manager, step) -> None:
  """Sets the step a `tf.train.CheckpointManager` counts its interval from
  (None: none), which has no setter: its `save` marks a step saved before
  writing it, so a failed save's step is never saved again."""
  manager._last_checkpoint_step = step  # pylint: disable=protected-access


def take_async_error(checkpoint):
  """Takes (and clears, for TensorFlow's exit hook) a failed async write's
  error: TensorFlow raises it only at the next save, `sync()` never."""
  helper = getattr(checkpoint, "_async_checkpointer_impl", None)
  error = getattr(helper, "_async_error", None)
  if error is not None:
    helper._async_error = None  # pylint: disable=protected-access
  return error
