"""Tests for the Keras 3 RealFormerEncoderBlock (any Keras backend)."""

import inspect

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import encoder_block
from tests.helpers import numpy_reference
from tests.helpers import keras3_layer_checks as layer_checks

_numpy = layer_checks.numpy


@pytest.fixture(name="inputs")
def fixture_inputs():
  rng = np.random.default_rng(0)
  mask = np.ones((2, 5, 5), np.int32)
  mask[1, :, 3:] = 0  # padded keys in the second example
  return dict(hidden=rng.normal(size=(2, 5, 16)).astype(np.float32),
              prev=rng.normal(size=(2, 4, 5, 5)).astype(np.float32),
              mask=mask)


def _block(**kwargs):
  kwargs = dict(dict(num_heads=4, intermediate_dim=32), **kwargs)
  return encoder_block.RealFormerEncoderBlock(**kwargs)


@pytest.mark.parametrize("mode, layer_index, norm_first", [
    ("sum", 0, False), ("sum", 1, True), ("mean", 2, False),
    ("none", 1, True)])
def test_matches_numpy(inputs, mode, layer_index, norm_first):
  block = _block(residual_attention=mode, layer_index=layer_index,
                 normalize_first=norm_first)
  hidden, scores, probs = block(inputs["hidden"], scores=inputs["prev"],
                                attention_mask=inputs["mask"],
                                return_attention_probs=True)
  want_hidden, want_scores, want_probs = numpy_reference.block(
      inputs["hidden"], numpy_reference.block_weights(block), inputs["mask"],
      inputs["prev"], mode, layer_index, norm_first,
      activation=numpy_reference.gelu_erf)
  np.testing.assert_allclose(want_scores, _numpy(scores), atol=1e-5)
  np.testing.assert_allclose(want_probs, _numpy(probs), atol=1e-5)
  np.testing.assert_allclose(want_hidden, _numpy(hidden), atol=1e-5)


def test_weight_names_match_the_tf_keras_block():
  block = _block(name="block")
  block.build((None, 5, 16))
  assert [v.path for v in block.weights] == [
      "block/self_attention/query/kernel", "block/self_attention/query/bias",
      "block/self_attention/key/kernel", "block/self_attention/key/bias",
      "block/self_attention/value/kernel", "block/self_attention/value/bias",
      "block/self_attention/attention_output/kernel",
      "block/self_attention/attention_output/bias",
      "block/self_attention_layer_norm/gamma",
      "block/self_attention_layer_norm/beta",
      "block/intermediate/kernel", "block/intermediate/bias",
      "block/output/kernel", "block/output/bias",
      "block/output_layer_norm/gamma", "block/output_layer_norm/beta"]


def _issue_example(input_fn):
  """The issue's example (two blocks), with `input_fn` of `tf.keras` or `keras`."""
  hidden = input_fn(shape=(16, 64))
  mask = input_fn(shape=(16, 16), dtype="int32")
  x, s = encoder_block.RealFormerEncoderBlock(
      num_heads=4, intermediate_dim=128, layer_index=0)(
          hidden, scores=None, attention_mask=mask)
  x, s = encoder_block.RealFormerEncoderBlock(
      num_heads=4, intermediate_dim=128, layer_index=1, normalize_first=True,
      residual_attention="mean", dropout=0.1,
      attention_dropout=0.1)(x, scores=s, attention_mask=mask)
  return hidden, mask, x, s


def test_issue_example_with_keras_input_fits_and_round_trips(tmp_path):
  """One model for the symbolic shapes, `fit` and the `.keras` round trip
  (the JAX re-run compiles each model it meets)."""
  hidden, mask, x, scores = _issue_example(keras.Input)
  assert (tuple(x.shape), tuple(scores.shape)) == ((None, 16, 64),
                                                   (None, 4, 16, 16))
  model = keras.Model([hidden, mask], x)
  rng = np.random.default_rng(0)
  data = [rng.normal(size=(2, 16, 64)).astype(np.float32),
          np.tril(np.ones((2, 16, 16), np.int32))]
  layer_checks.assert_fit_changes_weights(model, data, data[0])
  layer_checks.assert_keras_file_round_trip(model, data,
                                            str(tmp_path / "blocks.keras"))


@pytest.mark.skipif(keras.config.backend() != "tensorflow",
                    reason="tf.keras.Input needs the TensorFlow backend")
