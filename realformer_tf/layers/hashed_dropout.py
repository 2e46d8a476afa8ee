"""Dropout whose mask costs no memory traffic: `core.dropout_hash` in TF ops.

Inside an XLA cluster the hash fuses (tf_keras' `Dropout` writes its bits
out); elsewhere, and under `TPUStrategy`, it is tf_keras' `Dropout`.
"""

import numbers
import types

import tensorflow as tf
import tf_keras

from official.projects.bigbird import recomputing_dropout
from realformer_tf.core import dropout_hash
from realformer_tf.layers import xla_kernels

# `core.dropout_hash`'s ops in TensorFlow: uint32 tensors wrap on `+` and `*`.
TF_HASH_OPS = types.SimpleNamespace(
    word=lambda value: tf.constant(value, tf.uint32),
    srl=lambda x, bits: tf.bitwise.right_shift(x, tf.constant(bits, tf.uint32)),
    iota=lambda n: tf.cast(tf.range(n), tf.uint32),
    reshape=tf.reshape)


def keep_mask(seed, shape, rate: float) -> tf.Tensor:
  """The boolean keep mask (True where kept) of dynamic `shape` (rank >= 1)
  for a `[2]` int32 or uint32 `seed`."""
  threshold = dropout_hash.keep_threshold(rate)
  words = tf.bitcast(tf.cast(seed, tf.int32), tf.uint32)
  rank = shape.shape[0]
  cols = shape[-1]
  rows = shape[-2] if rank >= 2 else 1
  leading = tf.reduce_prod(shape[:-2]) if rank >= 3 else 1
  keys = dropout_hash.row_keys(TF_HASH_OPS, [words[0], words[1]], leading, 1,
                               rows)
  keys = tf.reshape(keys, shape[:-1])
  return dropout_hash.keep_mask(TF_HASH_OPS, keys, TF_HASH_OPS.iota(cols),
                                threshold)


def hashed_dropout(inputs, seed, rate: float) -> tf.Tensor:
  """Zeroes the dropped elements of `inputs`, scales the kept by 1/(1-rate)."""
  keep = keep_mask(seed, tf.shape(inputs), rate)
  scale = tf.cast(1.0 / (1.0 - rate), inputs.dtype)
  return tf.where(keep, inputs * scale, tf.zeros_like(inputs))


# Both TPU strategies: the experimental (V1) one is no subclass of the other.
_TPU_STRATEGIES = (tf.distribute.TPUStrategy,
                   tf.distribute.experimental.TPUStrategy)


def hashes_here() -> bool:
  """Whether `HashedDropout` hashes in the graph being built now: inside XLA
  (outside, each hash op would write a full tensor), not on TPUs."""
  return (xla_kernels.in_xla_context() and
          not isinstance(tf.distribute.get_strategy(), _TPU_STRATEGIES))


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class HashedDropout(tf_keras.layers.Dropout):
  """tf_keras' `Dropout`, with a hashed mask where `hashes_here()`.

  Same arguments and config as `tf_keras.layers.Dropout` (which it is
  everywhere with a `noise_shape` or a tensor `rate`). Each call draws a new
  seed; the backward pass reuses the forward's mask.

  Example:

  >>> layer = HashedDropout(0.5)
  >>> step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
  >>> y = step(tf.ones([4, 64, 64]))
  >>> sorted(set(y.numpy().ravel().tolist()))
  [0.0, 2.0]
  >>> 0.45 < float(tf.reduce_mean(tf.cast(y > 0, tf.float32))) < 0.55
  True
  """

  def call(self, inputs, training=None):
    if (self.noise_shape is not None or not isinstance(self.rate, numbers.Real)
        or self.rate == 0 or not hashes_here()):
      return super().call(inputs, training=training)
    if training is None:
      training = tf_keras.backend.learning_phase()

    def dropped():
      seed = self._random_generator.random_uniform(
          [2], minval=-2**31, maxval=2**31 - 1, dtype=tf.int32)
      return hashed_dropout(inputs, seed, self.rate)

    if isinstance(training, tf.Variable):
      training = tf.convert_to_tensor(training)
    return tf.__internal__.smart_cond.smart_cond(
        training, dropped, lambda: tf.identity(inputs))


def dropout_layer(rate, recompute: bool = False, **kwargs):
  """The dropout layer of our blocks (weightless): `HashedDropout`, or with
  `recompute` Model Garden's `RecomputingDropout`, whose stateless masks
  repeat in `recompute_grad`'s second forward pass."""
  if recompute:
    return recomputing_dropout.RecomputingDropout(rate, **kwargs)
  return HashedDropout(rate, **kwargs)
