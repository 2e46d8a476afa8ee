"""RealFormerMaskedLM: keras-hub's BERT tokenizer and MLM preprocessor feed it;
a tiny `fit` lowers the loss; `.keras` round trip; `export()` under the
preprocessor's names (TensorFlow and JAX); a larger vocabulary is refused."""

import os

import keras
import keras_hub
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import masked_lm
from tests.helpers import keras3_tasks
from tests.helpers import shared_data

VOCAB = os.path.join(shared_data.FIXTURE_DIR, "vocab.txt")
SEQUENCE_LENGTH = 32


def corpus_sentences():
  """The fixture corpus (tests/testdata/corpus) as 46 sentences."""
  path = os.path.join(shared_data.FIXTURE_DIR, shared_data.WIKITEXT_VALID)
  with open(path, encoding="utf-8") as f:
    paragraphs = [line.strip() for line in f
                  if line.strip() and not line.strip().startswith("=")]
  return [s for p in paragraphs for s in p.split(" . ") if len(s.split()) > 3]


def _masked_lm(seed, with_preprocessor=True):
  keras.utils.set_random_seed(seed)
  tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
  preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
      tokenizer, sequence_length=SEQUENCE_LENGTH, mask_selection_length=8)
  backbone = backbone_lib.RealFormerBackbone(
      vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2,
      hidden_dim=32, intermediate_dim=64, dropout=0.0,
      max_sequence_length=SEQUENCE_LENGTH)
  model = masked_lm.RealFormerMaskedLM(
      backbone, preprocessor=preprocessor if with_preprocessor else None)
  return model, preprocessor


def _numpy(tree):
  return keras.tree.map_structure(
      lambda v: np.asarray(keras.ops.convert_to_numpy(v)), tree)


def test_fit_lowers_the_loss_and_keras_file_round_trip(tmp_path):
  sentences = corpus_sentences()
  assert len(sentences) == 46
  model, preprocessor = _masked_lm(seed=0, with_preprocessor=False)
  # Masked once, up front: keras-hub re-runs the preprocessor in tf.data on
  # every epoch (~10 s an epoch on 2 busy cores), the model trains in 0.3 s.
  # 40 sentences: 5 full batches, so one traced train step.
  x, y, sample_weight = _numpy(preprocessor(sentences[:40]))
  # TF's XLA compile of the train step takes minutes on CI's 2 cores.
  model.compile(optimizer=keras.optimizers.Adam(3e-3), weighted_metrics=[],
                jit_compile=keras.config.backend() != "tensorflow")
  losses = model.fit(x, y, sample_weight=sample_weight, batch_size=8,
                     epochs=6, shuffle=True, verbose=0).history["loss"]
  # 30 steps. Averaged over all 8 mask slots, ~4 of them filled: the loss
  # starts near 3.3 (not ln(1830) = 7.5).
  assert losses[-1] < 0.8 * losses[0], losses

  # The trained model, with its preprocessor, through a `.keras` file.
  model.preprocessor = preprocessor
  first = {k: v[:2] for k, v in x.items()}
  expected = keras.ops.convert_to_numpy(model(first))
  assert expected.shape == (2, 8, model.backbone.vocabulary_size)
  path = os.path.join(tmp_path, "mlm.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  assert isinstance(restored, masked_lm.RealFormerMaskedLM)
  assert isinstance(restored.backbone, backbone_lib.RealFormerBackbone)
  assert restored.preprocessor.tokenizer.vocabulary_size() == 1830
  np.testing.assert_array_equal(keras.ops.convert_to_numpy(restored(first)),
                                expected)


@keras3_tasks.EXPORT_BACKENDS
def test_export_serves_the_preprocessor_names(tmp_path):
  """Regression: on JAX `export()` failed; the signature now names the
  preprocessor's four outputs, at its lengths (32 tokens, 8 masks)."""
  model, preprocessor = _masked_lm(seed=1)
  x, _, _ = _numpy(preprocessor(corpus_sentences()[:2]))
  serve, signature = keras3_tasks.export_and_load(
      model, os.path.join(tmp_path, "mlm"))
  assert signature == {
      "token_ids": ((None, 32), "int32"), "segment_ids": ((None, 32), "int32"),
      "padding_mask": ((None, 32), "int32"),
      "mask_positions": ((None, 8), "int32")}, signature
  np.testing.assert_allclose(keras3_tasks.served(serve, x),
                             keras.ops.convert_to_numpy(model(x)), atol=1e-5)


def test_refuses_a_tokenizer_larger_than_the_backbone():
  """Regression: ids past the embedding gave NaN on JAX, no error."""
  tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB)  # 1830 ids
  backbone = backbone_lib.RealFormerBackbone(
      vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16,
      intermediate_dim=32, max_sequence_length=SEQUENCE_LENGTH)
  with pytest.raises(ValueError, match=r"tokenizer has 1830 tokens but the "
                     r"backbone's token embedding has 100 rows"):
    masked_lm.RealFormerMaskedLM(
        backbone, preprocessor=keras_hub.models.BertMaskedLMPreprocessor(
            tokenizer, sequence_length=SEQUENCE_LENGTH))
