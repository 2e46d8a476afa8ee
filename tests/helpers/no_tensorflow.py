"""TensorFlow made unimportable in a Python, as on a GPU machine with JAX and
Keras only: `env` puts `without_tensorflow/` (its `sitecustomize.py`, the one
definition of what is blocked) first on PYTHONPATH; `active` tells a test it
runs so, and `needs_tensorflow` skips what needs TensorFlow itself."""

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
  """Whether this Python has TensorFlow blocked (`sys.modules` holds None)."""
  return "tensorflow" in sys.modules and sys.modules["tensorflow"] is None


def tensorflow_or_none():
  """The `tensorflow` module, or None where it is blocked."""
  return None if active() else __import__("tensorflow")


# A test that needs TensorFlow itself (tf.data, tf.function, SavedModels).
needs_tensorflow = pytest.mark.skipif(
    active(), reason="needs TensorFlow, which this Python blocks "
    "(tests/helpers/without_tensorflow)")
