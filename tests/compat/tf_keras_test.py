"""Upstream tf_keras defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once tf_keras fixes it:
then the workaround named in its docstring can go.
"""

import os

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
  """`networks.encoder.RealFormerEncoder.inputs`: the encoder keeps its
  Inputs in an untracked dict (`object.__setattr__`)."""
  layer = _HoldsInputs()
  model = tf_keras.Model(layer.held_inputs, layer(layer.held_inputs["x"]))
  with pytest.raises(TypeError, match="does not support '_DictWrapper'"):
    model.save(os.path.join(tmp_path, "model"))
