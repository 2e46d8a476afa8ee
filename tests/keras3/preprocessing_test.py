"""The tokenizer/preprocessor subclasses make keras-hub presets of our tasks
load back (keras-hub dispatches on `backbone_cls`); the presets' metadata
names our task classes; a vocabulary that arrives with a preset and does not
fit the backbone is refused before anything is computed."""

import glob
import json
import os

import keras
import keras_hub
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_backbone
from realformer_tf.keras3 import masked_lm
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import text_classifier
from tests.keras3 import text_classifier_test


def test_preset_round_trip(tmp_path):
  model = text_classifier_test.classifier(seed=2)
  x = text_classifier_test.preprocessed(model)
  preset = os.path.join(tmp_path, "preset")
  model.save_to_preset(preset)
  # Through keras-hub's generic entry points, as a user of presets would.
  restored = keras_hub.models.TextClassifier.from_preset(preset)
  assert isinstance(restored, text_classifier.RealFormerTextClassifier)
  assert isinstance(restored.preprocessor,
                    preprocessing.RealFormerTextClassifierPreprocessor)
  assert isinstance(restored.preprocessor.tokenizer,
                    preprocessing.RealFormerTokenizer)
  assert isinstance(keras_hub.models.Backbone.from_preset(preset),
                    backbone_lib.RealFormerBackbone)
  np.testing.assert_array_equal(keras.ops.convert_to_numpy(restored(x)),
                                keras.ops.convert_to_numpy(model(x)))


def test_preset_metadata_names_our_tasks(tmp_path):
  """Regression: keras-hub's saver listed `BertMaskedLM`,
  `BertTextClassifier` (each class's `__base__`)."""
  model = text_classifier_test.classifier(seed=3)
  preset = os.path.join(tmp_path, "preset")
  model.save_to_preset(preset)
  with open(os.path.join(preset, "metadata.json"), encoding="utf-8") as f:
    metadata = json.load(f)
  assert metadata["tasks"] == ["RealFormerMaskedLM",
                               "RealFormerTextClassifier"], metadata
  # Each named task loads from it as our class (the masked LM's head is new).
  assert isinstance(keras_hub.models.MaskedLM.from_preset(preset),
                    masked_lm.RealFormerMaskedLM)
  assert isinstance(
      text_classifier.RealFormerTextClassifier.from_preset(preset),
      text_classifier.RealFormerTextClassifier)


def test_backbone_preset_metadata_names_our_tasks(tmp_path):
  """Regression: a backbone saved alone listed keras-hub's BERT / GPT-2 tasks."""
  for model, expected in (
      (text_classifier_test.classifier(seed=3).backbone,
       ["RealFormerMaskedLM", "RealFormerTextClassifier"]),
      (decoder_backbone.RealFormerDecoderBackbone(
          vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
          intermediate_dim=16, max_sequence_length=8),
       ["RealFormerCausalLM"])):
    preset = os.path.join(tmp_path, type(model).__name__)
    model.save_to_preset(preset)
    with open(os.path.join(preset, "metadata.json"), encoding="utf-8") as f:
      assert json.load(f)["tasks"] == expected


def test_preset_vocabulary_larger_than_the_backbone_is_refused(tmp_path):
  """A preset whose vocabulary file has more ids than its backbone's
  embedding: keras-hub sets the vocabulary after building the task, so the
  check runs when the task is first used (before any batch is computed)."""
  model = text_classifier_test.classifier(seed=4)
  preset = os.path.join(tmp_path, "preset")
  model.save_to_preset(preset)
  vocabulary, = glob.glob(os.path.join(preset, "assets", "tokenizer", "*"))
  with open(vocabulary, "a", encoding="utf-8") as f:
    f.write("".join(f"extra{i}\n" for i in range(5)))  # 1830 + 5
  restored = keras_hub.models.TextClassifier.from_preset(preset)
  with pytest.raises(ValueError, match=r"tokenizer has 1835 tokens but the "
                     r"backbone's token embedding has 1830 rows"):
    restored.predict(["The river rises in the hills."], verbose=0)
