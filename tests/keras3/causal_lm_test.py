"""Tests for RealFormerCausalLM and its preprocessor (any Keras backend)."""

import os
import shutil
import tempfile

from absl.testing import parameterized
import keras
from keras import ops
import keras_hub
import numpy as np
import pytest

from realformer_tf.keras3 import causal_lm
from realformer_tf.keras3 import decoder_backbone
from tests.helpers import numpy_decoder_reference as ndr
from tests.helpers import keras3_tasks
from tests.helpers import shared_data
from tests.helpers import keras3_layer_checks as layer_checks

KWARGS = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
              dropout=0.0)
SENTENCES = ["the cat sat on the mat .", "a dog ran to the park .",
             "the cat ran to the mat .", "a dog sat on the park ."]


def _assert_close(want, got, atol):
  np.testing.assert_allclose(ops.convert_to_numpy(got), want, rtol=0,
                             atol=atol)


def _preprocessor(sequence_length=10):
  vocabulary = os.path.join(shared_data.FIXTURE_DIR, "vocab.txt")
  return causal_lm.RealFormerCausalLMPreprocessor(
      tokenizer=keras_hub.models.BertTokenizer(vocabulary=vocabulary),
      sequence_length=sequence_length)


def _greedy_by_recompute(lm, token_ids, padding_mask):
  """Greedy decoding by a full forward pass for every new token.

  As keras-hub's samplers: generation starts at the shortest prompt's end;
  each position takes the argmax of the previous position's logits unless it
  holds a prompt token.
  """
  tokens = token_ids.copy()
  for t in range(int(padding_mask.sum(-1).min()), tokens.shape[1]):
    logits = ops.convert_to_numpy(
        lm({"token_ids": tokens, "padding_mask": np.ones_like(tokens)}))
    tokens[:, t] = np.where(padding_mask[:, t], tokens[:, t],
                            logits[:, t - 1].argmax(-1))
  return tokens


def _next_token_loss(backbone, x, y, weights):
  """The weighted next-token cross-entropy, from the NumPy model.

  NumPy rather than the Keras model: no further forward pass to compile
  (on JAX, op by op).
  """
  token_ids, padding_mask, y, weights = [
      ops.convert_to_numpy(t).astype(int) for t in
      (x["token_ids"], x["padding_mask"], y, weights)]
  _, logits = ndr.decoder_only_lm(backbone, token_ids, padding_mask, "sum")
  logits = logits - logits.max(-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  picked = np.take_along_axis(log_probs, y[..., None], -1)[..., 0]
  return -(picked * weights).sum() / weights.sum()


class RealFormerCausalLMTest(parameterized.TestCase):

  def _temp_dir(self):
    path = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, path)
    return path

  def test_generate_equals_greedy_by_full_recompute(self):
    """One configuration: the cached steps of "mean" and Post-LN blocks are
    checked in decoder_block_test; each compiled `generate` costs seconds."""
    keras.utils.set_random_seed(1)
    backbone = decoder_backbone.RealFormerDecoderBackbone(
        vocabulary_size=29, max_sequence_length=9, **KWARGS)
    lm = causal_lm.RealFormerCausalLM(backbone=backbone)
    lm.compile(sampler="greedy")
    token_ids = np.array([[2, 5, 7, 0, 0, 0, 0, 0, 0],
                          [2, 9, 11, 13, 4, 0, 0, 0, 0]], "int32")
    padding_mask = (token_ids > 0).astype("int32")
    got = lm.generate({"token_ids": token_ids, "padding_mask": padding_mask},
                      stop_token_ids=None)
    want = _greedy_by_recompute(lm, token_ids, padding_mask)
    np.testing.assert_array_equal(want, got["token_ids"])
    # The prompts are kept; logits match the NumPy model.
    np.testing.assert_array_equal(token_ids[padding_mask == 1],
                                  got["token_ids"][padding_mask == 1])
    _, logits = ndr.decoder_only_lm(backbone, want, np.ones_like(want), "sum")
    _assert_close(logits, lm(
        {"token_ids": want, "padding_mask": np.ones_like(want)}), atol=1e-5)

  def test_fit_lowers_loss_and_generates_text(self):
    """`fit` on strings through the preprocessor, then `generate` on text.

    Eager on TensorFlow, where tracing the train step costs about three
    times the six steps themselves (the compiled path runs the same Keras
    `train_step`; `generate()` compiled is tested above); compiled on JAX,
    whose eager mode compiles every op on its own.
    """
    keras.utils.set_random_seed(0)
    preprocessor = _preprocessor()
    backbone = decoder_backbone.RealFormerDecoderBackbone(
        vocabulary_size=preprocessor.tokenizer.vocabulary_size(),
        max_sequence_length=10, **KWARGS)
    lm = causal_lm.RealFormerCausalLM(backbone=backbone,
                                      preprocessor=preprocessor)
    lm.compile(optimizer=keras.optimizers.Adam(3e-2), sampler="greedy",
               run_eagerly=keras.config.backend() == "tensorflow")
    x, y, weights = keras.utils.unpack_x_y_sample_weight(
        preprocessor(SENTENCES))
    before = _next_token_loss(backbone, x, y, weights)  # ~ln(1830) = 7.5
    lm.fit(x=SENTENCES * 6, batch_size=4, epochs=1, verbose=0)
    after = _next_token_loss(backbone, x, y, weights)
    self.assertLess(after, 0.7 * before, (before, after))
    # Generation stops at [SEP] and strips the special tokens.
    text = lm.generate(["the cat"], max_length=10)
    self.assertRegex(text[0], r"^the cat")
    self.assertNotIn("[SEP]", text[0])

  def test_keras_round_trip(self):
    lm = causal_lm.RealFormerCausalLM(
        backbone=decoder_backbone.RealFormerDecoderBackbone(
            vocabulary_size=_preprocessor().tokenizer.vocabulary_size(),
            max_sequence_length=10, residual_attention="mean", **KWARGS),
        preprocessor=_preprocessor())
    layer_checks.assert_serialization_round_trip(lm)
    x, _, _ = keras.utils.unpack_x_y_sample_weight(lm.preprocessor(SENTENCES))
    loaded = layer_checks.assert_keras_file_round_trip(
        lm, x, os.path.join(self._temp_dir(), "lm.keras"))
    self.assertIsInstance(loaded, causal_lm.RealFormerCausalLM)
    self.assertEqual("mean", loaded.backbone.residual_attention)
    # The tokenizer came back with its vocabulary.
    x_loaded, _, _ = keras.utils.unpack_x_y_sample_weight(
        loaded.preprocessor(SENTENCES))
    np.testing.assert_array_equal(ops.convert_to_numpy(x["token_ids"]),
                                  ops.convert_to_numpy(x_loaded["token_ids"]))


