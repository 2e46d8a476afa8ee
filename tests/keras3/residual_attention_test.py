"""Tests for the Keras 3 ResidualMultiHeadAttention (any Keras backend)."""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import residual_attention as ra
from tests.helpers import numpy_reference
from tests.helpers import keras3_layer_checks as layer_checks


_REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
_numpy = layer_checks.numpy


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


def test_none_equals_keras_multi_head_attention(inputs):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                        residual_attention="none")
  out, _ = layer(inputs["query"], inputs["value"], prev_scores=inputs["prev"],
                 attention_mask=inputs["mask"])
  keras_layer = keras.layers.MultiHeadAttention(num_heads=4, key_dim=4)
  keras_layer(inputs["query"], inputs["value"])
  assert ([v.path.split("/", 1)[1] for v in keras_layer.weights] ==
          [v.path.split("/", 1)[1] for v in layer.weights])
  keras_layer.set_weights(layer.get_weights())
  want = keras_layer(inputs["query"], inputs["value"],
                     attention_mask=inputs["mask"])
  np.testing.assert_allclose(_numpy(want), _numpy(out), atol=1e-5)


def test_scores_are_the_unmasked_running_sum(inputs):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
  _, masked = layer(inputs["query"], inputs["value"],
                    attention_mask=inputs["mask"], prev_scores=inputs["prev"])
  _, unmasked = layer(inputs["query"], inputs["value"],
                      prev_scores=inputs["prev"])
  np.testing.assert_array_equal(_numpy(unmasked), _numpy(masked))
  _, own = layer(inputs["query"], inputs["value"])
  np.testing.assert_allclose(_numpy(own) + inputs["prev"], _numpy(masked),
                             atol=1e-5)
  # "mean" hands on the running *sum* too; "none" its own scores.
  for mode, want in (("mean", masked), ("none", own)):
    other = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          residual_attention=mode,
                                          layer_index=2)
    other(inputs["query"], inputs["value"])
    other.set_weights(layer.get_weights())
    _, got = other(inputs["query"], inputs["value"],
                   attention_mask=inputs["mask"], prev_scores=inputs["prev"])
    np.testing.assert_allclose(_numpy(want), _numpy(got), atol=1e-6)


def test_masks_enter_the_softmax_only(inputs):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
  query = inputs["query"]
  _, scores, probs = layer(query, attention_mask=inputs["mask"][:, :, :5],
                           use_causal_mask=True, prev_scores=inputs["prev"][
                               ..., :5], return_attention_probs=True)
  probs = _numpy(probs)
  np.testing.assert_array_equal(np.zeros((4, 5, 1)), probs[1, :, :, 4:])
  upper = np.triu(np.ones((5, 5), bool), k=1)
  np.testing.assert_array_equal(0.0, probs[:, :, upper])
  np.testing.assert_allclose(1.0, probs.sum(-1), atol=1e-6)
  _, unmasked = layer(query, prev_scores=inputs["prev"][..., :5])
  np.testing.assert_array_equal(_numpy(unmasked), _numpy(scores))


def test_implicit_keras_mask_is_used(inputs):
  """An `Embedding(mask_zero=True)` mask reaches the softmax."""
  token_ids = np.array([[3, 4, 5, 0, 0]])
  embedded = keras.layers.Embedding(8, 16, mask_zero=True)(token_ids)
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
  _, _, probs = layer(embedded, return_attention_probs=True)
  del inputs
  np.testing.assert_array_equal(0.0, _numpy(probs)[0, :, :3, 3:])


def test_cached_decoding_equals_full_causal_pass(inputs):
  """Step-by-step decoding through two layers with keras-hub style caches
  equals one causal pass: outputs and score rows (no score cache needed)."""
  x = inputs["query"]
  first = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
  second = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                         layer_index=1)
  hidden, scores = first(x, use_causal_mask=True)
  want_out, want_scores = second(hidden, prev_scores=scores,
                                 use_causal_mask=True)
  want_out, want_scores = _numpy(want_out), _numpy(want_scores)
  caches = [np.zeros((2, 2, 5, 4, 4), np.float32)] * 2
  for t in range(5):
    # A tensor index, as keras-hub's generate loop passes.
    index = keras.ops.convert_to_tensor(t, "int32")
    hidden, scores, caches[0] = first(x[:, t:t + 1], cache=caches[0],
                                      cache_update_index=index,
                                      use_causal_mask=True)
    out, scores, caches[1] = second(hidden, prev_scores=scores,
                                    cache=caches[1], cache_update_index=index,
                                    use_causal_mask=True)
    assert tuple(scores.shape) == (2, 4, 1, 5)
    np.testing.assert_allclose(want_out[:, t], _numpy(out)[:, 0], atol=1e-5)
    np.testing.assert_allclose(want_scores[:, :, t, :t + 1],
                               _numpy(scores)[:, :, 0, :t + 1], atol=1e-5)
  # A static cache (no update index) is used as is, as keras-hub's.
  _, _, cache = second(hidden, cache=caches[1])
  np.testing.assert_array_equal(_numpy(caches[1]), _numpy(cache))


