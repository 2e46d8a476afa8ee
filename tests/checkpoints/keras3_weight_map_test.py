"""keras-hub BertBackbone <-> RealFormerBackbone weights, by name."""


import keras
import keras_hub
import numpy as np
import pytest

from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import keras3_weight_map as weight_map
from realformer_tf.keras3 import backbone as backbone_lib
from tests.helpers import keras3_encoders as utils


def _bert(**changes):
  return utils.randomize(
      keras_hub.models.BertBackbone(**{**utils.TINY, **changes}), seed=3)


def test_bert_backbone_is_realformer_none_exactly():
  bert = _bert()
  inputs = utils.backbone_inputs()
  expected = utils.to_numpy(bert(inputs))
  model = weight_map.load_bert_backbone(bert)
  assert model.residual_attention == "none"
  assert len(weight_map.backbone_slots(model)) == len(model.weights) == len(
      bert.weights)
  utils.assert_outputs_close(utils.to_numpy(model(inputs)), expected)
  # "sum" warm-starts from the same weights but computes another function.
  warm = weight_map.load_bert_backbone(bert, residual_attention="sum",
                                       dropout=0.2)
  assert warm.dropout == 0.2
  for a, b in zip(warm.weights, model.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert np.abs(utils.to_numpy(warm(inputs))["sequence_output"]
                - expected["sequence_output"]).max() > 0.1


def test_realformer_none_weights_into_bert_backbone():
  model = utils.randomize(backbone_lib.RealFormerBackbone(
      **utils.TINY, residual_attention="none"), seed=4)
  bert = _bert()
  weight_map.copy_weights(model, bert)
  inputs = utils.backbone_inputs(seed=1)
  utils.assert_outputs_close(utils.to_numpy(bert(inputs)),
                             utils.to_numpy(model(inputs)))


def test_mismatch_names_every_weight_and_assigns_nothing():
  bert = _bert(num_layers=3, intermediate_dim=24)
  model = backbone_lib.RealFormerBackbone(**utils.TINY)
  before = [v.numpy() for v in model.weights]
  with pytest.raises(errors.CheckpointMismatchError) as raised:
    weight_map.copy_weights(bert, model)
  message = str(raised.value)
  assert "In the checkpoint but unused by the model (16)" in message
  assert "transformer/layer_2/output/kernel (shape [24, 16])" in message
  assert ("transformer/layer_0/intermediate/kernel: source [16, 24], "
          "target [16, 32]") in message
  for v, value in zip(model.weights, before):
    np.testing.assert_array_equal(v.numpy(), value)
  with pytest.raises(TypeError, match="got Dense"):
    weight_map.slots_of(keras.layers.Dense(2))
