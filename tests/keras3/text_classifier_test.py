"""RealFormerTextClassifier: `.keras` round trip; `export()` served by a fresh
process (TensorFlow backend)."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import text_classifier
from tests.helpers import shared_data
from tests.helpers import keras3_encoders as utils

VOCAB = os.path.join(shared_data.FIXTURE_DIR, "vocab.txt")
TEXTS = (["The river rises in the hills.", "Most of the mills closed."],
         ["It flows south.", "The valley was settled early."])


def classifier(seed=0):
  keras.utils.set_random_seed(seed)
  tokenizer = preprocessing.RealFormerTokenizer(vocabulary=VOCAB,
                                                lowercase=True)
  backbone = backbone_lib.RealFormerBackbone(
      **dict(utils.TINY, vocabulary_size=tokenizer.vocabulary_size(),
             max_sequence_length=16))
  return text_classifier.RealFormerTextClassifier(
      backbone, num_classes=3, dropout=0.0,
      preprocessor=preprocessing.RealFormerTextClassifierPreprocessor(
          tokenizer, sequence_length=16))


def preprocessed(model):
  """The preprocessor's (deterministic) inputs for `TEXTS`, as NumPy."""
  x = model.preprocessor(x=TEXTS)  # A positional tuple would be (x, y).
  return {k: np.asarray(keras.ops.convert_to_numpy(v)).astype("int32")
          for k, v in x.items()}


@pytest.fixture(scope="module", name="model")
def fixture_model():
  return classifier()


def test_keras_file_round_trip(model, tmp_path):
  x = preprocessed(model)
  assert x["segment_ids"].max() == 1  # Sentence pairs.
  expected = keras.ops.convert_to_numpy(model(x))
  assert expected.shape == (2, 3)
  path = os.path.join(tmp_path, "classifier.keras")
  model.save(path)
  restored = keras.saving.load_model(path)
  assert isinstance(restored, text_classifier.RealFormerTextClassifier)
  assert isinstance(restored.preprocessor,
                    preprocessing.RealFormerTextClassifierPreprocessor)
  np.testing.assert_array_equal(keras.ops.convert_to_numpy(restored(x)),
                                expected)


_SERVE = textwrap.dedent("""\
    import sys
    import numpy as np
    import tensorflow as tf
    served = tf.saved_model.load(sys.argv[1]).signatures["serve"]
    inputs = dict(np.load(sys.argv[2]))
    np.save(sys.argv[3], served(**{k: tf.constant(v)
                                   for k, v in inputs.items()})["output_0"])
    """)


@pytest.mark.skipif(keras.config.backend() != "tensorflow",
                    reason="model.export() writes a TF SavedModel from the "
                    "TensorFlow backend only")
def test_exported_saved_model_serves_in_a_fresh_process(model, tmp_path):
  x = preprocessed(model)
  expected = keras.ops.convert_to_numpy(model(x))
  export_dir = os.path.join(tmp_path, "exported")
  model.export(export_dir, verbose=False)
  np.savez(os.path.join(tmp_path, "inputs.npz"), **x)
  served = os.path.join(tmp_path, "served.npy")
  result = subprocess.run(
      [sys.executable, "-c", _SERVE, export_dir,
       os.path.join(tmp_path, "inputs.npz"), served],
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  np.testing.assert_allclose(np.load(served), expected, atol=1e-6, rtol=0)
