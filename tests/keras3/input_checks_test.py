"""input_checks: a bare backbone refuses inputs it cannot take, by name.

Issue 39 item 3: ids outside a table gave silent NaN on JAX, a sequence past
the positions failed inside `PositionEmbedding`, a wrong padding mask deep in
attention (a `[1, seq]` one was broadcast over the batch), and a failure
inside `predict()` left the model broken on JAX. On the backend the suite
runs under (TensorFlow; JAX in `backends_test`'s re-run and by hand).
"""

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_backbone
from realformer_tf.keras3 import input_checks
from realformer_tf.keras3 import text_classifier
from tests.helpers import keras3_encoders as utils
from tests.helpers import keras3_tasks
from tests.helpers import no_tensorflow

tf = no_tensorflow.tensorflow_or_none()

# TINY: 50 ids, 2 segments, 12 positions.
_INPUTS = utils.backbone_inputs(batch=2, seq=8)
_BAD = [
    (dict(token_ids=_INPUTS["token_ids"] + 45),
     r"token_ids\[0, 0\] is \d+, outside \[0, 50\) \(the backbone's "
     r"vocabulary_size=50\); \d+ id\(s\) out of range"),
    (dict(token_ids=-_INPUTS["token_ids"]),
     r"token_ids\[0, 0\] is -\d+, outside \[0, 50\)"),
    (dict(segment_ids=_INPUTS["segment_ids"] * 2),
     r"segment_ids\[0, 4\] is 2, outside \[0, 2\) \(the backbone's "
     r"num_segments=2\)"),
    (dict(padding_mask=_INPUTS["padding_mask"][:1]),
     r"padding_mask has shape \(1, 8\) but token_ids has shape \(2, 8\): "
     r"every input must have token_ids's shape \(a mask is not broadcast"),
    (dict(padding_mask=_INPUTS["padding_mask"][:, :5]),
     r"padding_mask has shape \(2, 5\) but token_ids has shape \(2, 8\)"),
    (dict(segment_ids=_INPUTS["segment_ids"][0]),
     r"segment_ids must be \[batch, sequence\] \(rank 2\), got shape \(8,\)"),
    ({k: np.tile(v, (1, 2)) for k, v in _INPUTS.items()},
     r"token_ids is 16 tokens long but the backbone has 12 positions "
     r"\(max_sequence_length=12\); pass at most 12 tokens"),
]


@pytest.fixture(scope="module", name="backbone")
def fixture_backbone():
  return backbone_lib.RealFormerBackbone(**utils.TINY)


@pytest.mark.parametrize("changes, message", _BAD)
def test_an_eager_call_refuses_each_bad_input(backbone, changes, message):
  with pytest.raises(ValueError, match="RealFormerBackbone: " + message):
    backbone(dict(_INPUTS, **changes))


@pytest.mark.parametrize("method", ["predict", "evaluate", "fit",
                                    "predict_on_batch"])
@pytest.mark.parametrize("changes, message", _BAD[:1] + _BAD[2:4])
def test_fit_evaluate_predict_refuse_bad_data_and_the_model_still_works(
    backbone, method, changes, message):
  expected = keras.ops.convert_to_numpy(backbone(_INPUTS)["pooled_output"])
  backbone.compile(loss={"pooled_output": "mse"})
  x = dict(_INPUTS, **changes)
  targets = {"pooled_output": np.zeros((2, 16), "float32")}
  call = dict(predict=lambda: backbone.predict(x, verbose=0),
              evaluate=lambda: backbone.evaluate(x, targets, verbose=0),
              fit=lambda: backbone.fit(x, targets, verbose=0),
              predict_on_batch=lambda: backbone.predict_on_batch(x))[method]
  with pytest.raises(ValueError, match=message):
    call()
  np.testing.assert_allclose(
      backbone.predict(_INPUTS, verbose=0)["pooled_output"], expected,
      atol=1e-6)


