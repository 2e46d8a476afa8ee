"""Embedding lookups whose table gradient is a sort, not a scatter-add.

A scatter-add is slow in bfloat16 under index contention and
nondeterministic. Tables are read in float32; small ones are a one-hot GEMM,
larger ones (JAX, PyTorch) a sort and segmented scan. Weights are Keras'.
"""

import keras
from keras import ops

from realformer_tf.compat import keras as compat_keras

# Tables with fewer rows (segment/type tables) are looked up by a one-hot
# GEMM, faster than the sort there and slower for a vocabulary.
ONE_HOT_BELOW_ROWS = 64


def _normalized_ids(ids, rows):
  """int32 ids with negative ones wrapped as `ops.take` wraps them."""
  ids = ops.cast(ids, "int32")
  return ops.where(ops.less(ids, 0), ids + rows, ids)


def _segmented_sum(flags, values):
  """Inclusive scan of `values` (axis 0) restarting where `flags` is 1."""
  def combine(a, b):
    (flag_a, value_a), (flag_b, value_b) = a, b
    return (ops.maximum(flag_a, flag_b),
            value_b + (1.0 - flag_b) * value_a)
  _, sums = ops.associative_scan(combine, (flags, values), axis=0)
  return sums


def _last_position_at_most(sorted_ids, table_rows):
  """For each row r, the last index i with sorted_ids[i] <= r (-1 if none).

  `searchsorted(..., side="right") - 1` by two sorts (JAX lowers
  `searchsorted` to a while loop): row r's key 2r+1 sorts after every id <=
  r (keys 2id) and the r rows before it.
  """
  keys = ops.concatenate([2 * sorted_ids, 2 * table_rows + 1], axis=0)
  rank = ops.argsort(ops.argsort(keys))
  count = ops.shape(sorted_ids)[0]
  return ops.cast(rank[count:], "int32") - table_rows - 1


def sorted_table_gradient(ids, row_gradients, rows):
  """The gradient of `take(table, ids, axis=0)` for a `rows`-row table.

  `ids` already wrapped (`_normalized_ids`; ids outside [0, rows) add
  nothing), `row_gradients` `[*ids.shape, width]`. Returns `[rows, width]`:
  row r sums, in a fixed order, the gradients of the positions holding r.
  """
  width = row_gradients.shape[-1]
  ids = ops.reshape(ops.cast(ids, "int32"), (-1,))
  grads = ops.reshape(row_gradients, (-1, width))
  if not isinstance(ids.shape[0], int):
    # A symbolic length (JAX's shape-polymorphic export, which serving never
    # differentiates): `associative_scan` needs a concrete one.
    return ops.segment_sum(grads, ids, num_segments=rows)
  order = ops.argsort(ids)
  sorted_ids = ops.take(ids, order)
  sorted_grads = ops.take(grads, order, axis=0)
  starts = ops.concatenate(
      [ops.ones((1,), "bool"),
       ops.not_equal(sorted_ids[1:], sorted_ids[:-1])], axis=0)
  flags = ops.cast(ops.expand_dims(starts, -1), grads.dtype)
  sums = _segmented_sum(flags, sorted_grads)
  table_rows = ops.arange(rows, dtype="int32")
  last = _last_position_at_most(sorted_ids, table_rows)
  safe_last = ops.maximum(last, 0)
  present = ops.logical_and(
      ops.greater_equal(last, 0),
      ops.equal(ops.take(sorted_ids, safe_last), table_rows))
  return ops.where(ops.expand_dims(present, -1),
                   ops.take(sums, safe_last, axis=0),
                   ops.zeros((), grads.dtype))


def lookup(table, ids):
  """`take(table, ids, axis=0)`, differentiated without a scatter.

  `table` is read in its own dtype; the result has it too (callers cast).
  """
  rows = table.shape[0]
  ids = _normalized_ids(ids, rows)
  if rows < ONE_HOT_BELOW_ROWS:
    # Out-of-range ids give zero rows (take gives NaN on JAX, raises on
    # TensorFlow's CPU); both faces' input checks refuse them first.
    return ops.matmul(ops.one_hot(ids, rows, dtype=table.dtype), table)
  if keras.backend.backend() == "tensorflow":
    # TensorFlow sums `take`'s `IndexedSlices` gradient in float32 here
    # (deterministic under `enable_op_determinism`); its dynamic batch sizes
    # rule out Keras' `associative_scan`.
    return ops.take(table, ids, axis=0)

  # `ids` goes in as an argument, not a closure: JAX's shape-polymorphic
  # export (`jax2tf`) cannot trace a gradient closing over a traced array.
  @ops.custom_gradient
  def take(table_value, ids_value):
    def gradient(*args, upstream=None):
      # JAX passes the upstream gradient alone, positionally; Keras' torch
      # backend passes the forward's inputs, then `upstream=`.
      row_gradients = args[0] if upstream is None else upstream
      return sorted_table_gradient(ids_value, row_gradients, rows), None
    return ops.take(table_value, ids_value, axis=0), gradient

  # A tensor, not the variable: Keras' torch custom gradient is a
  # `torch.autograd.Function`, which tracks tensors only.
  return take(ops.convert_to_tensor(table), ids)


class TableInVariableDtype(compat_keras.EmbeddingsNotAutocast):
  """Mixin: the `embeddings` table is never autocast (its bfloat16 gradient
  is a slow, nondeterministic scatter-add)."""

  def _scatter_free(self):
    # Keras' own paths for quantized (int8/int4) tables, LoRA and
    # `mask_zero` (whose mask Keras attaches inside its `call`).
    return (self.quantization_mode is None and not self.lora_enabled
            and not self.mask_zero)

  def _lookup(self, inputs):
    return ops.cast(lookup(self.embeddings, inputs), self.compute_dtype)


@keras.saving.register_keras_serializable(package="realformer_tf")
class Embedding(TableInVariableDtype, keras.layers.Embedding):
  """`keras.layers.Embedding` with a scatter-free, deterministic gradient.

  Example:

  >>> layer = Embedding(2, 4)
  >>> tuple(layer(np.array([[0, 1, 1]])).shape)
  (1, 3, 4)
  """

  def call(self, inputs):
    if self._scatter_free():
      return self._lookup(inputs)
    return super().call(inputs)


@keras.saving.register_keras_serializable(package="realformer_tf")
class ReversibleEmbedding(TableInVariableDtype,
                          keras.layers.ReversibleEmbedding):
  """`keras.layers.ReversibleEmbedding` with a scatter-free gradient.

  The lookup as `Embedding`'s. `reverse=True` (tied logits) computes in
  `reverse_dtype`, or in the compute dtype when that is unset.

  Example:

  >>> layer = ReversibleEmbedding(100, 4)
  >>> hidden = layer(np.array([[5, 7]]))
  >>> tuple(layer(hidden, reverse=True).shape)
  (1, 2, 100)
  """

  def call(self, inputs, reverse=False):
    if not self._scatter_free():
      return super().call(inputs, reverse=reverse)
    if not reverse:
      return self._lookup(inputs)
    kernel = (ops.transpose(self.embeddings) if self.tie_weights
              else self.reverse_embeddings)
    dtype = self.reverse_dtype or self.compute_dtype
    logits = ops.matmul(ops.cast(inputs, dtype), ops.cast(kernel, dtype))
    if self.logit_soft_cap is not None:
      cap = self.logit_soft_cap
      logits = ops.multiply(ops.tanh(ops.divide(logits, cap)), cap)
    return logits
