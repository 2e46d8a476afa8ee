"""`benchmarks/encoder_step.py --softmax=kept`: the candidate softmax equals TF's.

Under XLA its probabilities sit behind an optimization barrier and its
gradient is computed from them; outside XLA it is `tf.nn.softmax`. Both are
checked against `tf.nn.softmax` and an independent NumPy gradient, and the
encoder patched with it against the encoder as it is.
"""

import os
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import encoder_step  # pylint: disable=g-import-not-at-top,wrong-import-position
from realformer_tf.layers import residual_attention  # pylint: disable=g-import-not-at-top,wrong-import-position
from realformer_tf.networks import encoder as encoder_lib  # pylint: disable=g-import-not-at-top,wrong-import-position


def _numpy_softmax_grad(logits, weights):
  """d/dlogits of sum(softmax(logits) * weights), in float64."""
  x = logits.astype(np.float64)
  p = np.exp(x - x.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  return p, (weights - (weights * p).sum(-1, keepdims=True)) * p


@pytest.mark.parametrize("jit", [True, False])
def test_value_and_gradient_match_numpy(jit):
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 3, 5, 7)).astype(np.float32)
  logits[0, 0, 0, 3:] = -1e9  # a masked row's tail
  weights = rng.normal(size=logits.shape).astype(np.float32)

  def value_and_grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      probs = encoder_step.kept_probs_softmax(x)
      loss = tf.reduce_sum(probs * weights)
    return probs, tape.gradient(loss, x)

  run = tf.function(value_and_grad, jit_compile=True) if jit else value_and_grad
  probs, grad = run(tf.constant(logits))
  want_p, want_g = _numpy_softmax_grad(logits, weights)
  np.testing.assert_allclose(probs.numpy(), want_p, atol=1e-6)
  np.testing.assert_allclose(grad.numpy(), want_g, atol=1e-6)


def test_the_barrier_is_in_the_xla_step_only_with_it():
  f = tf.function(lambda x: encoder_step.kept_probs_softmax(x) * 2.0,
                  jit_compile=True)
  hlo = f.experimental_get_compiler_ir(tf.ones([2, 4]))(stage="hlo")
  assert "opt-barrier" in hlo
  g = tf.function(lambda x: tf.nn.softmax(x) * 2.0, jit_compile=True)
  assert "opt-barrier" not in g.experimental_get_compiler_ir(
      tf.ones([2, 4]))(stage="hlo")


def test_rejects_another_axis():
  with pytest.raises(ValueError, match="axis=0"):
    encoder_step.kept_probs_softmax(tf.ones([2, 3]), axis=0)


def test_encoder_patched_trains_as_the_encoder_does():
  """A tiny RealFormerEncoder's jit-compiled loss and gradients, with and
  without the candidate: the same (float32), and the patch undone after."""
  inputs = dict(input_word_ids=tf.constant([[5, 6, 7, 0], [8, 9, 0, 0]]),
                input_mask=tf.constant([[1, 1, 1, 0], [1, 1, 0, 0]]),
                input_type_ids=tf.zeros([2, 4], tf.int32))
  tf.keras.utils.set_random_seed(1)
  encoder = encoder_lib.RealFormerEncoder(
      vocab_size=16, hidden_size=8, num_layers=2, num_attention_heads=2,
      inner_dim=16, max_sequence_length=4, dropout_rate=0.0,
      attention_dropout_rate=0.0)
  encoder(inputs)

  @tf.function(jit_compile=True)
  def step():
    with tf.GradientTape() as tape:
      out = encoder(inputs, training=True)["sequence_output"]
      loss = tf.reduce_sum(out * tf.range(8, dtype=tf.float32))
    return loss, tape.gradient(loss, encoder.trainable_variables)

  loss, grads = step()
  original = residual_attention.TF_OPS.softmax
  with encoder_step.kept_probs_in_encoder():
    step_kept = tf.function(step.python_function, jit_compile=True)
    kept_loss, kept_grads = step_kept()
    assert "opt-barrier" in step_kept.experimental_get_compiler_ir()(
        stage="hlo")
  assert residual_attention.TF_OPS.softmax is original
  np.testing.assert_allclose(kept_loss.numpy(), loss.numpy(), rtol=1e-6)
  assert [g is None for g in kept_grads] == [g is None for g in grads]
  assert sum(g is not None for g in grads) > 10
  for got, want in zip(kept_grads, grads):
    if want is None:  # the pooler: sequence_output does not reach it
      continue
    np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(),
                               tf.convert_to_tensor(want).numpy(),
                               atol=1e-5)