def _traced_error(message):
  """What a bad `tf.data.Dataset` batch raises: on JAX our check, at trace
  time; Keras' TensorFlow trainer traces with the sequence dimension
  relaxed to None, so there TensorFlow's own op fails when it runs
  (`InvalidArgumentError`; docs/keras3.md says so)."""
  if keras.backend.backend() == "tensorflow":
    return pytest.raises(tf.errors.InvalidArgumentError)
  return pytest.raises(ValueError, match=message)


@no_tensorflow.needs_tensorflow
def test_a_traced_batch_too_long_fails_by_name_and_predict_still_works(
    backbone):
  """A dataset's values are not read on the host: its batch fails when
  traced; the model's variables keep their values (Keras' JAX trainer had
  detached them: "'NoneType' object is not callable" on every later call).
  """
  expected = backbone.predict(_INPUTS, verbose=0)["pooled_output"]
  dataset = tf.data.Dataset.from_tensor_slices(
      {k: np.tile(v, (1, 2)) for k, v in _INPUTS.items()}).batch(2)
  with _traced_error("token_ids is 16 tokens long"):
    backbone.predict(dataset, verbose=0)
  np.testing.assert_allclose(
      backbone.predict(_INPUTS, verbose=0)["pooled_output"], expected,
      atol=1e-6)


@no_tensorflow.needs_tensorflow
def test_a_task_without_preprocessor_checks_its_backbone_inputs(backbone):
  classifier = text_classifier.RealFormerTextClassifier(backbone, 2)
  expected = classifier.predict(_INPUTS, verbose=0)
  with pytest.raises(ValueError, match=_BAD[0][1]):
    classifier.predict(dict(_INPUTS, **_BAD[0][0]), verbose=0)
  with pytest.raises(ValueError, match=_BAD[2][1]):
    classifier.fit(dict(_INPUTS, **_BAD[2][0]), np.array([0, 1]), verbose=0)
  dataset = tf.data.Dataset.from_tensor_slices(
      dict(_INPUTS, padding_mask=_INPUTS["padding_mask"][:, :5])).batch(2)
  with _traced_error("padding_mask has shape"):
    classifier.predict(dataset, verbose=0)
  np.testing.assert_allclose(classifier.predict(_INPUTS, verbose=0),
                             expected, atol=1e-6)


def test_the_decoder_backbone_checks_its_ids_and_mask():
  decoder = decoder_backbone.RealFormerDecoderBackbone(
      vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
      intermediate_dim=16, max_sequence_length=8)
  ids, mask = np.full((2, 4), 20, "int32"), np.ones((2, 4), "int32")
  with pytest.raises(ValueError, match=r"RealFormerDecoderBackbone: "
                     r"token_ids\[0, 0\] is 20, outside \[0, 20\) \(the "
                     r"backbone's vocabulary_size=20\)"):
    decoder({"token_ids": ids, "padding_mask": mask})
  with pytest.raises(ValueError, match=r"padding_mask has shape \(1, 4\)"):
    decoder({"token_ids": ids - 1, "padding_mask": mask[:1]})
  assert tuple(decoder({"token_ids": ids - 1, "padding_mask": mask}).shape) == (
      2, 4, 8)


def test_traced_values_are_not_read():
  """Under `jit`/`tf.function` ids are tracers: `concrete` gives None for
  them (no device-to-host copy per step) and the arrays for eager values."""
  seen = []

  def record(x):
    seen.append(input_checks.concrete(x))
    return x

  if keras.backend.backend() == "jax":
    import jax  # pylint: disable=g-import-not-at-top
    jax.jit(record)(np.array([[1, 2]]))
  else:
    tf.function(record)(tf.constant([[1, 2]]))
  assert seen == [None]
  np.testing.assert_array_equal(
      input_checks.concrete(keras.ops.convert_to_tensor([[1, 2]])), [[1, 2]])
  assert input_checks.concrete(keras.Input((None,), dtype="int32")) is None


