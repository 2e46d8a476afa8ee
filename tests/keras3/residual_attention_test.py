"""Tests for the Keras 3 ResidualMultiHeadAttention (any Keras backend)."""

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import residual_attention as ra
from tests import numpy_reference


def _numpy(x):
  return keras.ops.convert_to_numpy(x)


def attention_weights(layer):
  """The layer's weights as `numpy_reference.attention` reads them."""
  weights = {}
  for prefix, dense in (("q", layer._query_dense), ("k", layer._key_dense),
                        ("v", layer._value_dense),
                        ("o", layer._output_dense)):
    weights[prefix + "_kernel"], weights[prefix + "_bias"] = [
        _numpy(w) for w in dense.weights]
  return weights


@pytest.fixture(name="inputs")
def fixture_inputs():
  rng = np.random.default_rng(0)
  mask = np.ones((2, 5, 7), np.int32)
  mask[1, :, 4:] = 0  # padded keys in the second example
  return dict(query=rng.normal(size=(2, 5, 16)).astype(np.float32),
              value=rng.normal(size=(2, 7, 16)).astype(np.float32),
              prev=rng.normal(size=(2, 4, 5, 7)).astype(np.float32),
              mask=mask)


@pytest.mark.parametrize("mode", ["sum", "mean", "none"])
@pytest.mark.parametrize("layer_index", [0, 3])
def test_matches_numpy(inputs, mode, layer_index):
  layer = ra.ResidualMultiHeadAttention(
      num_heads=4, key_dim=4, residual_attention=mode, layer_index=layer_index)
  out, scores, probs = layer(inputs["query"], inputs["value"],
                             prev_scores=inputs["prev"],
                             attention_mask=inputs["mask"],
                             return_attention_probs=True)
  want_out, want_scores, want_probs = numpy_reference.attention(
      inputs["query"], inputs["value"], attention_weights(layer),
      inputs["mask"], inputs["prev"], mode, layer_index)
  np.testing.assert_allclose(want_scores, _numpy(scores), atol=1e-5)
  np.testing.assert_allclose(want_probs, _numpy(probs), atol=1e-5)
  np.testing.assert_allclose(want_out, _numpy(out), atol=1e-5)
