"""RealFormerTextClassifier: `.keras` round trip; `export()` (TensorFlow and
JAX) served by a fresh process under the preprocessor's input names; a
preprocessor the backbone cannot take is refused, naming both sizes."""

import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import tasks
from realformer_tf.keras3 import text_classifier
from tests.helpers import shared_data
from tests.helpers import keras3_encoders as utils
from tests.helpers import keras3_tasks

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
    try:  # Served at another length: the error names the input.
      served(**{k: tf.constant(np.pad(v, [(0, 0), (0, 4)]))
                for k, v in inputs.items()})
    except tf.errors.InvalidArgumentError as e:
      print(e.message)
    """)


@keras3_tasks.EXPORT_BACKENDS
def test_exported_saved_model_serves_in_a_fresh_process(model, tmp_path):
  """Regression: on JAX `export()` failed (jax2tf could not compare the free
  sequence dimension with `PositionEmbedding`'s 16 rows)."""
  x = preprocessed(model)
  expected = keras.ops.convert_to_numpy(model(x))
  export_dir = os.path.join(tmp_path, "exported")
  _, signature = keras3_tasks.export_and_load(model, export_dir)
  # The preprocessor's names and length: what `serve(**features)` needs.
  assert signature == {name: ((None, 16), "int32") for name in x}, signature
  np.savez(os.path.join(tmp_path, "inputs.npz"), **x)
  served = os.path.join(tmp_path, "served.npy")
  result = subprocess.run(
      [sys.executable, "-c", _SERVE, export_dir,
       os.path.join(tmp_path, "inputs.npz"), served],
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-3000:]
  np.testing.assert_allclose(np.load(served), expected, atol=1e-5, rtol=0)
  # Issue 39.7: another length fails on a few lines naming the input and
  # both lengths (a JAX export printed its StableHLO module's text).
  message = result.stdout
  assert re.search(r"Input `(padding_mask|segment_ids|token_ids)`, axis 1: "
                   r"served with another length \(x\) than the exported 16 "
                   r"\(y\); this SavedModel takes shape \[None, 16\].*"
                   r"\[x .*\] \[20\] \[y .*\] \[16\]", message, re.S), message
  assert "stablehlo" not in message and len(message.splitlines()) < 12, (
      message)


def test_refuses_a_tokenizer_larger_than_the_backbone():
  """Regression: a 1830-token vocabulary on a 50-row embedding gave NaN on
  JAX and a bare InvalidArgumentError on TensorFlow."""
  tokenizer = preprocessing.RealFormerTokenizer(vocabulary=VOCAB)
  small = backbone_lib.RealFormerBackbone(**utils.TINY)  # 50 ids
  bigger = preprocessing.RealFormerTextClassifierPreprocessor(
      tokenizer, sequence_length=12)
  match = r"tokenizer has 1830 tokens but .* has 50 rows"
  with pytest.raises(ValueError, match=match):
    text_classifier.RealFormerTextClassifier(small, num_classes=2,
                                             preprocessor=bigger)
  # Attached afterwards: refused too, and the model keeps none.
  model = text_classifier.RealFormerTextClassifier(small, num_classes=2)
  with pytest.raises(ValueError, match=match):
    model.preprocessor = bigger
  assert model.preprocessor is None


def test_refuses_a_sequence_longer_than_the_positions():
  tokenizer = preprocessing.RealFormerTokenizer(vocabulary=VOCAB)
  backbone = backbone_lib.RealFormerBackbone(**dict(
      utils.TINY, vocabulary_size=tokenizer.vocabulary_size()))  # 12 rows
  with pytest.raises(ValueError, match=r"sequence_length is 32 but the "
                     r"backbone has 12 positions"):
    text_classifier.RealFormerTextClassifier(
        backbone, num_classes=2,
        preprocessor=preprocessing.RealFormerTextClassifierPreprocessor(
            tokenizer, sequence_length=32))


def test_realformer_task_refuses_a_class_whose_override_it_would_skip():
  """Its members call `Task`'s by name: an override in between would be
  skipped silently, so the decorator refuses it."""

  class Middle(text_classifier.RealFormerTextClassifier.__base__):
    def export(self, filepath, **kwargs):  # pylint: disable=arguments-differ
      raise NotImplementedError

  with pytest.raises(TypeError, match=r"Middle defines \['export'\], which "
                     r"@realformer_task would skip on Sub"):
    tasks.realformer_task(type("Sub", (Middle,), {}))


def test_a_misspelled_task_argument_names_the_closest_valid_one():
  backbone = backbone_lib.RealFormerBackbone(**utils.TINY)
  with pytest.raises(TypeError, match="RealFormerTextClassifier got an "
                     "unexpected keyword argument 'droput': did you mean "
                     "'dropout'"):
    text_classifier.RealFormerTextClassifier(backbone, 2, droput=0.3)
  classifier = text_classifier.RealFormerTextClassifier(
      backbone, num_classes=2, dropout=0.3, name="c", compile=False)
  assert classifier.name == "c" and classifier.dropout == 0.3