def test_mixed_precision_score_path_in_float32_on_request(inputs):
  # Large previous scores: bfloat16 holds 1000.3 as 1000 (spacing 4 there).
  prev = inputs["prev"] + 1000.3
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                        score_dtype="float32",
                                        dtype="mixed_bfloat16")
  out, scores = layer(inputs["query"], inputs["value"], prev_scores=prev)
  _, own = layer(inputs["query"], inputs["value"])
  assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
  assert keras.backend.standardize_dtype(scores.dtype) == "float32"
  np.testing.assert_allclose(_numpy(own) + prev, _numpy(scores), atol=1e-3)
  compute = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                          score_dtype="compute",
                                          dtype="mixed_bfloat16")
  compute(inputs["query"], inputs["value"])
  compute.set_weights(layer.get_weights())
  _, scores = compute(inputs["query"], inputs["value"], prev_scores=prev)
  assert keras.backend.standardize_dtype(scores.dtype) == "bfloat16"
  # The global policy reaches the layer too; its symbolic outputs agree.
  with layer_checks.dtype_policy("mixed_bfloat16"):
    symbolic = ra.ResidualMultiHeadAttention(
        num_heads=4, key_dim=4, score_dtype="float32")(
            keras.Input((5, 16)), prev_scores=keras.Input((4, 5, 5)),
            return_attention_probs=True)
  assert [keras.backend.standardize_dtype(t.dtype) for t in symbolic] == [
      "bfloat16", "float32", "bfloat16"]


@pytest.mark.parametrize("policy, want", [
    ("float32", "float32"), ("mixed_float16", "float32"),
    ("mixed_bfloat16", "bfloat16")])
def test_auto_score_dtype_by_policy(inputs, policy, want):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4, dtype=policy)
  _, scores = layer(inputs["query"], inputs["value"],
                    prev_scores=inputs["prev"])
  assert layer.get_config()["score_dtype"] == "auto"
  assert keras.backend.standardize_dtype(scores.dtype) == want


def test_float16_running_sum_beyond_float16_range(inputs):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                        dtype="mixed_float16")
  prev = inputs["prev"] * 1e5   # beyond float16's 65504
  out, scores, probs = layer(inputs["query"], inputs["value"],
                             prev_scores=prev, attention_mask=inputs["mask"],
                             return_attention_probs=True)
  assert np.all(np.isfinite(_numpy(out)))
  np.testing.assert_allclose(1.0, _numpy(probs).astype(np.float32).sum(-1),
                             atol=1e-2)
  # The float32 probabilities of the same logits (row max shifted).
  want = _numpy(scores) + np.where(inputs["mask"][:, None], 0.0, -1e9)
  want = np.exp(want - want.max(-1, keepdims=True))
  want /= want.sum(-1, keepdims=True)
  np.testing.assert_allclose(want, _numpy(probs).astype(np.float32),
                             atol=2e-3)


def test_functional_model_and_keras_file_round_trip(inputs, tmp_path):
  query = keras.Input((5, 16))
  value = keras.Input((7, 16))
  mask = keras.Input((5, 7), dtype="int32")
  out, scores = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)(
      query, value, attention_mask=mask)
  out, scores = ra.ResidualMultiHeadAttention(
      num_heads=4, key_dim=4, residual_attention="mean", layer_index=1,
      dropout=0.1)(out, value, prev_scores=scores, attention_mask=mask)
  assert tuple(out.shape) == (None, 5, 16)
  assert tuple(scores.shape) == (None, 4, 5, 7)
  model = keras.Model([query, value, mask], [out, scores])
  data = [inputs["query"], inputs["value"], inputs["mask"]]
  layer_checks.assert_keras_file_round_trip(model, data,
                                            str(tmp_path / "attention.keras"))


@pytest.mark.skipif(not hashed_dropout.hashes_dropout(),
                    reason="keras' own dropout on this backend")
def test_probs_dropout_is_the_reference_hash():
  probs = keras.ops.ones((2, 3, 17, 33))
  out = _numpy(hashed_dropout.hashed_dropout(probs, keras.ops.convert_to_tensor(
      np.int32(12345)), 0.25))
  keep = numpy_reference.hashed_keep_mask([12345], (2, 3, 17, 33), 0.25)
  np.testing.assert_array_equal(np.where(keep, 1 / 0.75, 0.0).astype("float32"),
                                out)


def test_config_round_trip():
  layer = ra.ResidualMultiHeadAttention(
      num_heads=2, key_dim=8, residual_attention="mean", layer_index=5,
      dropout=0.1, score_dtype="compute", value_dim=4, use_bias=False,
      attention_implementation="reference")
  clone = layer_checks.assert_serialization_round_trip(layer)
  assert (clone.residual_attention, clone.layer_index, clone.score_dtype,
          clone.dropout, clone.value_dim, clone.attention_implementation) == (
              "mean", 5, "compute", 0.1, 4, "reference")


