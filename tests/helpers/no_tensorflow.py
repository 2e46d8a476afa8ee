"""Makes TensorFlow and what needs it unimportable in this process, so a
test run proves the Keras 3 face and its tests need none of it (issue 47):
`REALFORMER_NO_TENSORFLOW=1` (tests/conftest.py), set by the JAX re-run of
tests/keras3 (tests/keras3/backends_test.py)."""

import importlib.abc
import importlib.util
import os
import sys

import pytest

ENV = "REALFORMER_NO_TENSORFLOW"
# TensorFlow, and the packages of ours and Model Garden's built on it.
BLOCKED = ("tensorflow", "tensorflow_text", "tensorflow_datasets", "tf_keras",
           "official", "orbit")


class _Blocker(importlib.abc.MetaPathFinder):

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name.split(".")[0] in BLOCKED:
      raise ModuleNotFoundError(f"No module named {name!r} ({ENV}=1)",
                                name=name)
    return None


def active() -> bool:
  return os.environ.get(ENV) == "1"


def block() -> None:
  """Blocks `BLOCKED` from here on; refuses if one is imported already."""
  loaded = [m for m in sys.modules if m.split(".")[0] in BLOCKED]
  if loaded:
    raise RuntimeError(f"{ENV}=1 but {loaded[0]} is imported already.")
  sys.meta_path.insert(0, _Blocker())


def tensorflow_or_none():
  """The `tensorflow` module, or None where it is blocked or missing."""
  try:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
  except ModuleNotFoundError:
    return None
  return tf


# A test that needs TensorFlow itself (tf.data, tf.function, jax2tf export).
needs_tensorflow = pytest.mark.skipif(
    active() or importlib.util.find_spec("tensorflow") is None,
    reason=f"needs TensorFlow, which is blocked or missing ({ENV}=1)")
