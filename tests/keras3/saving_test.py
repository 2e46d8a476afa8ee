"""`.keras` files written whole (`save_model`) and damaged ones named for
what they are (`load_model`); presets of our backbones and tasks written
whole (`save_preset`): a failed save (a killed one: the writer suite,
tests/core/writer_suite_test.py) leaves the old preset's
files byte-identical (and unrewritten: same mtimes), a folder that is not
a preset is never replaced. On every backend."""

import logging
import os
import re
import signal

import keras
import keras_hub
from keras_hub.src.utils import preset_utils
import numpy as np
import pytest

from realformer_tf.core import ownership
from realformer_tf.keras3 import saving
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import decoder_backbone
from realformer_tf.keras3 import tasks
from realformer_tf.keras3 import text_classifier
from tests.helpers import file_trees
from tests.helpers import keras3_encoders as utils
from tests.helpers import keras3_tasks
from tests.helpers import kill_writer
from tests.keras3 import text_classifier_test


def _model():
  return backbone_lib.RealFormerBackbone(**utils.TINY)


def test_save_then_load_round_trip(tmp_path):
  model = _model()
  path = saving.save_model(model, str(tmp_path / "m.keras"))
  assert os.listdir(tmp_path) == ["m.keras"]
  inputs = utils.backbone_inputs()
  utils.assert_outputs_close(
      utils.to_numpy(saving.load_model(path)(inputs)),
      utils.to_numpy(model(inputs)))


def test_a_failed_save_leaves_the_previous_file(tmp_path, monkeypatch):
  path = saving.save_model(_model(), str(tmp_path / "m.keras"))
  before = open(path, "rb").read()

  def killed(self, filepath, **kwargs):
    with open(filepath, "wb") as f:
      f.write(b"PK\x03\x04half")
    raise KeyboardInterrupt("killed")

  monkeypatch.setattr(keras.Model, "save", killed)
  with pytest.raises(KeyboardInterrupt):
    saving.save_model(_model(), path)
  assert os.listdir(tmp_path) == ["m.keras"]
  assert open(path, "rb").read() == before
  with pytest.raises(ValueError, match="does not end in .keras"):
    saving.save_model(_model(), str(tmp_path / "m.h5"))


