"""Shared checks for Keras layers (in the spirit of keras-hub's LayerTestCase).

`run_layer_checks` exercises what every layer here must support: config round
trip, a training step, and mixed precision. SavedModel round trips in a fresh
process live in `run_in_fresh_process`.
"""

import copy
import json
import os
import re
import sys
import textwrap

import numpy as np
import tensorflow as tf
import tf_keras

from tests.helpers import watchdog


def assert_config_round_trip(layer):
  """`from_config(get_config())` rebuilds a layer with the same config."""
  config = layer.get_config()
  # Copy: some from_config (MultiHeadAttention's) pop keys from their input.
  clone = type(layer).from_config(copy.deepcopy(config))
  assert clone.get_config() == config, (clone.get_config(), config)
  # Serialisable as JSON, as Keras' SavedModel metadata requires.
  json.dumps(tf_keras.utils.serialize_keras_object(layer))
  return clone


def assert_trains(model_fn, inputs, steps=2):
  """A few SGD steps on a squared-output loss change the weights and stay finite."""
  model = model_fn()
  optimizer = tf_keras.optimizers.SGD(0.1)
  before = None
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = tf.add_n([tf.reduce_mean(tf.cast(t, tf.float32) ** 2)
                       for t in tf.nest.flatten(model(inputs, training=True))])
    grads = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in grads), "a weight got no gradient"
    if before is None:
      before = [v.numpy().copy() for v in model.trainable_variables]
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    assert np.isfinite(loss.numpy())
  changed = [not np.allclose(b, v.numpy())
             for b, v in zip(before, model.trainable_variables)]
  assert all(changed), "some weights did not change after training steps"


class mixed_precision_scope:  # pylint: disable=invalid-name
  """Sets a global Keras mixed precision policy for the duration of a block."""

  def __init__(self, policy):
    self._policy = policy

  def __enter__(self):
    self._old = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(self._policy)

  def __exit__(self, *exc):
    tf_keras.mixed_precision.set_global_policy(self._old)


def run_in_fresh_process(code, cwd=None):
  """Runs Python code in a new interpreter (stopped only when hung:
  `watchdog`) and returns its stdout."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  result = watchdog.run(
      [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env)
  if result.returncode:
    raise AssertionError(f"fresh process failed:\n{result.stderr[-4000:]}")
  return result.stdout


def trace_recorder(predicate):
  """`(record, seen)`: `record()` appends `predicate()` to `seen` when it
  runs or is traced, so a test can ask what a question answers eagerly, in a
  `tf.function`, under XLA, in a strategy's scope."""
  seen = []

  def record():
    seen.append(predicate())
    return tf.constant(0)

  return record, seen


def random_op_shapes(step, *args):
  """The result shapes (e.g. "s32[2]") of the random-number ops (`rng`,
  `rng-bit-generator`) in the HLO that the `jit_compile` `step` builds for
  `args`: what an XLA step draws at random, in program order."""
  hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
  return re.findall(r"= (\w+\[[\d,]*\])\S* (?:rng|rng-bit-generator)\(", hlo)
