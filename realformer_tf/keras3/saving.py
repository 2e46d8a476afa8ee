"""`.keras` files of our models: written whole or not at all, and a damaged
one named for what it is.

`keras.Model.save` writes its zip archive in place, so a save killed part
way leaves a half-written file, which `keras.saving.load_model` then reports
as "File not found" (it only asks `zipfile.is_zipfile`). `save_model`
writes beside the path and renames when complete; `load_model` says what a
missing, empty or half-written file is before Keras opens it.
"""

import os
import zipfile

import keras

KERAS_SUFFIX = ".keras"


def check_keras_file(path: str) -> None:
  """Raises unless `path` is a complete `.keras` zip archive.

  Raises:
    FileNotFoundError: If nothing is at `path`.
    ValueError: Naming `path`, its size and what it is instead (a
      directory, an empty or a half-written file).
  """
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


def save_model(model: keras.Model, path: str, **kwargs) -> str:
  """`model.save(path)`, written to `<stem>.tmp-PID.keras` and renamed over
  `path` once complete, so `path` is always the old file or the new one;
  returns `path`."""
  path = os.fspath(path)
  if not path.endswith(KERAS_SUFFIX):
    raise ValueError(f"{path!r} does not end in {KERAS_SUFFIX}.")
  tmp = f"{path[:-len(KERAS_SUFFIX)]}.tmp-{os.getpid()}{KERAS_SUFFIX}"
  try:
    model.save(tmp, **kwargs)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
  return path
