"""The Keras 3 embeddings: the table gradient without a scatter-add.

Parity against `ops.take`'s own gradient (the backend's scatter-add) and a
NumPy `np.add.at`, in float32, for the cases the issue names; determinism;
the lowered JAX step has no bfloat16 scatter (tests/keras3/step_hlo_test.py
checks the whole backbone step); weights keep their names.
"""

import keras
from keras import ops
import numpy as np
import pytest

from realformer_tf.keras3 import embeddings
from tests.helpers import keras3_layer_checks as checks

ROWS, WIDTH = 97, 6  # >= ONE_HOT_BELOW_ROWS: the sorted path.


def _ids(case, rows, rng):
  shape = (3, 11)
  if case == "random":
    return rng.integers(0, rows, shape)
  if case == "repeated":
    return rng.integers(0, 3, shape)
  if case == "all_same":
    return np.full(shape, 5)
  if case == "padding":  # id 0 on the last third, as padded batches
    ids = rng.integers(1, rows, shape)
    ids[:, -4:] = 0
    return ids
  if case == "last_row":
    return np.array([[rows - 1, 0, rows - 1, 2, rows - 1]])
  if case == "negative":  # wrapped, as `ops.take` wraps them
    return np.array([[-1, 0, -rows, 3, -1]])
  raise ValueError(case)


def _numpy_gradient(ids, weights, rows):
  out = np.zeros((rows, weights.shape[-1]), "float64")
  np.add.at(out, np.where(ids < 0, ids + rows, ids).reshape(-1),
            weights.reshape(-1, weights.shape[-1]))
  return out


CASES = ["random", "repeated", "all_same", "padding", "last_row", "negative"]


@pytest.mark.parametrize("rows", [ROWS, 2])
@pytest.mark.parametrize("case", CASES)
def test_lookup_gradient_equals_take_gradient(case, rows):
  rng = np.random.default_rng(CASES.index(case))
  ids = _ids(case, rows, rng) % rows if rows == 2 else _ids(case, rows, rng)
  table = rng.normal(size=(rows, WIDTH)).astype("float32")
  weights = rng.normal(size=ids.shape + (WIDTH,)).astype("float32")
  ours = checks.gradient(
      lambda t: ops.multiply(embeddings.lookup(t, ids), weights), table)
  theirs = checks.gradient(
      lambda t: ops.multiply(ops.take(t, ids, axis=0), weights), table)
  np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=1e-6)
  np.testing.assert_allclose(ours, _numpy_gradient(ids, weights, rows),
                             atol=1e-6, rtol=1e-6)
  np.testing.assert_array_equal(
      checks.numpy(embeddings.lookup(table, ids)),
      checks.numpy(ops.take(table, ids, axis=0)))


@pytest.mark.skipif(keras.backend.backend() != "jax",
                    reason="out-of-range ids: take returns NaN rows on JAX "
                    "only (TensorFlow's CPU kernel raises)")
def test_out_of_range_ids_contribute_nothing_as_in_take():
  ids = np.array([[ROWS, 3, ROWS + 7, 3]])
  table = np.ones((ROWS, WIDTH), "float32")
  ours = checks.gradient(lambda t: embeddings.lookup(t, ids), table)
  theirs = checks.gradient(lambda t: ops.take(t, ids, axis=0), table)
  np.testing.assert_array_equal(ours, theirs)
  assert ours[3].tolist() == [2.0] * WIDTH and ours.sum() == 2 * WIDTH


def test_sorted_gradient_is_deterministic():
  rng = np.random.default_rng(7)
  ids = rng.zipf(1.3, size=(8, 64)) % ROWS
  grads = rng.normal(size=ids.shape + (WIDTH,)).astype("float32")
  runs = [checks.numpy(embeddings.sorted_table_gradient(ids, grads, ROWS))
          for _ in range(2)]
  assert runs[0].tobytes() == runs[1].tobytes()


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_layers_read_the_table_in_float32_and_output_the_compute_dtype(
    policy):
  with checks.dtype_policy(policy):
    tokens = embeddings.ReversibleEmbedding(ROWS, WIDTH, name="tok")
    segments = embeddings.Embedding(2, WIDTH, name="seg")
    ids = keras.Input((None,), dtype="int32")
    hidden = tokens(ids) + segments(ids % 2)
    model = keras.Model(ids, [hidden, tokens(hidden, reverse=True)])
  compute = keras.mixed_precision.Policy(policy).compute_dtype
  x = np.array([[1, 2, 3]])
  hidden, logits = model(x)
  assert keras.backend.standardize_dtype(hidden.dtype) == compute
  assert keras.backend.standardize_dtype(logits.dtype) == compute
  assert [w.path for w in model.weights] == ["tok/embeddings",
                                              "seg/embeddings"]
  assert all(keras.backend.standardize_dtype(w.dtype) == "float32"
             for w in model.weights)
  expected = (ops.take(tokens.embeddings, x, axis=0)
              + ops.take(segments.embeddings, x % 2, axis=0))
  np.testing.assert_allclose(
      checks.numpy(hidden).astype("float32"),
      checks.numpy(ops.cast(ops.cast(expected, compute), "float32")),
      atol=1e-2 if compute == "bfloat16" else 1e-6)


def test_layers_round_trip_their_config():
  checks.assert_serialization_round_trip(
      embeddings.ReversibleEmbedding(ROWS, WIDTH, reverse_dtype="float32"))
  checks.assert_serialization_round_trip(embeddings.Embedding(2, WIDTH))


@pytest.mark.parametrize("rows", [ROWS, 2])
def test_one_sgd_step_moves_the_table_as_keras_embedding_does(rows):
  # Through `fit` (a compiled step reading the layer's variable): the same
  # update as Keras' own `Embedding`, whose gradient is `take`'s.
  rng = np.random.default_rng(3)
  ids = rng.integers(0, rows, (4, 9)).astype("int32")
  targets = rng.normal(size=(4, 9, WIDTH)).astype("float32")
  tables = []
  for layer_class in (embeddings.Embedding, keras.layers.Embedding):
    keras.utils.set_random_seed(1)
    inputs = keras.Input((9,), dtype="int32")
    model = keras.Model(inputs, layer_class(rows, WIDTH)(inputs))
    tables.append(checks.numpy(model.weights[0]))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    model.fit(ids, targets, batch_size=4, epochs=1, verbose=0)
    tables.append(checks.numpy(model.weights[0]))
  initial, ours, _, theirs = tables
  np.testing.assert_allclose(ours, theirs, atol=1e-6, rtol=1e-6)
  assert np.abs(ours - initial).max() > 1e-3  # the step moved the table
