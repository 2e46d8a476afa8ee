"""The names a whole-or-nothing writer gives its leftovers, on both faces,
and how a writer proves a leftover is its own.

A writer fills `<path>.tmp-PID` and renames it to `path`; a directory
already at `path` is first renamed to `<path>.old-PID` and removed once the
new one is in place. `utils.atomic_path` (the tf_keras face, any
`tf.io.gfile` file system) and `keras3.saving.save_preset` (presets) both
write so, and both find what a killed writer left with `leftovers`: one
naming rule, whatever lists the folder and tells a live writer.

A name is no proof: a user's `mymodel.old-20240101/` (a dated copy) fits
the pattern. Before it creates a temp or sets a directory aside, a writer
records it in an owner file beside it (`<leftover>.owner`: JSON naming the
leftover, the pid and a random token; `claim`), and deletes that file once
the leftover is gone (`release`). A leftover counts as ours only when its
owner file names it and its pid, and that pid is within the system's range
(`pid_max`); anything else is left alone, whatever its name.
"""

import dataclasses
import json
import os
import secrets
import shutil
from typing import Callable, Iterable, List, Optional, Tuple

# `<path>.tmp-PID`: being written by process PID.
TMP_INFIX = ".tmp-"
# `<path>.old-PID`: the previous `path`, set aside by process PID while it
# swaps a new directory in.
BACKUP_INFIX = ".old-"
# `<leftover>.owner`: the writer's record that `leftover` is its own.
OWNER_SUFFIX = ".owner"
# Linux's PID_MAX_LIMIT on 64-bit systems (include/linux/threads.h): the
# largest pid anywhere, where /proc/sys/kernel/pid_max cannot be read.
PID_MAX_LIMIT = 1 << 22
PID_MAX_FILE = "/proc/sys/kernel/pid_max"


@dataclasses.dataclass(frozen=True)
class FileOps:
  """How one face reads, writes and deletes small files (os or gfile)."""
  read: Callable[[str], Optional[str]]  # None when missing or unreadable.
  write: Callable[[str, str], None]
  exists: Callable[[str], bool]
  remove: Callable[[str], None]  # A file or a folder tree.


def _read_text(path: str) -> Optional[str]:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except (OSError, UnicodeDecodeError):
    return None


def _write_text(path: str, text: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def _remove(path: str) -> None:
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path, ignore_errors=True)
  elif os.path.lexists(path):
    os.remove(path)


# Local files through `os` (the Keras 3 face and its reproduction, which
# must run without TensorFlow; the tf_keras face uses `tf.io.gfile`).
OS_OPS = FileOps(read=_read_text, write=_write_text, exists=os.path.lexists,
                 remove=_remove)


def process_alive(pid: int) -> bool:
  """Whether process `pid` may still run on this host (True when it cannot
  be told: another user's process, not a pid, or Windows, where
  `os.kill(pid, 0)` would end it)."""
  if os.name == "nt":
    return True
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError):
    return True
  return True


def pid_max() -> int:
  """The largest pid this system gives (`/proc/sys/kernel/pid_max`)."""
  try:
    with open(PID_MAX_FILE, encoding="ascii") as f:
      return int(f.read())
  except (OSError, ValueError):
    return PID_MAX_LIMIT


def owner_path(leftover: str) -> str:
  return leftover + OWNER_SUFFIX


def owner_record(leftover: str, pid: int) -> str:
  """The owner file's text for `leftover`, written by process `pid`."""
  return json.dumps(dict(writer="realformer_tf",
                         leftover=os.path.basename(leftover), pid=pid,
                         token=secrets.token_hex(8)))


def is_owned(leftover: str, pid: int, record: Optional[str]) -> bool:
  """Whether `record` (an owner file's text) proves `leftover` is ours."""
  try:
    data = json.loads(record or "")
  except ValueError:
    return False
  return (isinstance(data, dict) and data.get("writer") == "realformer_tf"
          and data.get("leftover") == os.path.basename(leftover)
          and data.get("pid") == pid and 0 < pid <= pid_max())


def claim(leftover: str, ops: FileOps) -> None:
  """Records `leftover` (about to be created by this process) as ours.

  Raises:
    FileExistsError: If something we cannot prove ours is at `leftover`
      (removed instead when it is ours: this pid's earlier, dead writer).
  """
  pid = os.getpid()
  if ops.exists(leftover):
    if not is_owned(leftover, pid, ops.read(owner_path(leftover))):
      raise FileExistsError(
          f"{leftover} exists and was not written by realformer_tf (no "
          f"{OWNER_SUFFIX} record of ours beside it); it is not replaced: "
          "move it away and write again.")
    ops.remove(leftover)
  ops.write(owner_path(leftover), owner_record(leftover, pid))


