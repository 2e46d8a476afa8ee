"""`.keras` files and keras-hub presets of our models: written whole or not
at all (through `core.writes`), and a damaged `.keras` file named for what it
is (Keras calls a half-written one "File not found").
"""

import json
import os
import shutil
import threading
import zipfile

import keras

from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.keras3 import export_checks

KERAS_SUFFIX = ".keras"


def check_keras_file(path: str) -> None:
  """Raises unless `path` is a complete `.keras` zip archive: a
  FileNotFoundError, or a ValueError naming what it is instead."""
  path = os.fspath(path)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist.")
  if os.path.isdir(path):
    raise ValueError(f"{path} is a directory, not a {KERAS_SUFFIX} file "
                     "(a TF checkpoint directory is loaded with "
                     "realformer_tf.checkpoints.keras3_bridge.load_run).")
  size = os.path.getsize(path)
  if not zipfile.is_zipfile(path):
    raise ValueError(
        f"{path} ({size} bytes) is not a complete {KERAS_SUFFIX} file: a "
        f"{KERAS_SUFFIX} file is a zip archive and this one "
        f"{'is empty' if not size else 'has no zip directory at its end'}: "
        "a save killed part way (or a copy cut short) leaves this; save the "
        "model again.")
  try:
    with zipfile.ZipFile(path) as archive:
      damaged = archive.testzip()
  except (zipfile.BadZipFile, OSError, EOFError) as e:
    damaged = f"{type(e).__name__}: {e}"
  if damaged:
    raise ValueError(f"{path} ({size} bytes) is a damaged {KERAS_SUFFIX} "
                     f"archive (bad member: {damaged}); save the model again.")


def load_model(path: str, **kwargs) -> keras.Model:
  """`keras.saving.load_model` after `check_keras_file`; `kwargs` are its
  (`compile`, `safe_mode`, `custom_objects`)."""
  check_keras_file(path)
  return keras.saving.load_model(path, **kwargs)


def save_model(model: keras.Model, path: str, overwrite: bool = True,
               **kwargs) -> str:
  """`keras.Model.save(model, path)`, written beside `path` and renamed over
  it once complete; returns `path`. Refuses a folder or a file there that is
  not a model of ours (Keras would replace any file)."""
  path = os.fspath(path)
  if not path.endswith(KERAS_SUFFIX):
    raise ValueError(f"{path!r} does not end in {KERAS_SUFFIX}.")
  if not overwrite and os.path.lexists(path):
    raise FileExistsError(f"{path} exists; pass overwrite=True to replace "
                          "it.")
  if os.path.isdir(path):
    raise FileExistsError(f"{path} is a directory, not a {KERAS_SUFFIX} "
                          "file; not replaced. Move it or save elsewhere.")
  if os.path.lexists(path) and not _is_ours(path):
    raise FileExistsError(
        f"{path} exists and is not a model saved by realformer_tf (a "
        f"{KERAS_SUFFIX} archive of one of its classes), so it is not "
        "replaced: move it away or save elsewhere.")
  with writes.staged(path, writes.OS_OPS, inner=True) as tmp:
    # keras.Model's, not the model's own `save` (ours calls this function).
    keras.Model.save(model, tmp, **kwargs)
  return path


def _is_ours(path: str) -> bool:
  """Whether `path` is a `.keras` archive of a class of this package."""
  try:
    with zipfile.ZipFile(path) as archive:
      config = json.loads(archive.read("config.json"))
  except (OSError, KeyError, ValueError, zipfile.BadZipFile):
    return False
  return isinstance(config, dict) and str(
      config.get("registered_name") or "").startswith(ownership.PACKAGE + ">")


SAVED_MODEL_FORMAT = "tf_saved_model"


def check_saved_model_backend(model: keras.Model) -> None:
  """Raises ValueError on the PyTorch backend, whose Keras exporter takes no
  named inputs and needs `torch_xla`, naming the way out."""
  if keras.config.backend() == "torch":
    raise ValueError(
        "KERAS_BACKEND='torch': "
        f"export() of {model.name} to a SavedModel needs the TensorFlow or "
        "JAX backend: Keras' PyTorch exporter takes no named inputs "
        "(keras/src/backend/torch/export.py) and needs torch_xla. Save it "
        "(model.save('model.keras')), then load and export it under "
        "KERAS_BACKEND=tensorflow or jax.")


