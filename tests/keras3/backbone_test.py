"""RealFormerBackbone: NumPy parity, config and `.keras` round trips, errors."""

import inspect
import os
import pydoc

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.checkpoints import keras3_weight_map as weight_map
from tests.helpers import numpy_reference
from tests.helpers import keras3_encoders as utils


def _numpy_backbone(model, inputs, mode, norm_first):
  """The backbone's outputs computed by the NumPy reference from its weights."""
  w = {name: np.asarray(v.numpy())
       for name, v in weight_map.backbone_slots(model).items()}
  ids, seq = inputs["token_ids"], inputs["token_ids"].shape[1]
  x = (w["word_embeddings/embeddings"][ids]
       + w["position_embedding/embeddings"][None, :seq]
       + w["type_embeddings/embeddings"][inputs["segment_ids"]])
  x = numpy_reference.layer_norm(x, w["embeddings/layer_norm/gamma"],
                                 w["embeddings/layer_norm/beta"])
  mask = np.broadcast_to(inputs["padding_mask"][:, None, :],
                         (ids.shape[0], seq, seq))
  scores = None
  for i, block in enumerate(model.transformer_layers):
    x, scores, _ = numpy_reference.block(
        x, numpy_reference.block_weights(block), mask, scores, mode, i,
        norm_first)
  if norm_first:
    x = numpy_reference.layer_norm(x, w["final_layer_norm/gamma"],
                                   w["final_layer_norm/beta"])
  pooled = np.tanh(x[:, 0] @ w["pooler_transform/kernel"]
                   + w["pooler_transform/bias"])
  return {"sequence_output": x, "pooled_output": pooled}


@pytest.mark.parametrize("mode,norm_first", [("sum", False), ("mean", False),
                                             ("none", False), ("sum", True)])
def test_matches_numpy_reference(mode, norm_first):
  model = utils.randomize(backbone_lib.RealFormerBackbone(
      **utils.TINY, residual_attention=mode, normalize_first=norm_first),
      seed=1)
  inputs = utils.backbone_inputs()
  utils.assert_outputs_close(utils.to_numpy(model(inputs)),
                             _numpy_backbone(model, inputs, mode, norm_first))


def test_config_and_keras_file_round_trip(tmp_path):
  keras.utils.set_random_seed(2)
  model = backbone_lib.RealFormerBackbone(
      **utils.TINY, residual_attention="mean", normalize_first=True,
      final_layer_norm=False, layer_norm_epsilon=1e-6, score_dtype="compute",
      activation="relu", attention_implementation="reference", name="rf")
  config = model.get_config()
  assert backbone_lib.RealFormerBackbone.from_config(config).get_config() == (
      config)
  assert {k: config[k] for k in ("residual_attention", "normalize_first",
                                 "final_layer_norm", "layer_norm_epsilon",
                                 "score_dtype", "activation",
                                 "attention_implementation")} == (
      dict(residual_attention="mean", normalize_first=True,
           final_layer_norm=False, layer_norm_epsilon=1e-6,
           score_dtype="compute", activation="relu",
           attention_implementation="reference"))
  assert model.final_layer_norm is None
  path = os.path.join(tmp_path, "backbone.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  assert isinstance(restored, backbone_lib.RealFormerBackbone)
  inputs = utils.backbone_inputs()
  expected, actual = utils.to_numpy(model(inputs)), utils.to_numpy(
      restored(inputs))
  for key in expected:
    np.testing.assert_array_equal(actual[key], expected[key])


@pytest.mark.parametrize("old, new", [
    ("norm_first", "normalize_first"), ("norm_epsilon", "layer_norm_epsilon"),
    ("intermediate_activation", "activation"),
    ("type_vocab_size", "num_segments"), ("attention_dropout_rate", "dropout")])
def test_a_model_garden_name_is_refused_naming_the_keras_hub_one(old, new):
  """The tf_keras face's names (docs/names.md) are not taken here."""
  config = backbone_lib.RealFormerBackbone(**utils.TINY).get_config()
  config[old] = config.pop(new)
  with pytest.raises(TypeError, match=(
      f"RealFormerBackbone got an unexpected keyword argument '{old}': "
      f"did you mean '{new}'")):
    backbone_lib.RealFormerBackbone.from_config(config)


@pytest.mark.parametrize("changes,message", [
    (dict(residual_attention="sums"), "residual_attention"),
    (dict(score_dtype="float16"), "score_dtype"),
    (dict(num_heads=3), "hidden_dim=16 is not divisible by num_heads=3"),
    (dict(num_layers=0), "num_layers must be a positive int, got 0"),
    (dict(activation="gelu_tanh"),
     "activation='gelu_tanh' is not a Keras activation"),
])
def test_bad_arguments_are_named(changes, message):
  with pytest.raises(ValueError, match=message):
    backbone_lib.RealFormerBackbone(**{**utils.TINY, **changes})


@pytest.mark.parametrize("typo, closest", [("droput", "dropout"),
                                           ("num_segment", "num_segments"),
                                           ("dtpye", "dtype")])
def test_a_misspelled_argument_names_the_closest_valid_one(typo, closest):
  # Issue 39 item 4: keras' functional base dropped `droput=0.3` silently.
  with pytest.raises(TypeError, match=(
      f"RealFormerBackbone got an unexpected keyword argument '{typo}': "
      f"did you mean '{closest}'")):
    backbone_lib.RealFormerBackbone(**utils.TINY, **{typo: 0.3})


def test_score_dtype_none_is_refused_at_construction():
  with pytest.raises(ValueError, match=(
      r"RealFormerBackbone: score_dtype must be one of .*got None")):
    backbone_lib.RealFormerBackbone(**dict(utils.TINY, score_dtype=None))


def test_signature_names_every_argument():
  parameters = inspect.signature(backbone_lib.RealFormerBackbone).parameters
  assert list(parameters)[:5] == ["vocabulary_size", "num_layers",
                                  "num_heads", "hidden_dim",
                                  "intermediate_dim"]
  assert parameters["dropout"].default == 0.1
  assert list(parameters)[-2:] == ["dtype", "kwargs"]
  assert "num_heads" in pydoc.render_doc(backbone_lib.RealFormerBackbone)
  # Every name the signature shows is taken (and round-trips in the config).
  model = backbone_lib.RealFormerBackbone(**{
      name: p.default for name, p in parameters.items()
      if p.default is not p.empty and p.kind is not p.VAR_KEYWORD},
      **{k: utils.TINY[k] for k in list(parameters)[:5]})
  assert model.get_config()["num_segments"] == 2
