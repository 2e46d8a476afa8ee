"""Upstream Keras 3 defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once Keras fixes it: then
the workaround named in its docstring can go.
"""

import keras
import numpy as np


def test_functional_model_takes_an_unknown_keyword_silently():
  """`core.arguments.refuse_unknown` (keras3 backbones and tasks): a typo
  such as `droput=0.3` trained with the default dropout."""
  inputs = keras.Input((3,))
  model = keras.Model(inputs, keras.layers.Dense(2)(inputs), droput=0.3)
  assert not hasattr(model, "droput")


def test_embedding_autocast_false_still_autocasts_the_table():
  """`keras3.embeddings.TableInVariableDtype`: under a mixed policy the
  table of an `Embedding` with `autocast=False` is still read in the compute
  dtype when the layer runs outside another layer's autocast scope."""
  seen = {}

  class Probe(keras.layers.Embedding):

    def call(self, inputs):
      seen["dtype"] = keras.backend.standardize_dtype(self.embeddings.dtype)
      return super().call(inputs)

  policy = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    layer = Probe(8, 4)
    layer.autocast = False
    layer(np.array([[1, 2]]))
  finally:
    keras.config.set_dtype_policy(policy)
  assert layer.embeddings.dtype == "float32"
  assert seen["dtype"] == "bfloat16"
