"""TensorFlow made unimportable in a Python, as on a GPU machine with JAX and
Keras only: `env` puts `without_tensorflow/` (its `sitecustomize.py`, the one
definition of what is blocked) first on PYTHONPATH; `active` tells a test it
runs so, and `needs_tensorflow` skips what needs TensorFlow itself."""

import importlib.util
import os
import sys

import pytest

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "without_tensorflow")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def env(environ) -> dict:
  """`environ` for a subprocess without TensorFlow (our package importable)."""
  return dict(environ, PYTHONPATH=os.pathsep.join(
      [FOLDER, REPO_ROOT] + [p for p in [environ.get("PYTHONPATH")] if p]))


def active() -> bool:
  """Whether this Python has no TensorFlow: blocked (`sys.modules` holds
  None) or not installed (a TF-free environment, docs/keras3.md)."""
  if "tensorflow" in sys.modules:
    return sys.modules["tensorflow"] is None
  return importlib.util.find_spec("tensorflow") is None


def tensorflow_or_none():
  """The `tensorflow` module, or None where there is none."""
  return None if active() else __import__("tensorflow")


# A test that needs TensorFlow itself (tf.data, tf.function, SavedModels).
needs_tensorflow = pytest.mark.skipif(
    active(), reason="needs TensorFlow, which this Python blocks "
    "(tests/helpers/without_tensorflow)")