def test_a_half_written_file_is_named_for_what_it_is(tmp_path):
  path = saving.save_model(_model(), str(tmp_path / "m.keras"))
  data = open(path, "rb").read()
  half = str(tmp_path / "half.keras")
  with open(half, "wb") as f:
    f.write(data[:len(data) // 2])
  # keras.saving.load_model alone says "File not found".
  with pytest.raises(ValueError, match=rf"half.keras \({len(data) // 2} "
                     r"bytes\) is not a complete \.keras file.*no zip "
                     "directory.*killed part way"):
    saving.load_model(half)
  open(half, "wb").close()
  with pytest.raises(ValueError, match=r"\(0 bytes\).*is empty"):
    saving.load_model(half)
  with pytest.raises(FileNotFoundError, match="gone.keras does not exist"):
    saving.load_model(str(tmp_path / "gone.keras"))
  with pytest.raises(ValueError, match="is a directory"):
    saving.load_model(str(tmp_path))
  flipped = bytearray(data)
  flipped[len(data) // 3] ^= 0xFF  # Inside a member: its CRC fails.
  with open(half, "wb") as f:
    f.write(bytes(flipped))
  with pytest.raises(ValueError, match="damaged .keras archive"):
    saving.load_model(half)
  np.testing.assert_equal(saving.check_keras_file(path), None)


# --- Presets (`save_preset`, through our `save_to_preset`s) ---


def _logits(task, x):
  return keras.ops.convert_to_numpy(task(x))


@pytest.fixture(scope="module", name="classifiers")
def fixture_classifiers():
  """Two tiny classifiers with different weights: the old and new preset."""
  return text_classifier_test.classifier(seed=2), (
      text_classifier_test.classifier(seed=5))


def test_preset_files_are_keras_hubs():
  assert saving.PRESET_FILES == (preset_utils.CONFIG_FILE,
                                 preset_utils.METADATA_FILE)


def test_preset_round_trips_leave_nothing_beside_them(tmp_path, classifiers):
  model, _ = classifiers
  backbone_dir = os.path.join(tmp_path, "backbone")
  model.backbone.save_to_preset(backbone_dir)
  inputs = utils.backbone_inputs(vocab=model.backbone.vocabulary_size)
  utils.assert_outputs_close(
      utils.to_numpy(
          keras_hub.models.Backbone.from_preset(backbone_dir)(inputs)),
      utils.to_numpy(model.backbone(inputs)))
  task_dir = os.path.join(tmp_path, "task")
  model.save_to_preset(task_dir)
  restored = keras_hub.models.TextClassifier.from_preset(task_dir)
  assert isinstance(restored, text_classifier.RealFormerTextClassifier)
  x = text_classifier_test.preprocessed(model)
  np.testing.assert_array_equal(_logits(restored, x), _logits(model, x))
  assert sorted(os.listdir(tmp_path)) == ["backbone", "task"]


def test_saving_over_a_preset_replaces_it_whole(tmp_path, classifiers):
  old, new = classifiers
  preset = os.path.join(tmp_path, "preset")
  old.save_to_preset(preset)
  os.makedirs(os.path.join(preset, "assets", "old_only"))
  with open(os.path.join(preset, "assets", "old_only", "notes.txt"), "w",
            encoding="utf-8") as f:
    f.write("only the old preset has this")
  new.save_to_preset(preset)
  fresh = os.path.join(tmp_path, "fresh")
  new.save_to_preset(fresh)
  # The same files as a save into a new directory (metadata.json has the
  # time of saving), and the new weights.
  assert sorted(file_trees.files_under(preset)) == sorted(
      file_trees.files_under(fresh))
  restored = keras_hub.models.TextClassifier.from_preset(preset)
  x = text_classifier_test.preprocessed(new)
  np.testing.assert_array_equal(_logits(restored, x), _logits(new, x))
  assert sorted(os.listdir(tmp_path)) == ["fresh", "preset"]


def _fail_writing_weights(monkeypatch):
  """Disk full half way through the backbone's weights file."""
  def save_weights(self, filepath, **kwargs):
    with open(filepath, "wb") as f:
      f.write(b"\x89HDF half")
    raise OSError(28, "No space left on device", filepath)
  monkeypatch.setattr(keras.Model, "save_weights", save_weights)
  return OSError


def _fail_last_metadata_rewrite(monkeypatch):
  """Interrupted in the task's own metadata.json rewrite, its last step
  (the backbone's, inside keras-hub's task saver, is the first)."""
  calls, rewrite = [], tasks.write_preset_task_names
  def write_preset_task_names(preset_dir, backbone):
    calls.append(preset_dir)
    if len(calls) == 2:
      raise KeyboardInterrupt("killed")
    rewrite(preset_dir, backbone)
  monkeypatch.setattr(tasks, "write_preset_task_names",
                      write_preset_task_names)
  return KeyboardInterrupt


def _fail_renaming_the_new_preset_in(monkeypatch):
  """The rename of the complete temp into place fails (after the old
  preset was renamed aside): the old one is renamed back."""
  rename = os.replace
  def failing_rename(source, target, **kwargs):
    if ".tmp-" in os.fspath(source):
      raise PermissionError(13, "Permission denied", target)
    rename(source, target, **kwargs)
  monkeypatch.setattr(os, "replace", failing_rename)
  return PermissionError


@pytest.mark.parametrize("fail", [_fail_writing_weights,
                                  _fail_last_metadata_rewrite,
                                  _fail_renaming_the_new_preset_in])
def test_a_failed_save_leaves_the_old_preset_byte_identical(
    tmp_path, classifiers, monkeypatch, fail):
  old, new = classifiers
  preset = os.path.join(tmp_path, "preset")
  old.save_to_preset(preset)
  before = file_trees.files_under(preset)
  error = fail(monkeypatch)
  with pytest.raises(error):
    new.save_to_preset(preset)
  monkeypatch.undo()
  assert file_trees.files_under(preset) == before
  assert os.listdir(tmp_path) == ["preset"]  # No temp, no backup.
  x = text_classifier_test.preprocessed(old)
  np.testing.assert_array_equal(
      _logits(keras_hub.models.TextClassifier.from_preset(preset), x),
      _logits(old, x))


def _save_refused(model, target, match):
  """`model.save_to_preset(target)` raises `match`; nothing is written."""
  parent = os.path.dirname(target)
  before = sorted(os.listdir(parent)), file_trees.files_under(parent)
  with pytest.raises(FileExistsError, match=match):
    model.save_to_preset(target)
  assert (sorted(os.listdir(parent)), file_trees.files_under(parent)) == before


def test_a_file_or_a_folder_that_is_not_a_preset_is_refused(tmp_path,
                                                            classifiers):
  model, _ = classifiers
  tmp_path = os.path.realpath(tmp_path)  # The errors name the real path.
  a_file = os.path.join(tmp_path, "preset")
  with open(a_file, "w", encoding="utf-8") as f:
    f.write("not a preset")
  folder = os.path.join(tmp_path, "mine")
  os.makedirs(os.path.join(folder, "data"))
  with open(os.path.join(folder, "notes.txt"), "w", encoding="utf-8") as f:
    f.write("a user's folder")
  for save in (model, model.backbone):
    _save_refused(save, a_file, rf"{re.escape(a_file)} is a file")
    _save_refused(save, folder, rf"{re.escape(folder)} is a non-empty "
                  r"directory \(data, notes.txt\) with no config.json or "
                  "metadata.json, so not a keras-hub preset")
  # An empty folder is filled.
  empty = os.path.join(tmp_path, "empty")
  os.mkdir(empty)
  model.backbone.save_to_preset(empty)
  assert preset_utils.CONFIG_FILE in os.listdir(empty)


def test_leftovers_of_ended_saves_are_removed_live_ones_left(tmp_path,
                                                             classifiers,
                                                             caplog):
  model, _ = classifiers
  preset = os.path.join(tmp_path, "preset")
  model.backbone.save_to_preset(preset)
  dead, live = kill_writer.dead_pid(), os.getppid()
  for leftover, pid in ((f"preset.tmp-{dead}", dead),
                        (f"preset.old-{dead}", dead),
                        (f"preset.tmp-{live}", live)):
    os.makedirs(os.path.join(tmp_path, leftover, "assets"))
    with open(os.path.join(tmp_path, leftover + ownership.OWNER_SUFFIX),
              "w") as f:
      f.write(ownership.owner_record(os.path.join(tmp_path, leftover), pid))
  # 38.4: a user's dated copies look like leftovers but have no owner
  # record of ours; a record naming another pid proves nothing either.
  for leftover in ("preset.old-20240101", "preset.tmp-20240102",
                   f"preset.old-{dead + 1}"):
    os.makedirs(os.path.join(tmp_path, leftover, "assets"))
  with open(os.path.join(tmp_path, f"preset.old-{dead + 1}.owner"), "w") as f:
    f.write(ownership.owner_record(f"preset.old-{dead + 1}", dead))
  user_files = file_trees.files_under(tmp_path / "preset.old-20240101")
  with caplog.at_level(logging.INFO, logger="absl"):
    model.backbone.save_to_preset(preset)
  for removed in (f"preset.tmp-{dead}", f"preset.old-{dead}"):
    assert (f"Removed {os.path.realpath(tmp_path)}/{removed}, left by "
            f"process {dead}, a killed writer") in caplog.text
  assert (f"Kept {os.path.realpath(tmp_path)}/preset.old-20240101: named "
          "like a leftover of ours") in caplog.text
  assert sorted(os.listdir(tmp_path)) == sorted([
      "preset", f"preset.tmp-{live}", f"preset.tmp-{live}.owner",
      "preset.old-20240101", "preset.tmp-20240102", f"preset.old-{dead + 1}",
      f"preset.old-{dead + 1}.owner"])
  assert file_trees.files_under(tmp_path / "preset.old-20240101") == (
      user_files)


# --- Our tasks' and backbones' `save` and `export` (38.7): whole or old ---


def _tiny(kind, seed):
  """A tiny model of `kind` ("classifier", "backbone", "decoder")."""
  if kind == "classifier":
    return text_classifier_test.classifier(seed=seed)
  keras.utils.set_random_seed(seed)
  if kind == "backbone":
    return _model()
  return decoder_backbone.RealFormerDecoderBackbone(
      vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
      intermediate_dim=16, max_sequence_length=8)


def _outputs(model):
  """`model.predict` of fixed inputs as NumPy ({name: array})."""
  if isinstance(model, keras_hub.models.Task):
    return {"logits": keras.ops.convert_to_numpy(
        model.predict(["the quick fox"], verbose=0))}
  inputs = utils.backbone_inputs()
  inputs = {name: inputs[name] for name in model.input}
  outputs = model.predict(inputs, verbose=0)
  return {"output": outputs} if not isinstance(outputs, dict) else outputs


def _export(model, path):
  """`model.export(path)`: a task with its default signature; a backbone at
  8 tokens (Keras' default, any length, fails on JAX: jax2tf cannot compare
  it with the position table, as the tasks' `export` says)."""
  signature = None
  if not isinstance(model, keras_hub.models.Task):
    signature = [{
        name: keras.InputSpec(shape=(None, 8), dtype="int32", name=name)
        for name in model.input}]
  return model.export(path, verbose=False, input_signature=signature)


@pytest.mark.parametrize("kind", ["backbone", "decoder"])
def test_a_backbone_save_round_trips_through_the_same_writer(
    tmp_path, monkeypatch, kind):
  """Both backbones' `save` is `saving.WritesWhole.save`, the tasks' one:
  a `.keras` path is written beside and renamed in (nothing else left), and
  loads with the same config and outputs; other paths go to Keras."""
  model = _tiny(kind, seed=3)
  assert type(model).save is tasks.RealFormerTask.save is (
      saving.WritesWhole.save)
  assert type(model).export is saving.WritesWhole.export
  path = str(tmp_path / "b.keras")
  model.save(path)
  model.save(path)  # Over its own file.
  assert os.listdir(tmp_path) == ["b.keras"]
  loaded = saving.load_model(path)
  assert type(loaded) is type(model)
  assert loaded.get_config() == model.get_config()
  loaded_outputs, expected = _outputs(loaded), _outputs(model)
  for name, value in expected.items():
    np.testing.assert_allclose(loaded_outputs[name], value, rtol=1e-5,
                               atol=1e-6, err_msg=name)
  passed = []
  monkeypatch.setattr(keras.Model, "save",
                      lambda self, filepath, **kwargs: passed.append(
                          (filepath, kwargs)))
  model.save(str(tmp_path / "b.h5"))
  model.save(str(tmp_path / "dir.keras"), zipped=False)
  assert passed == [(str(tmp_path / "b.h5"),
                     dict(overwrite=True, zipped=None)),
                    (str(tmp_path / "dir.keras"),
                     dict(overwrite=True, zipped=False))]


def export_killed_before_its_graph(path, seed, kind):
  """`kill_writer`'s target (K=0: it kills itself): `model.export(path)` of
  a tiny `kind` SIGKILLed once the variables are written, as
  `saved_model.pb` is about to be (TensorFlow writes it with
  `file_io.atomic_write_string_to_file`, tensorflow/python/saved_model/
  save.py)."""
  from tensorflow.python.lib.io import file_io  # pylint: disable=g-import-not-at-top
  write = file_io.atomic_write_string_to_file

  def killing_write(filename, contents, overwrite=True):
    if os.path.basename(filename) == "saved_model.pb":
      os.kill(os.getpid(), signal.SIGKILL)
    write(filename, contents, overwrite)

  file_io.atomic_write_string_to_file = killing_write
  _export(_tiny(kind, seed), path)


@keras3_tasks.EXPORT_BACKENDS
@pytest.mark.parametrize("kind", ["classifier", "backbone"])
def test_an_export_killed_mid_write_leaves_the_previous_export(
    tmp_path, kind):
  """`model.export(X)` of a task and of a backbone over an earlier export,
  killed between its variables and saved_model.pb: X is the previous export
  byte for byte, and serves what the model gives. A folder that is not a
  SavedModel is refused."""
  model = _tiny(kind, seed=2)
  path = str(tmp_path / "export")
  assert _export(model, path) == path
  before = file_trees.files_under(path)
  kill_writer.run_killed(0, "tests.keras3.saving_test",
                         "export_killed_before_its_graph",
                         path=path, seed=5, kind=kind)
  assert file_trees.files_under(path) == before
  (temp,) = [name for name in os.listdir(tmp_path) if re.fullmatch(
      r"export\.tmp-\d+", name)]
  # Killed at Keras' own SavedModel, written inside ours (`export_checks`).
  killed = [os.path.relpath(os.path.join(root, name), tmp_path / temp)
            for root, names, _ in os.walk(tmp_path / temp) for name in names]
  assert "keras_export/variables" in killed and not any(
      name.endswith("saved_model.pb") for name in killed), killed
  if kind == "backbone":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    # Only TensorFlow reads a SavedModel (keras3_tasks.export_and_load).
    serve = tf.saved_model.load(path).signatures["serve"]
    inputs = utils.backbone_inputs()
    served = serve(**{name: tf.constant(value) for name, value in
                      inputs.items()})
    utils.assert_outputs_close(
        {name: value.numpy() for name, value in served.items()},
        _outputs(model))
  not_ours = tmp_path / "notes"
  not_ours.mkdir()
  (not_ours / "todo.txt").write_text("mine")
  with pytest.raises(FileExistsError, match=(
      r"notes is not a SavedModel: todo.txt is not part of a SavedModel")):
    _export(model, str(not_ours))
  assert os.listdir(not_ours) == ["todo.txt"]


@pytest.mark.parametrize("kind", ["classifier", "backbone"])
def test_a_saved_model_export_on_pytorch_is_refused_before_writing(
    tmp_path, monkeypatch, kind):
  """Keras' PyTorch exporter fails on named inputs with a bare
  AttributeError (keras/src/backend/torch/export.py:72): refused first,
  naming the backends that export, and nothing is written. Runs for real
  under KERAS_BACKEND=torch; elsewhere on a patched backend name."""
  model = _tiny(kind, seed=2)
  if keras.config.backend() != "torch":
    monkeypatch.setattr(saving.keras.config, "backend", lambda: "torch")
  with pytest.raises(ValueError, match=(
      r"KERAS_BACKEND='torch': export\(\) of .+ to a SavedModel needs the TensorFlow or JAX "
      r"backend: .+KERAS_BACKEND=tensorflow or jax")):
    _export(model, str(tmp_path / "export"))
  assert not os.listdir(tmp_path)
