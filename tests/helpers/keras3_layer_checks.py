"""Shared checks for the Keras 3 layers, on any Keras backend.

keras-hub's `TestCase.run_layer_test` / `run_serialization_test`
(keras_hub/src/tests/test_case.py) would fit, but that module imports
`grain`, which keras-hub does not install; and its precision check wants
every output and sub-layer in the compute dtype, where ours keep the score
path and LayerNorm in float32 by design. These are the checks we need of it,
written for pytest.
"""

import contextlib
import json
import os

import keras
import numpy as np

# Set by tests/keras3/backends_test.py in the subprocess that re-runs
# tests/keras3 under another backend.
BACKEND_RERUN_ENV = "REALFORMER_KERAS3_BACKEND_RERUN"


def numpy(x):
  return keras.ops.convert_to_numpy(x)


def in_backend_rerun():
  return os.environ.get(BACKEND_RERUN_ENV) == "1"


def assert_serialization_round_trip(layer):
  """`from_config(get_config())` and Keras (de)serialization, through JSON,
  rebuild the same config (as keras-hub's `run_serialization_test`)."""
  config = layer.get_config()
  config_json = json.dumps(config, sort_keys=True)
  clone = type(layer).from_config(json.loads(config_json))
  assert json.dumps(clone.get_config(), sort_keys=True) == config_json
  serialized = json.dumps(keras.saving.serialize_keras_object(layer))
  revived = keras.saving.deserialize_keras_object(json.loads(serialized))
  assert type(revived) is type(layer)
  assert json.dumps(revived.get_config(), sort_keys=True) == config_json
  return clone


def assert_keras_file_round_trip(model, inputs, path):
  """`model.save(path)` then `keras.saving.load_model` gives the same outputs."""
  want = model(inputs)
  model.save(path)
  loaded = keras.saving.load_model(path)
  got = loaded(inputs)
  for w, g in zip(keras.tree.flatten(want), keras.tree.flatten(got)):
    np.testing.assert_array_equal(numpy(w), numpy(g))
  return loaded


def assert_fit_changes_weights(model, inputs, targets, steps=2):
  """`fit` with SGD on MSE: finite losses, every trainable weight moves.

  Except the key biases: `q . b_k` adds the same value to every score of a
  row, which the softmax ignores, so their gradient is exactly zero unless
  the scores themselves are a model output.
  """
  before = [numpy(v).copy() for v in model.trainable_variables]
  # For a tiny model, TensorFlow's graph runs faster than XLA compiles
  # (1.4 s vs 4.8 s here); on JAX the jitted step is the fast one (6.9 s vs
  # 12.8 s op by op).
  model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse",
                jit_compile=keras.config.backend() == "jax")
  history = model.fit(inputs, targets, batch_size=len(targets), epochs=steps,
                      verbose=0)
  losses = history.history["loss"]
  assert len(losses) == steps and np.all(np.isfinite(losses)), losses
  unchanged = [v.path for b, v in zip(before, model.trainable_variables)
               if np.allclose(b, numpy(v)) and
               not v.path.endswith("/key/bias")]
  assert not unchanged, f"weights not changed by fit: {unchanged}"
  return losses


@contextlib.contextmanager
def dtype_policy(policy):
  """Sets Keras' global dtype policy for the duration of a block."""
  old = keras.config.dtype_policy()
  keras.config.set_dtype_policy(policy)
  try:
    yield
  finally:
    keras.config.set_dtype_policy(old)


def gradient(fn, value):
  """d sum(fn(value)) / d value, as NumPy, on the current Keras backend."""
  backend = keras.backend.backend()
  if backend == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    return np.asarray(
        jax.jit(jax.grad(lambda v: keras.ops.sum(fn(v))))(value))
  if backend == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    value = tf.constant(value)
    with tf.GradientTape() as tape:
      tape.watch(value)
      total = tf.reduce_sum(fn(value))
    return tf.convert_to_tensor(tape.gradient(total, value)).numpy()
  if backend == "torch":
    import torch  # pylint: disable=g-import-not-at-top
    value = torch.tensor(value, requires_grad=True)
    keras.ops.sum(fn(value)).backward()
    return value.grad.numpy()
  raise NotImplementedError(f"no gradient helper for backend {backend!r}")