def _tiny_lm(max_sequence_length=12, sequence_length=10):
  preprocessor = _preprocessor(sequence_length)
  return causal_lm.RealFormerCausalLM(
      backbone=decoder_backbone.RealFormerDecoderBackbone(
          vocabulary_size=preprocessor.tokenizer.vocabulary_size(),
          max_sequence_length=max_sequence_length, **KWARGS),
      preprocessor=preprocessor)


def test_generate_refuses_max_length_past_the_positions():
  """Regression: it failed inside `PositionEmbedding` ("slice_sizes ...")."""
  lm = _tiny_lm(max_sequence_length=12)
  lm.compile(sampler="greedy")
  with pytest.raises(ValueError, match=r"max_length is 20 but the model has "
                     r"12 positions"):
    lm.generate("the cat", max_length=20)
  lm.preprocessor = None  # Preprocessed inputs: their width counts.
  ids = np.zeros((1, 14), "int32")
  with pytest.raises(ValueError, match=r"the width of inputs\['token_ids'\] "
                     r"is 14 but the model has 12 positions"):
    lm.generate({"token_ids": ids, "padding_mask": ids}, stop_token_ids=None)


def test_generate_refuses_a_prompt_that_fills_max_length():
  """Regression: the prompt was cut to `max_length`, nothing generated."""
  lm = _tiny_lm()
  lm.compile(sampler="greedy")
  # [CLS] + 7 tokens = 8.
  prompt = "the cat sat on the mat ."
  with pytest.raises(ValueError, match=r"prompt 1 is 8 tokens long \(\[CLS\] "
                     r"included\) and max_length is 6"):
    lm.generate(["the cat", prompt], max_length=6)
  with pytest.raises(ValueError, match=r"prompt 0 is 8 tokens .* max_length "
                     r"is 8"):
    lm.generate(prompt, max_length=8)  # Fits, but nothing left to generate.
  text = lm.generate(prompt, max_length=9)
  assert text.startswith("the cat sat on the mat"), text


@pytest.mark.parametrize("prompts", [[], (), np.array([], dtype=str)])
def test_generate_refuses_no_prompt(prompts):
  """Regression (issue 39 item 5): a raw IndexError from keras-hub's
  `_build_cache`."""
  lm = _tiny_lm()
  lm.compile(sampler="greedy")
  with pytest.raises(ValueError, match=r"generate\(\): no prompts \(got "):
    lm.generate(prompts)
  lm.preprocessor = None
  ids = np.zeros((0, 8), "int32")
  with pytest.raises(ValueError, match=r"inputs\['token_ids'\] must be "
                     r"\[batch, length\] with at least one row, got shape "
                     r"\(0, 8\)"):
    lm.generate({"token_ids": ids, "padding_mask": ids}, stop_token_ids=None)


@pytest.mark.parametrize("max_length", [0, 1, -3, 6.0, True])
def test_generate_refuses_a_max_length_that_is_no_length(max_length):
  """Regression (issue 38 item 11): max_length=0 was read as "not given"
  and generated to the preprocessor's length."""
  lm = _tiny_lm()
  lm.compile(sampler="greedy")
  with pytest.raises(ValueError, match=(
      r"generate\(\): max_length must be an int >= 2 .*got "
      f"{max_length!r}; None \\(default\\) is the preprocessor's "
      r"sequence_length \(10\)")):
    lm.generate("the cat", max_length=max_length)
  # A NumPy int is an int; None is the preprocessor's length.
  assert lm.generate("the cat", max_length=np.int64(5)).startswith("the cat")


def test_refuses_a_tokenizer_larger_than_the_backbone():
  preprocessor = _preprocessor()  # 1830 ids
  with pytest.raises(ValueError, match=r"tokenizer has 1830 tokens but the "
                     r"backbone's token embedding has 29 rows"):
    causal_lm.RealFormerCausalLM(
        backbone=decoder_backbone.RealFormerDecoderBackbone(
            vocabulary_size=29, max_sequence_length=10, **KWARGS),
        preprocessor=preprocessor)


@keras3_tasks.EXPORT_BACKENDS
def test_export_serves_the_preprocessor_names(tmp_path):
  lm = _tiny_lm()
  x, _, _ = keras.utils.unpack_x_y_sample_weight(lm.preprocessor(SENTENCES))
  x = {k: ops.convert_to_numpy(v) for k, v in x.items()}
  serve, signature = keras3_tasks.export_and_load(
      lm, os.path.join(tmp_path, "lm"))
  assert signature == {"token_ids": ((None, 10), "int32"),
                       "padding_mask": ((None, 10), "int32")}, signature
  np.testing.assert_allclose(keras3_tasks.served(serve, x),
                             ops.convert_to_numpy(lm(x)), atol=1e-5)
