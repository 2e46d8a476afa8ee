"""`keras.layers.Dropout` with a `core.dropout_hash` mask on JAX.

Cheaper than threefry, and the mask the attention dropout and the tf_keras
face use. Elsewhere it is Keras' `Dropout`; same arguments and config.
"""

import math

import keras
from keras import ops

from realformer_tf.core import pallas_attention


def hashes_dropout():
  """Whether dropout hashes its mask: on JAX, which compiles every step with
  XLA (TensorFlow's op-by-op `fit` would write a tensor per hash op; torch's
  uint32 ops are incomplete)."""
  return keras.backend.backend() == "jax" and pallas_attention.available()


def hashed_dropout(inputs, seed, rate):
  """`inputs` with the hashed keep mask of `seed` (an integer scalar or
  vector) applied and the kept values scaled by 1 / (1 - `rate`); on JAX.
  On attention probabilities it is the fused kernel's mask, so both paths
  drop alike."""
  shape = tuple(ops.shape(inputs))
  cols = shape[-1]
  rows = shape[-2] if len(shape) >= 2 else 1
  lead = math.prod(shape[:-2])
  keep = ops.reshape(pallas_attention.dropout_keep_mask(
      seed, lead, 1, rows, cols, rate), shape)
  kept = ops.multiply(inputs, ops.cast(1.0 / (1.0 - rate), inputs.dtype))
  return ops.where(keep, kept, ops.zeros_like(inputs))


@keras.saving.register_keras_serializable(package="realformer_tf")
class HashedDropout(keras.layers.Dropout):
  """`keras.layers.Dropout` with a hashed mask on JAX (`hashes_dropout`).

  Example:

  ```python
  import numpy as np
  from realformer_tf.keras3 import hashed_dropout

  layer = hashed_dropout.HashedDropout(0.1, seed=0)
  y = layer(np.ones((2, 8, 16), "float32"), training=True)
  # About 10% zeros, the rest 1 / 0.9; the identity when not training.
  ```
  """

  def call(self, inputs, training=False):
    # A symbolic shape (shape inference) takes Keras' path: same output spec.
    if not (training and self.rate > 0 and self.noise_shape is None
            and hashes_dropout()
            and all(isinstance(d, int) for d in ops.shape(inputs))):
      return super().call(inputs, training=training)
    # The generator's state words hashed into the keys: no threefry draw.
    return hashed_dropout(inputs, self.seed_generator.next(), self.rate)
