"""Tests for the Keras 3 RealFormerDecoderBlock (any Keras backend)."""

import os
import shutil
import tempfile

from absl.testing import parameterized
import keras
from keras import ops
import numpy as np

from realformer_tf.keras3 import decoder_block
from tests.helpers import numpy_decoder_reference as ndr
from tests.helpers import keras3_layer_checks as layer_checks

B, T, S, D, N = 2, 5, 7, 16, 4


def _assert_close(want, got, atol):
  np.testing.assert_allclose(ops.convert_to_numpy(got), want, rtol=0,
                             atol=atol)


def _block(**kwargs):
  defaults = dict(num_heads=N, intermediate_dim=24)
  defaults.update(kwargs)
  return decoder_block.RealFormerDecoderBlock(**defaults)


def _numpy(outputs):
  return [None if x is None else ops.convert_to_numpy(x) for x in outputs]


class RealFormerDecoderBlockTest(parameterized.TestCase):

  def _temp_dir(self):
    path = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, path)
    return path

  def setUp(self):
    super().setUp()
    # self.x, .memory, .prev_self, .prev_cross, .self_mask, .cross_mask.
    vars(self).update(ndr.block_inputs(B, T, S, D, N))

  @parameterized.parameters(
      ("sum", False, (True, True), "relu"),
      ("sum", True, (True, True), "gelu"),
      ("mean", False, (True, True), "gelu"),
      ("mean", True, (True, False), "relu"),
      ("none", False, (True, True), "relu"),
      ("sum", False, (False, True), "relu"))
  def test_matches_numpy(self, mode, norm_first, paths, activation):
    block = _block(residual_attention=mode, normalize_first=norm_first,
                   self_residual=paths[0], cross_residual=paths[1],
                   activation=activation, layer_index=2)
    out, self_scores, cross_scores = _numpy(block(
        self.x, self.memory, self_scores=self.prev_self,
        cross_scores=self.prev_cross, self_attention_mask=self.self_mask,
        cross_attention_mask=self.cross_mask))
    want, want_self, want_cross = ndr.decoder_block(
        self.x, self.memory, ndr.decoder_block_weights(block),
        self.self_mask * ndr.causal_mask(B, T), self.cross_mask,
        self.prev_self, self.prev_cross, mode if paths[0] else "none",
        mode if paths[1] else "none", 2, norm_first, activation)
    _assert_close(want_self, self_scores, atol=1e-5)
    _assert_close(want_cross, cross_scores, atol=1e-5)
    _assert_close(want, out, atol=1e-5)

  @parameterized.parameters(("sum", False), ("mean", True), ("none", True))
  def test_decoder_only_matches_numpy(self, mode, norm_first):
    block = _block(cross_attention=False, normalize_first=norm_first,
                   residual_attention=mode, layer_index=1)
    out, self_scores = _numpy(block(self.x, self_scores=self.prev_self,
                                    self_attention_mask=self.self_mask))
    self.assertFalse(any("encdec" in w.path for w in block.weights))
    want, want_self, _ = ndr.decoder_block(
        self.x, None, ndr.decoder_block_weights(block),
        self.self_mask * ndr.causal_mask(B, T), None, self.prev_self, None,
        mode, "none", 1, norm_first)
    _assert_close(want_self, self_scores, atol=1e-5)
    _assert_close(want, out, atol=1e-5)

  @parameterized.parameters(("sum", False, True), ("mean", True, True),
                            ("sum", True, False))
  def test_cached_steps_equal_full_forward(self, mode, norm_first, cross):
    """Two chained blocks: a 2-position seed chunk, then one position a step.

    Every step's hidden rows and its score rows (the columns it may see)
    equal the full causal forward pass; the later columns are scores against
    cache slots not yet written, masked in every softmax.
    """
    blocks = [_block(residual_attention=mode, normalize_first=norm_first,
                     cross_attention=cross, layer_index=i) for i in range(2)]
    memory = self.memory if cross else None

    def run(x, cache=None, index=None):
      self_scores = cross_scores = None
      caches = []
      for i, block in enumerate(blocks):
        outputs = block(
            x, memory, self_scores=self_scores,
            cross_scores=cross_scores,
            cache=None if cache is None else cache[i],
            cache_update_index=index)
        x, self_scores = outputs[:2]
        if cross:
          cross_scores = outputs[2]
        if cache is not None:
          caches.append(outputs[-1])
      return x, self_scores, cross_scores, caches

    full, full_self, full_cross, _ = _numpy(run(self.x)[:3]) + [None]
    cache = [ops.zeros((B, 2, T, N, D // N)) for _ in blocks]
    for start, stop in ((0, 2), (2, 3), (3, 4), (4, 5)):
      hidden, self_scores, cross_scores, cache = run(
          self.x[:, start:stop], cache, start)
      _assert_close(full[:, start:stop], hidden, atol=1e-5)
      self_scores = ops.convert_to_numpy(self_scores)
      self.assertEqual((B, N, stop - start, T), self_scores.shape)
      _assert_close(full_self[:, :, start:stop, :stop],
                          self_scores[..., :stop], atol=1e-5)
      if cross:
        _assert_close(full_cross[:, :, start:stop], cross_scores,
                            atol=1e-5)

  @parameterized.parameters(("float32", "float32"), ("compute", "bfloat16"))
  def test_mixed_precision_score_dtype(self, score_dtype, want_dtype):
    block = _block(dtype="mixed_bfloat16", score_dtype=score_dtype)
    out, self_scores, cross_scores = block(self.x, self.memory)
    out, self_scores, cross_scores = block(
        out, self.memory, self_scores=self_scores, cross_scores=cross_scores)
    self.assertEqual("bfloat16", keras.backend.standardize_dtype(out.dtype))
    for scores in (self_scores, cross_scores):
      self.assertEqual(want_dtype,
                       keras.backend.standardize_dtype(scores.dtype))
    self.assertEqual("float32", block.self_attention.variable_dtype)

  def test_mixed_precision_keeps_float32_sums_between_blocks(self):
    """The incoming float32 sum is added unrounded (bfloat16 would lose
    ~1e-2 of it): the scores with `prev` minus those without are `prev`."""
    block = _block(dtype="mixed_bfloat16", score_dtype="float32")
    prev_self = self.prev_self + 1e-3   # not representable in bfloat16
    _, with_prev, _ = _numpy(block(self.x, self.memory, self_scores=prev_self))
    _, without, _ = _numpy(block(self.x, self.memory))
    _assert_close(prev_self, with_prev - without, atol=1e-6)

  def test_functional_keras_round_trip(self):
    """Two blocks composed with the functional API; `.keras` save and load."""
    x, memory = keras.Input((T, D)), keras.Input((S, D))
    mask = keras.Input((T, T), dtype="int32")
    h, s, c = _block(residual_attention="mean")(
        x, memory, self_attention_mask=mask)
    h, s, c = _block(residual_attention="mean", layer_index=1,
                     normalize_first=True)(h, memory, self_scores=s,
                                      cross_scores=c, self_attention_mask=mask)
    h2, s2 = _block(cross_attention=False, layer_index=2)(
        h, self_scores=s, self_attention_mask=mask)
    model = keras.Model([x, memory, mask], [h, s, c, h2, s2])
    layer_checks.assert_keras_file_round_trip(
        model, [self.x, self.memory, self.self_mask],
        os.path.join(self._temp_dir(), "decoder.keras"))

  def test_config_round_trip(self):
    arguments = dict(
        num_heads=2, intermediate_dim=12,
        activation="gelu", dropout=0.1,
        attention_dropout=0.2, use_bias=False, normalize_first=True,
        layer_norm_epsilon=1e-6, intermediate_dropout=0.3,
        kernel_initializer="he_normal", attention_initializer="zeros",
        residual_attention="mean", self_residual=False, cross_residual=False,
        cross_attention=False, layer_index=3, score_dtype="compute",
        attention_implementation="reference")
    block = decoder_block.RealFormerDecoderBlock(**arguments)
    config = block.get_config()
    for key, value in arguments.items():
      got = config[key]
      if key.endswith("initializer"):
        got = keras.initializers.get(got).__class__.__name__.lower()
        value = value.replace("_", "")
      self.assertEqual(value, got, key)
    layer_checks.assert_serialization_round_trip(block)
    # The tf_keras names (Model Garden's) are refused, naming keras-hub's.
    for old, new in (("intermediate_activation", "activation"),
                     ("dropout_rate", "dropout"),
                     ("attention_dropout_rate", "attention_dropout")):
      with self.assertRaisesRegex(TypeError, (
          f"RealFormerDecoderBlock got an unexpected keyword argument "
          f"'{old}': did you mean '{new}'")):
        decoder_block.RealFormerDecoderBlock(num_heads=2, intermediate_dim=12,
                                             **{old: 0.1})
    block(self.x)   # built: weights the config describes
    self.assertFalse(block.self_attention.use_bias)
    self.assertEqual("none", block.self_attention.residual_attention)

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, "memory .* is required"):
      _block()(self.x)
    with self.assertRaisesRegex(ValueError, "cross_attention=False"):
      _block(cross_attention=False)(self.x, self.memory)
    with self.assertRaisesRegex(ValueError, "width 16 is not divisible by "
                                "num_attention_heads=3"):
      _block(num_heads=3)(self.x, self.memory)
    with self.assertRaisesRegex(ValueError, "residual_attention"):
      _block(residual_attention="avg")
    with self.assertRaisesRegex(ValueError, "score_dtype"):
      _block(score_dtype="float16")
    with self.assertRaisesRegex(ValueError, "layer_index"):
      _block(layer_index=-1)
    with self.assertRaisesRegex(TypeError, "missing 1 required positional "
                                "argument: 'intermediate_dim'"):
      decoder_block.RealFormerDecoderBlock(num_heads=N)
    with self.assertRaisesRegex(ValueError,
                                "intermediate_dim must be a positive"):
      _block(intermediate_dim=0)
    with self.assertRaisesRegex(ValueError, "cache_update_index go together"):
      _block(cross_attention=False)(
          self.x, cache=ops.zeros((B, 2, T, N, D // N)))
