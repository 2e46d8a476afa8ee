"""The tokenizer/preprocessor subclasses make keras-hub presets of our tasks
load back (keras-hub dispatches on `backbone_cls`)."""

import os

import keras
import keras_hub
import numpy as np

from realformer_tf.keras3 import backbone as backbone_lib
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
