"""Tests for RealFormerDecoderBackbone (any Keras backend)."""

import inspect

from absl.testing import parameterized
import keras
from keras import ops
import numpy as np

from realformer_tf.keras3 import decoder_backbone
from tests.helpers import numpy_decoder_reference as ndr
from tests.helpers import keras3_layer_checks as layer_checks

KWARGS = dict(vocabulary_size=23, num_layers=2, num_heads=2, hidden_dim=8,
              intermediate_dim=16, max_sequence_length=6, dropout=0.0)


def _assert_close(want, got, atol):
  np.testing.assert_allclose(ops.convert_to_numpy(got), want, rtol=0,
                             atol=atol)


class RealFormerDecoderBackboneTest(parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.inputs = {
        "token_ids": np.array([[2, 5, 7, 9, 3], [2, 4, 6, 0, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32"),
    }

  @parameterized.parameters(("sum", True), ("mean", False), ("none", True))
  def test_matches_numpy(self, mode, norm_first):
    backbone = decoder_backbone.RealFormerDecoderBackbone(
        residual_attention=mode, normalize_first=norm_first, **KWARGS)
    got = ops.convert_to_numpy(backbone(self.inputs))
    want, _ = ndr.decoder_only_lm(
        backbone, self.inputs["token_ids"], self.inputs["padding_mask"], mode,
        norm_first)
    _assert_close(want, got, atol=1e-5)

  def test_config_round_trip(self):
    kwargs = dict(KWARGS, num_layers=1, residual_attention="mean",
                  normalize_first=False,
                  layer_norm_epsilon=1e-6, activation="relu",
                  score_dtype="compute", attention_implementation="reference",
                  dtype="mixed_bfloat16")
    backbone = decoder_backbone.RealFormerDecoderBackbone(**kwargs)
    config = backbone.get_config()
    for key, value in kwargs.items():
      if key != "dtype":
        self.assertEqual(value, config[key], key)
    clone = layer_checks.assert_serialization_round_trip(backbone)
    self.assertEqual("mixed_bfloat16", clone.dtype_policy.name)
    self.assertEqual({"mixed_bfloat16"}, {
        layer.dtype_policy.name for layer in clone.transformer_layers})
    self.assertEqual({"float32"}, {w.dtype for w in clone.weights})

  def test_names_and_defaults_match_the_encoder_backbone(self):
    backbone = decoder_backbone.RealFormerDecoderBackbone(**KWARGS)
    config = backbone.get_config()
    # GPT-2's tanh GELU; the encoder backbone's names for shared arguments.
    self.assertEqual("gelu_approximate", config["activation"])
    for name in ("normalize_first", "layer_norm_epsilon", "score_dtype",
                 "attention_implementation"):
      self.assertIn(name, config)
    self.assertEqual("auto", config["score_dtype"])

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, "residual_attention"):
      decoder_backbone.RealFormerDecoderBackbone(
          **dict(KWARGS, residual_attention="avg"))
    with self.assertRaisesRegex(ValueError, "num_layers must be a positive int"):
      decoder_backbone.RealFormerDecoderBackbone(**dict(KWARGS, num_layers=0))
    with self.assertRaisesRegex(ValueError, "width 8 is not divisible by num_attention_heads=3"):
      decoder_backbone.RealFormerDecoderBackbone(**dict(KWARGS, num_heads=3))
    # Issue 39 item 4: a typo named with its closest name; None refused.
    with self.assertRaisesRegex(TypeError, "unexpected keyword argument "
                                "'layer_norm_epsilion': did you mean "
                                "'layer_norm_epsilon'"):
      decoder_backbone.RealFormerDecoderBackbone(
          **dict(KWARGS, layer_norm_epsilion=1e-6))
    with self.assertRaisesRegex(ValueError, "score_dtype must be one of"):
      decoder_backbone.RealFormerDecoderBackbone(
          **dict(KWARGS, score_dtype=None))

  def test_signature_names_every_argument(self):
    parameters = inspect.signature(
        decoder_backbone.RealFormerDecoderBackbone).parameters
    self.assertEqual(["vocabulary_size", "num_layers", "num_heads",
                      "hidden_dim", "intermediate_dim"], list(parameters)[:5])
    self.assertEqual(1024, parameters["max_sequence_length"].default)