@keras3_tasks.EXPORT_BACKENDS
@pytest.mark.parametrize("what", ["task", "backbone"])
def test_export_at_a_length_past_the_positions_names_input_and_length(
    backbone, what, tmp_path):
  """Issue 39 item 7: on JAX this dumped ~70 lines of StableHLO (jax2tf's
  shape refinement), 6 lines of a slice error on TensorFlow."""
  model = (text_classifier.RealFormerTextClassifier(backbone, 2)
           if what == "task" else backbone)
  signature = {name: keras.InputSpec(shape=(None, 16), dtype="int32",
                                     name=name) for name in _INPUTS}
  with pytest.raises(ValueError, match=(
      r"RealFormerBackbone: token_ids is 16 tokens long but the backbone "
      r"has 12 positions \(max_sequence_length=12\)")) as error:
    model.export(str(tmp_path / "export"), input_signature=[signature],
                 verbose=False)
  assert "func.func" not in str(error.value) and "stablehlo" not in str(
      error.value).lower()
  assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("token_ids", [
    np.full((2, 8), 3.7, "float32"),
    np.random.default_rng(0).random((2, 8))])
def test_float_ids_are_refused_not_truncated(backbone, token_ids):
  """Issue 47: Keras' int32 input truncated 3.7 to id 3 and every random
  float in [0, 1) to id 0, silently."""
  with pytest.raises(ValueError, match=r"RealFormerBackbone: token_ids has "
                     r"dtype float\d+, but ids must be integers .*pass "
                     "token_ids as int32"):
    backbone(dict(_INPUTS, token_ids=token_ids))


def test_labels_outside_the_classes_are_refused(backbone):
  """Issue 47: a label past num_classes trained with a finite loss."""
  classifier = text_classifier.RealFormerTextClassifier(backbone, 2)
  classifier.compile(loss=keras.losses.SparseCategoricalCrossentropy(
      from_logits=True), optimizer="adam")
  before = [np.array(w) for w in classifier.get_weights()]
  for labels, message in [
      ([0, 2], r"label\[1\] is 2, not a class id in \[0, 2\) "
       r"\(num_classes=2\); 1 label\(s\) out of range"),
      ([-1, 0], r"label\[0\] is -1, not a class id in \[0, 2\)"),
      ([0.5, 1.0], r"label\[0\] is 0.5, not a class id")]:
    for run in (classifier.fit, classifier.evaluate):
      with pytest.raises(ValueError,
                         match="RealFormerTextClassifier: " + message):
        run(_INPUTS, y=np.array(labels), verbose=0)
  for old, new in zip(before, classifier.get_weights()):
    np.testing.assert_array_equal(old, new)  # Nothing trained.
  classifier.fit(_INPUTS, np.array([0, 1]), verbose=0)  # Good labels train.
  assert any(not np.array_equal(old, new)
             for old, new in zip(before, classifier.get_weights()))
  # A regression head (num_classes=1, mean squared error) takes any float.
  regression = text_classifier.RealFormerTextClassifier(backbone, 1)
  regression.compile(loss="mean_squared_error", optimizer="adam")
  regression.fit(_INPUTS, np.array([3.2, 4.9]), verbose=0)


@pytest.mark.parametrize("preset", ["bert_tiny_en_uncased",
                                    "kaggle://keras/bert/keras/bert_tiny_en_uncased",
                                    "hf://google/bert"])
def test_a_hub_preset_is_refused_naming_the_converter(preset):
  """Issue 47: keras-hub's preset names ended in a raw ConnectionError."""
  for load in (backbone_lib.RealFormerBackbone.from_preset,
               text_classifier.RealFormerTextClassifier.from_preset):
    with pytest.raises(ValueError, match=(
        f"'{preset}' is not a preset directory: .* nothing here downloads. "
        r".*load_bert_backbone\(keras_hub.models.BertBackbone.from_preset")):
      load(preset)
  with pytest.raises(FileNotFoundError, match="/nowhere/preset: no such "):
    backbone_lib.RealFormerBackbone.from_preset("/nowhere/preset")
