"""`.keras` files and keras-hub presets of our models: written whole or not
at all, and a damaged `.keras` file named for what it is.

`keras.Model.save` writes its zip archive in place, so a save killed part
way leaves a half-written file, which `keras.saving.load_model` then reports
as "File not found" (it only asks `zipfile.is_zipfile`). `save_model`
writes beside the path and renames when complete; `load_model` says what a
missing, empty or half-written file is before Keras opens it.
`save_preset` does the same for a preset directory (our backbones' and
tasks' `save_to_preset`).
"""

import os
import shutil
import threading
import zipfile

import keras

from realformer_tf.core import swap

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


# keras-hub's preset files (keras_hub/src/utils/preset_utils.py, CONFIG_FILE
# and METADATA_FILE; a private module, so named here): a directory holding
# either is a preset that `save_preset` may replace.
PRESET_FILES = ("config.json", "metadata.json")
_LOCK = threading.RLock()
_WRITING = set()  # The temp directories this process is writing.


def save_preset(preset_dir, write):
  """`write(directory)` into a fresh sibling of `preset_dir`, then swapped in.

  keras-hub's `save_to_preset` writes each file into `preset_dir` in place
  (keras_hub/src/utils/preset_utils.py, `KerasPresetSaver`), so a save that
  fails part way (an exception, a full disk, a kill) leaves a preset half
  new, half old. Here `write` fills `<preset_dir>.tmp-PID`; once it returns,
  the old `preset_dir` (if any) is renamed to `<preset_dir>.old-PID`, the
  temp renamed into place and the old one removed. On any failure the temp
  is removed and `preset_dir` is as it was. A kill between the two renames
  leaves only `<preset_dir>.old-PID`: the next save names it rather than
  deleting it. Saving over a preset replaces it whole (files only the old
  one had are gone).

  A `save_preset` called from inside `write` for the directory being
  written (keras-hub's task saver calls the backbone's `save_to_preset` on
  its own directory: `KerasPresetSaver.save_task`) writes there directly.

  Args:
    preset_dir: The preset directory; created with its parents if missing.
    write: `write(directory)` writes the whole preset into `directory`.

  Returns:
    `preset_dir`, once the new preset is in place.

  Raises:
    FileExistsError: Before anything is written, if `preset_dir` is a file,
      a non-empty directory without `config.json` or `metadata.json` (not a
      preset: never replaced), or is missing while a backup left by a killed
      save (the last complete preset) is beside it.
  """
  path = os.path.realpath(os.fspath(preset_dir))
  with _LOCK:
    if path in _WRITING:
      write(path)
      return preset_dir
    _check_preset_target(path)
    stale = _stale_siblings(path)
    for leftover in stale:
      shutil.rmtree(leftover, ignore_errors=True)
    temp = f"{path}{swap.TMP_INFIX}{os.getpid()}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkdir(temp)
    _WRITING.add(temp)
    try:
      write(temp)
      _swap_in(temp, path)
    finally:
      _WRITING.discard(temp)
      shutil.rmtree(temp, ignore_errors=True)  # Gone already if swapped in.
  return preset_dir


def _check_preset_target(path):
  """Raises `FileExistsError` if `path` is something a preset must not
  replace (see `save_preset`)."""
  if os.path.lexists(path) and not os.path.isdir(path):
    raise FileExistsError(
        f"{path} is a file, not a preset directory; not replaced. Move it "
        "or save the preset to another directory.")
  if not os.path.isdir(path):
    return
  entries = sorted(os.listdir(path))
  if entries and not any(os.path.isfile(os.path.join(path, name))
                         for name in PRESET_FILES):
    shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
    raise FileExistsError(
        f"{path} is a non-empty directory ({shown}) with no "
        f"{' or '.join(PRESET_FILES)}, so not a keras-hub preset; saving a "
        "preset replaces the whole directory, so it is not replaced. Save "
        "the preset to a new or empty directory.")


def _stale_siblings(path):
  """The temps and backups of `path` left by saves no longer running.

  Raises:
    FileExistsError: If `path` is missing and such a backup is beside it:
      that backup is the last complete preset (a save was killed between
      its two renames).
  """
  parent = os.path.dirname(path)
  entries = os.listdir(parent) if os.path.isdir(parent) else []

  def dead(infix):
    return [leftover for leftover, _ in
            swap.leftovers(path, infix, entries, _save_running)]

  stale, backups = dead(swap.TMP_INFIX), dead(swap.BACKUP_INFIX)
  if backups and not os.path.lexists(path):
    raise FileExistsError(
        f"{path} is missing and {', '.join(backups)} is beside it: a save "
        "was killed while swapping the new preset in, and that backup is "
        f"the last complete preset. Rename it back to {path} (or delete it) "
        "and save again.")
  return stale + backups


def _save_running(pid, leftover):
  """Whether the save that made `leftover` (process `pid`) may still run."""
  if pid == os.getpid():
    return leftover in _WRITING
  if os.name == "nt":  # os.kill(pid, 0) would end the process there.
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):
    return True  # Another user's process, or not a pid: leave it.
  return True


def _swap_in(temp, path):
  """Renames `temp` to `path`, the old `path` aside first and then removed."""
  if not os.path.lexists(path):
    os.rename(temp, path)
    return
  backup = f"{path}{swap.BACKUP_INFIX}{os.getpid()}"
  os.rename(path, backup)
  try:
    os.rename(temp, path)
  except BaseException:
    os.rename(backup, path)
    raise
  shutil.rmtree(backup, ignore_errors=True)