@pytest.mark.parametrize("kwargs, message", [
    (dict(residual_attention="add"), "residual_attention must be one of"),
    (dict(score_dtype="float16"), "score_dtype must be one of"),
    (dict(layer_index=-1), "layer_index must be an int >= 0"),
    (dict(attention_axes=(2,)), "attention_axes must be None"),
    (dict(flash_attention=True), "flash_attention is not supported"),
    (dict(attention_implementation="cuda"),
     "attention_implementation must be one of"),
    pytest.param(dict(attention_implementation="pallas"),
                 "'pallas' needs the JAX backend .* backend is",
                 marks=pytest.mark.skipif(keras.config.backend() == "jax",
                                          reason="Pallas runs on JAX")),
])
def test_rejects_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    ra.ResidualMultiHeadAttention(num_heads=2, key_dim=8, **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(prev_scores=np.zeros((2, 4, 5, 6), np.float32)),
     r"prev_scores has shape \(2, 4, 5, 6\), but this layer's scores have "
     r"shape \(2, 4, 5, 7\)"),
    (dict(prev_scores=np.zeros((2, 5, 7), np.float32)),
     "prev_scores must have rank 4"),
    (dict(attention_mask=np.ones((2, 7), np.int32)),
     "attention_mask must have rank 3"),
    (dict(cache_update_index=0), "cache_update_index=0 was given without"),
    (dict(cache=np.zeros((2, 2, 7, 4, 3), np.float32), cache_update_index=0),
     r"cache must have shape \[batch, 2, max_len, 4, 4\]"),
])
def test_rejects_bad_call_arguments(inputs, kwargs, message):
  layer = ra.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
  with pytest.raises(ValueError, match=message):
    layer(inputs["query"], inputs["value"], **kwargs)


_PALLAS_PARITY = """
import os
import keras
import numpy as np
from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import residual_attention as ra

assert keras.config.backend() == "jax"
rng = np.random.default_rng(0)
x = rng.normal(size=(2, 5, 16)).astype("float32")
prev = rng.normal(size=(2, 4, 5, 5)).astype("float32")
mask = np.ones((2, 5, 5), "int32")
mask[1, :, 3:] = 0
for mode in ("sum", "mean", "none"):
  layers = [ra.ResidualMultiHeadAttention(
      num_heads=4, key_dim=4, residual_attention=mode, layer_index=2,
      attention_implementation=impl) for impl in ("reference", "pallas")]
  blocks = [encoder_block.RealFormerEncoderBlock(
      num_heads=4, intermediate_dim=24, residual_attention=mode,
      layer_index=1, attention_implementation=impl)
            for impl in ("reference", "pallas")]
  for pair, run in ((layers, lambda l: l(x, prev_scores=prev,
                                           attention_mask=mask)),
                    (blocks, lambda b: b(x, scores=prev,
                                         attention_mask=mask))):
    want = run(pair[0])
    run(pair[1])
    pair[1].set_weights(pair[0].get_weights())
    got = run(pair[1])
    for w, g in zip(want, got):
      np.testing.assert_allclose(np.asarray(w), np.asarray(g), atol=1e-5)
# Training: the reference draws the kernel's seed and hashes its mask.
for mode in ("sum", "none"):
  pair = [ra.ResidualMultiHeadAttention(
      num_heads=4, key_dim=4, residual_attention=mode, dropout=0.3, seed=11,
      attention_implementation=impl) for impl in ("reference", "pallas")]
  run = lambda l, training: l(x, prev_scores=prev, attention_mask=mask,
                              training=training)
  run(pair[0], False)
  run(pair[1], False)
  pair[1].set_weights(pair[0].get_weights())
  inference = np.asarray(run(pair[0], False)[0])
  for call in range(2):  # a fresh seed per call, the same on both
    want, got = (np.asarray(run(l, True)[0]) for l in pair)
    np.testing.assert_allclose(want, got, atol=1e-5)
    assert np.abs(want - inference).max() > 1e-3, "dropout did nothing"
    if call:
      assert np.abs(want - first).max() > 1e-3, "the same mask twice"
    first = want
print("pallas matches reference")
"""


@pytest.mark.skipif(layer_checks.in_backend_rerun(),
                    reason="spawns its own JAX process")
def test_pallas_matches_reference_on_jax():
  """"pallas" (Pallas' interpret mode on this CPU) = "reference", for the
  attention layer and an encoder block, every mode, with a padding mask;
  and in training, dropout included (both hash one seed)."""
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
  result = subprocess.run([sys.executable, "-c", _PALLAS_PARITY],
                          cwd=_REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
  assert "pallas matches reference" in result.stdout, result.stderr[-4000:]