def test_issue_example_with_tf_keras_input():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _, _, x, scores = _issue_example(tf.keras.Input)
  assert (tuple(x.shape), tuple(scores.shape)) == ((None, 16, 64),
                                                   (None, 4, 16, 16))


def test_dropout_only_in_training(inputs):
  block = _block(dropout=0.5, attention_dropout=0.5)
  eval_a, _ = block(inputs["hidden"])
  eval_b, _ = block(inputs["hidden"], training=False)
  train, _ = block(inputs["hidden"], training=True)
  np.testing.assert_array_equal(_numpy(eval_a), _numpy(eval_b))
  assert not np.allclose(_numpy(eval_a), _numpy(train))


def test_mixed_bfloat16(inputs):
  block = _block()
  want, want_scores = block(inputs["hidden"], scores=inputs["prev"])
  with layer_checks.dtype_policy("mixed_bfloat16"):
    mixed = _block()
    mixed.build((2, 5, 16))
  mixed.set_weights(block.get_weights())
  hidden, scores = mixed(inputs["hidden"], scores=inputs["prev"])
  assert [keras.backend.standardize_dtype(w.dtype)
          for w in mixed.weights] == ["float32"] * 16
  # keras-hub's rule: LayerNorm and activation in the compute dtype; the
  # "auto" scores too under bfloat16.
  assert keras.backend.standardize_dtype(hidden.dtype) == "bfloat16"
  assert keras.backend.standardize_dtype(scores.dtype) == "bfloat16"
  assert mixed._intermediate_activation_layer.compute_dtype == "bfloat16"
  assert mixed._output_layer_norm.compute_dtype == "bfloat16"
  np.testing.assert_allclose(_numpy(want_scores), _numpy(scores), atol=0.1)
  wide = _block(score_dtype="float32", dtype="mixed_bfloat16")
  _, scores = wide(inputs["hidden"], scores=inputs["prev"] + 1000.3)
  assert keras.backend.standardize_dtype(scores.dtype) == "float32"
  del want


def test_config_round_trip():
  block = _block(activation="relu", dropout=0.1,
                 attention_dropout=0.2, normalize_first=True, layer_norm_epsilon=1e-6,
                 kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                 residual_attention="mean", layer_index=3,
                 score_dtype="compute")
  clone = layer_checks.assert_serialization_round_trip(block)
  config = clone.get_config()
  assert (config["activation"], config["layer_index"],
          config["kernel_initializer"]["config"]["stddev"]) == ("relu", 3,
                                                                0.02)


@pytest.mark.parametrize("old, new", [
    ("norm_epsilon", "layer_norm_epsilon"),
    ("intermediate_activation", "activation"), ("dropout_rate", "dropout"),
    ("attention_dropout_rate", "attention_dropout")])
def test_a_model_garden_name_is_refused_naming_the_keras_hub_one(old, new):
  with pytest.raises(TypeError, match=(
      f"RealFormerEncoderBlock got an unexpected keyword argument '{old}': "
      f"did you mean '{new}'")):
    encoder_block.RealFormerEncoderBlock(num_heads=4, intermediate_dim=32,
                                         **{old: 0.1})
  with pytest.raises(TypeError, match="required positional argument: "
                     "'intermediate_dim'"):
    encoder_block.RealFormerEncoderBlock(num_heads=4, inner_dim=32)


@pytest.mark.parametrize("kwargs, shape, message", [
    (dict(num_heads=3), (2, 5, 16),
     "width 16 is not divisible by num_attention_heads=3"),
    (dict(intermediate_dim=0), None, "intermediate_dim must be a positive int"),
    (dict(residual_attention="avg"), None, "residual_attention must be one"),
    (dict(), (2, 16), r"expects hidden of shape \[batch, seq, width\]"),
])
def test_rejects_bad_arguments(kwargs, shape, message):
  with pytest.raises(ValueError, match=message):
    _block(**kwargs).build(shape)


def test_a_misspelled_argument_names_the_closest_valid_one():
  with pytest.raises(TypeError, match="RealFormerEncoderBlock got an "
                     "unexpected keyword argument 'droput': did you mean "
                     "'dropout'"):
    _block(droput=0.3)
  assert list(inspect.signature(
      encoder_block.RealFormerEncoderBlock).parameters)[:2] == [
          "num_heads", "intermediate_dim"]
