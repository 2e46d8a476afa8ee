"""Shared by the Keras 3 task tests: exporting a task and reading it back."""

import os

import keras
import numpy as np
import pytest

from tests.helpers import no_tensorflow

# `model.export()` writes a TF SavedModel from TensorFlow and JAX (jax2tf);
# PyTorch's is experimental in Keras and not what our docs promise.
EXPORT_BACKENDS = pytest.mark.skipif(
    keras.config.backend() not in ("tensorflow", "jax") or
    no_tensorflow.active(),
    reason="export() to a SavedModel: TensorFlow and JAX backends, with "
    "TensorFlow installed")


def export_and_load(model, path):
  """`model.export(path)` with its defaults; returns the `serve` signature.

  Args:
    model: A task.
    path: Export directory.

  Returns:
    `(serve, {input name: (shape, dtype name)})`: the loaded concrete
    function and its named inputs.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # Not at the top: the Keras 3 tests import TensorFlow only where they read
  # a SavedModel (any backend can export one; only TF reads it).
  model.export(path, verbose=False)
  assert os.path.isdir(path), path
  serve = tf.saved_model.load(path).signatures["serve"]
  _, named = serve.structured_input_signature
  return serve, {name: (tuple(spec.shape), spec.dtype.name)
                 for name, spec in named.items()}


def served(serve, inputs):
  """`serve(**inputs)["output_0"]` as NumPy (inputs: `{name: int array}`)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return serve(**{k: tf.constant(np.asarray(v), tf.int32)
                  for k, v in inputs.items()})["output_0"].numpy()
