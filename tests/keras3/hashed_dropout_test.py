"""`HashedDropout`: the hashed keep mask on JAX (NumPy's hash, the rate, the
scale, the gradient, a new mask per call), Keras' `Dropout` elsewhere; no
threefry left in our backbone's training step."""

import math
import re

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import hashed_dropout
from tests.helpers import keras3_layer_checks as layer_checks
from tests.helpers import numpy_reference

HASHES = hashed_dropout.hashes_dropout()
only_hashed = pytest.mark.skipif(
    not HASHES, reason="Keras' own dropout on this backend")


def _numpy(x):
  return np.asarray(keras.ops.convert_to_numpy(x))


@only_hashed
@pytest.mark.parametrize("shape", [(2, 17, 33), (3, 2, 5, 7), (40,)])
def test_mask_is_numpy_reference_hash(shape):
  out = _numpy(hashed_dropout.hashed_dropout(
      keras.ops.ones(shape), keras.ops.convert_to_tensor(np.int32(987)), 0.3))
  keep = numpy_reference.hashed_keep_mask([987], shape, 0.3)
  np.testing.assert_array_equal(
      out, np.where(keep, 1 / 0.7, 0.0).astype("float32"))


@only_hashed
def test_layer_hashes_its_seed_generator_state():
  layer = hashed_dropout.HashedDropout(0.2, seed=11)
  words = [int(w) for w in _numpy(layer.seed_generator.state.value)]
  out = _numpy(layer(keras.ops.ones((3, 4, 9)), training=True))
  keep = numpy_reference.hashed_keep_mask(words, (3, 4, 9), 0.2)
  np.testing.assert_array_equal(
      out, np.where(keep, 1 / 0.8, 0.0).astype("float32"))


@only_hashed
def test_rate_scale_and_a_new_mask_per_call():
  layer = hashed_dropout.HashedDropout(0.1, seed=3)
  x = keras.ops.ones((8, 128, 256))
  first, second = (_numpy(layer(x, training=True)) for _ in range(2))
  for out in (first, second):
    assert set(np.unique(out)) == {0.0, np.float32(1 / 0.9)}
    assert abs((out == 0).mean() - 0.1) < 0.003, (out == 0).mean()
  assert (first != second).mean() > 0.1  # the seed generator advanced
  # The same seed state gives the same mask.
  again = hashed_dropout.HashedDropout(0.1, seed=3)
  np.testing.assert_array_equal(_numpy(again(x, training=True)), first)


@only_hashed
def test_gradient_is_the_mask_times_the_scale():
  import jax  # pylint: disable=g-import-not-at-top
  seed = np.int32(5)
  x = np.random.default_rng(0).normal(size=(4, 9, 16)).astype("float32")
  grad = jax.grad(lambda v: hashed_dropout.hashed_dropout(v, seed, 0.25).sum())(
      x)
  keep = numpy_reference.hashed_keep_mask([5], x.shape, 0.25)
  np.testing.assert_allclose(np.asarray(grad), np.where(keep, 1 / 0.75, 0.0),
                             rtol=1e-6)


@pytest.mark.parametrize("training,rate", [(False, 0.5), (True, 0.0)])
def test_identity_when_not_dropping(training, rate):
  x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
  out = hashed_dropout.HashedDropout(rate)(x, training=training)
  np.testing.assert_array_equal(_numpy(out), x)


def test_noise_shape_and_other_backends_are_keras_dropout():
  layer = hashed_dropout.HashedDropout(0.5, noise_shape=(2, 1, 8), seed=1)
  out = _numpy(layer(np.ones((2, 5, 8), "float32"), training=True))
  # Keras' noise_shape: one mask row shared along axis 1.
  np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1], out.shape))
  assert set(np.unique(out)) <= {0.0, 2.0}


def test_config_round_trip():
  layer = hashed_dropout.HashedDropout(0.2, seed=7, name="drop")
  clone = layer_checks.assert_serialization_round_trip(layer)
  assert (type(clone), clone.rate, clone.seed) == (
      hashed_dropout.HashedDropout, 0.2, 7)


def _largest_threefry_draw(backbone):
  """Elements of the largest tensor a threefry function of `backbone`'s
  lowered training step (the gradient of its output) takes."""
  import jax  # pylint: disable=g-import-not-at-top
  ids = np.ones((2, 16), "int32")
  x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids}
  non_trainable = [v.value for v in backbone.non_trainable_variables]

  def loss(trainable):
    out, _ = backbone.stateless_call(trainable, non_trainable, x,
                                     training=True)
    return keras.ops.mean(out["sequence_output"])

  text = jax.jit(jax.grad(loss)).lower(
      [v.value for v in backbone.trainable_variables]).as_text()
  signatures = re.findall(r"func\.func private @\w*threefry\w*\((.*?)\) ->",
                          text)
  assert signatures, "no threefry at all: the seed draws use it"
  sizes = [math.prod(int(d) for d in dims.split("x") if d) for sig in
           signatures for dims in re.findall(r"tensor<([\dx]*)ui32>", sig)]
  return max(sizes)


@pytest.mark.skipif(keras.config.backend() != "jax" or not HASHES,
                    reason="lowers a jax.jit step")
def test_backbone_training_step_draws_no_threefry_masks():
  """Every dropout of `RealFormerBackbone` hashes on JAX: threefry draws
  only the per-call seeds (scalars from a 2-word key) in its training step,
  where keras-hub's BERT of the same shape (Keras' Dropout) draws masks."""
  import keras_hub  # pylint: disable=g-import-not-at-top
  kwargs = dict(vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16,
                intermediate_dim=32, dropout=0.1, max_sequence_length=16)
  ours = backbone_lib.RealFormerBackbone(
      attention_implementation="reference", **kwargs)
  assert _largest_threefry_draw(ours) <= 2
  bert = keras_hub.models.BertBackbone(**kwargs)
  assert _largest_threefry_draw(bert) >= 2 * 16 * 16 // 2