def export_model(model: keras.Model, path: str,
                 format: str = SAVED_MODEL_FORMAT,  # pylint: disable=redefined-builtin
                 **kwargs) -> str:
  """`keras.Model.export(model, path, format, **kwargs)`, a SavedModel
  written beside `path` and swapped in (replacing only a SavedModel or an
  empty directory) with its inputs' lengths checked; returns `path`. Other
  formats go to Keras unchanged.
  """
  if format != SAVED_MODEL_FORMAT:
    keras.Model.export(model, path, format=format, **kwargs)
    return path
  check_saved_model_backend(model)
  def write(directory):
    # Keras' SavedModel, then ours with its input lengths checked.
    unchecked = os.path.join(directory, "keras_export")
    keras.Model.export(model, unchecked, format=format, **kwargs)
    export_checks.add_length_checks(unchecked, directory)
    shutil.rmtree(unchecked)
  return _write_directory(path, write, _check_saved_model_target)


class WritesWhole:
  """`keras.Model`'s `save` and `export`, written whole or not at all.

  A base class of our backbones; our tasks copy it (`tasks.realformer_task`).
  Other paths and formats go to Keras unchanged.
  """

  def save(self, filepath, overwrite=True, zipped=None, **kwargs):
    """`keras.Model.save`; a zipped `.keras` path through `save_model`."""
    if str(filepath).endswith(KERAS_SUFFIX) and zipped is not False:
      return save_model(self, filepath, overwrite=overwrite, **kwargs)
    return keras.Model.save(self, filepath, overwrite=overwrite,
                            zipped=zipped, **kwargs)

  def export(self, filepath, format=SAVED_MODEL_FORMAT,  # pylint: disable=redefined-builtin
             verbose=None, input_signature=None, **kwargs):
    """`keras.Model.export` through `export_model`; returns `filepath`."""
    return export_model(self, filepath, format=format, verbose=verbose,
                        input_signature=input_signature, **kwargs)


# keras-hub's CONFIG_FILE and METADATA_FILE (private `preset_utils`): a
# directory holding either is a preset that `save_preset` may replace.
PRESET_FILES = ("config.json", "metadata.json")
_LOCK = threading.RLock()


def save_preset(preset_dir, write):
  """`write(directory)` (the whole preset) into a fresh sibling of
  `preset_dir`, then swapped in; returns `preset_dir`. A `save_preset`
  nested in `write` for the same directory writes there directly; a file or
  a non-empty non-preset directory is refused first."""
  return _write_directory(preset_dir, write, _check_preset_target)


def _write_directory(directory, write, check_target):
  """`core.writes.replace_folder` of the real path of `directory`, or a
  direct write when nested in a write of that folder."""
  path = os.path.realpath(os.fspath(directory))
  with _LOCK:
    if writes.is_writing(path):
      write(path)
    else:
      writes.replace_folder(path, write, writes.OS_OPS, check_target)
  return directory


def _check_preset_target(path):
  """Raises `FileExistsError` if a preset must not replace `path`."""
  if os.path.lexists(path) and not os.path.isdir(path):
    raise FileExistsError(
        f"{path} is a file, not a preset directory; not replaced. Move it "
        "or save the preset to another directory.")
  if not os.path.isdir(path):
    return
  entries = sorted(os.listdir(path))
  shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
  if entries and not any(os.path.isfile(os.path.join(path, name))
                         for name in PRESET_FILES):
    raise FileExistsError(
        f"{path} is a non-empty directory ({shown}) with "
        f"no {' or '.join(PRESET_FILES)}, so not a keras-hub preset; saving "
        "a preset replaces the whole directory, so it is not replaced. Save "
        "the preset to a new or empty directory.")


def _check_saved_model_target(path):
  """Raises `FileExistsError` unless `path` is missing, empty or a
  SavedModel."""
  if os.path.lexists(path):
    ownership.check_replaceable(
        path, os.listdir(path) if os.path.isdir(path) else None,
        ownership.is_saved_model_entry, "SavedModel",
        "export to a new or empty directory")


def check_not_set_aside(preset_dir):
  """Raises `FileNotFoundError` naming the backup when a save killed while
  swapping `preset_dir` left it missing."""
  backup = writes.interrupted_swap(
      os.path.realpath(os.fspath(preset_dir)), writes.OS_OPS) if isinstance(
          preset_dir, (str, os.PathLike)) else None
  if backup:
    raise FileNotFoundError(
        f"{os.fspath(preset_dir)} does not exist: a save was killed while "
        f"swapping a new preset in, and {backup} holds the last complete "
        f"preset. Rename it back to {os.fspath(preset_dir)} (or save the "
        "preset again, which restores it first).")
