"""Upstream tf_keras defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once tf_keras fixes it:
then the workaround named in its docstring can go.
"""

import os

import numpy as np
import pytest
import tf_keras


class _HoldsInputs(tf_keras.layers.Layer):
  """Keeps a dict of `tf_keras.Input`s as a tracked attribute, as
  `BertEncoderV2` does."""

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.held_inputs = {"x": tf_keras.Input(shape=(3,), name="x")}

  def call(self, x):
    return x * 2.0


def test_a_tracked_dict_of_inputs_breaks_saving_the_model(tmp_path):
  """`compat.tf_keras.set_untracked` (`RealFormerEncoder`'s Inputs)."""
  layer = _HoldsInputs()
  model = tf_keras.Model(layer.held_inputs, layer(layer.held_inputs["x"]))
  try:
    model.save(os.path.join(tmp_path, "model"))
  except TypeError as e:
    assert "does not support '_DictWrapper'" in str(e), e
  else:
    pytest.fail("upstream fixed saving a tracked dict of Inputs: delete "
                "compat.tf_keras.set_untracked")


class _HoldsAttention(tf_keras.layers.Layer):
  """A `MultiHeadAttention` built at its first call, as Keras builds it."""

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.attention = tf_keras.layers.MultiHeadAttention(num_heads=1,
                                                        key_dim=2)

  def call(self, x):
    return self.attention(x, x)


def test_a_lazily_built_attention_loads_with_new_weights(tmp_path):
  """`compat.tf_keras.build_attention` (`layers.encoder_block`)."""
  inputs = tf_keras.Input((3, 2))
  model = tf_keras.Model(inputs, _HoldsAttention()(inputs))
  path = os.path.join(tmp_path, "model")
  model.save(path)
  loaded = tf_keras.models.load_model(
      path, custom_objects={"_HoldsAttention": _HoldsAttention},
      compile=False)
  x = np.ones((1, 3, 2), "float32")
  assert not np.allclose(loaded(x), model(x)), (
      "upstream fixed loading a lazily built attention: delete "
      "compat.tf_keras.build_attention")