def release(leftover: str, ops: FileOps) -> None:
  """Deletes `leftover`'s owner file, once `leftover` is gone."""
  ops.remove(owner_path(leftover))


@dataclasses.dataclass(frozen=True)
class Found:
  """A folder's leftovers of one infix: `stale` (leftover, pid) of dead
  writers, proven ours; `orphans`, owner files of ours whose leftover is
  gone (a kill after the rename); `unclaimed`, entries that only look like
  leftovers (kept)."""
  stale: List[Tuple[str, int]]
  orphans: List[str]
  unclaimed: List[str]


def scan(folder: str, infix: str, entries: Iterable[str],
         writing: Callable[[int, str], bool],
         read: Callable[[str], Optional[str]],
         name: Optional[str] = None) -> Found:
  """The leftovers `<stem><infix>PID` among `entries` (the names in
  `folder`; a trailing "/" is ignored), of `<name><infix>PID` only if
  `name` is given. `writing(pid, leftover_path)`: whether that writer may
  still be at work (its leftover is then in none of the lists); `read`
  reads an owner file."""
  names = {entry.rstrip("/") for entry in entries}
  stale, orphans, unclaimed = [], [], []
  for entry in sorted(names):
    is_owner = entry.endswith(OWNER_SUFFIX)
    base = entry[:-len(OWNER_SUFFIX)] if is_owner else entry
    stem, sep, pid = base.rpartition(infix)
    if not (sep and stem and pid.isdigit()) or (
        name is not None and stem != name):
      continue
    leftover, pid = os.path.join(folder, base), int(pid)
    if is_owner:
      if (base not in names and not writing(pid, leftover) and
          is_owned(leftover, pid, read(os.path.join(folder, entry)))):
        orphans.append(os.path.join(folder, entry))
    elif writing(pid, leftover):
      continue
    elif (base + OWNER_SUFFIX in names and
          is_owned(leftover, pid, read(owner_path(leftover)))):
      stale.append((leftover, pid))
    else:
      unclaimed.append(leftover)
  return Found(stale, orphans, unclaimed)


def leftovers(path: str, infix: str, entries: Iterable[str],
              writing: Callable[[int, str], bool],
              read: Callable[[str], Optional[str]]) -> List[Tuple[str, int]]:
  """(`<path><infix>PID`, PID) for each such entry whose writer is gone and
  that its owner file proves ours (see `scan`), sorted."""
  parent, name = os.path.split(path)
  return scan(parent, infix, entries, writing, read, name).stale


# What train.py writes in its --model_dir besides checkpoints
# (checkpoints/run_directory.py PARAMS_YAML, training/run_lock.py's lock).
RUN_FILES = ("params.yaml", "train.lock")
# A SavedModel directory (tf.saved_model.save, Model Garden's export, Keras'
# `export`): nothing else is written there.
SAVED_MODEL_ENTRIES = frozenset((
    "saved_model.pb", "saved_model.pbtxt", "variables", "assets",
    "assets.extra", "fingerprint.pb", "keras_metadata.pb"))


def is_saved_model_entry(entry: str) -> bool:
  return entry in SAVED_MODEL_ENTRIES


def check_replaceable(path: str, entries: Iterable[str],
                      is_own: Callable[[str], bool], kind: str,
                      instead: str = "write to a new or empty directory"
                      ) -> None:
  """Refuses to replace (or write into) the directory `path`, whose names
  are `entries`, unless each is one a writer of `kind` writes (`is_own`).

  Raises:
    FileExistsError: Naming `path`, what it holds that is not `kind`'s (a
      train.py run directory by its `params.yaml` / `train.lock`), and what
      to do (`instead`).
  """
  entries = sorted(entry.rstrip("/") for entry in entries)
  foreign = [entry for entry in entries if not is_own(entry)]
  if not foreign:
    return
  run = [entry for entry in entries if entry in RUN_FILES]
  what = (f"a train.py run directory (it holds {', '.join(run)})" if run
          else f"not a {kind}")
  shown = ", ".join(foreign[:8]) + (", ..." if len(foreign) > 8 else "")
  raise FileExistsError(
      f"{path} is {what}: {shown} {'is' if len(foreign) == 1 else 'are'} not "
      f"part of a {kind}, so it is not replaced (--overwrite replaces only "
      f"a {kind} written before); {instead}.")
