"""What proves a file ours, and what a writer may replace.

A name is no proof (a user's `vocab.txt` has one of our names): every writer
refuses the foreign files at its target paths before it writes, naming them
and the flag that allows replacing them. `ops` is a `writes.FileOps`.
"""

import json
import os
import secrets
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

# A manifest's keys: each file's fingerprint, and the module to run again.
FILES_KEY = "files"
WRITER_KEY = "writer"
PACKAGE = "realformer_tf"
# `<leftover>.owner`: the writer's record that `leftover` is its own.
OWNER_SUFFIX = ".owner"
# Linux's 64-bit PID_MAX_LIMIT, where pid_max cannot be read.
PID_MAX_LIMIT = 1 << 22
PID_MAX_FILE = "/proc/sys/kernel/pid_max"


def process_alive(pid: int) -> bool:
  """Whether process `pid` may still run on this host (True when it cannot be
  told, e.g. on Windows, where `os.kill(pid, 0)` would end it)."""
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


def owner_record(leftover: str, pid: int, **extra) -> str:
  """The owner file's text for `leftover`, written by process `pid`."""
  return json.dumps(dict(extra, writer=PACKAGE,
                         leftover=os.path.basename(leftover), pid=pid,
                         token=secrets.token_hex(8)))


def is_owned(leftover: str, pid: int, record: Optional[str]) -> bool:
  """Whether `record` (an owner file's text) proves `leftover` is ours."""
  try:
    data = json.loads(record or "")
  except ValueError:
    return False
  return (isinstance(data, dict) and data.get("writer") == PACKAGE
          and data.get("leftover") == os.path.basename(leftover)
          and data.get("pid") == pid and 0 < pid <= pid_max())


def claim(leftover: str, ops) -> None:
  """Records `leftover` (about to be created by this process) as ours; an
  earlier one of ours there is removed, anything else a FileExistsError."""
  pid = os.getpid()
  if ops.exists(leftover):
    if not is_owned(leftover, pid, ops.read(owner_path(leftover))):
      raise FileExistsError(
          f"{leftover} exists and was not written by realformer_tf (no "
          f"{OWNER_SUFFIX} record of ours beside it); it is not replaced: "
          "move it away and write again.")
    ops.remove(leftover)
  ops.write(owner_path(leftover), owner_record(leftover, pid))


def release(leftover: str, ops) -> None:
  """Deletes `leftover`'s owner file, once `leftover` is gone."""
  ops.remove(owner_path(leftover))


def read_json(path: str, ops) -> Optional[Dict[str, Any]]:
  """The JSON object at `path`; None if it is missing or not one."""
  try:
    data = json.loads(ops.read(path) or "")
  except ValueError:
    return None
  return data if isinstance(data, dict) else None


def is_ours(manifest: Optional[Dict[str, Any]],
            writer: Optional[str] = None) -> bool:
  """Whether a manifest was written by us (by `writer`, if given)."""
  who = (manifest or {}).get(WRITER_KEY)
  return isinstance(who, str) and (
      who == writer if writer else who.startswith(PACKAGE))


def listed_by_ours(manifest: Optional[Dict[str, Any]],
                   writer: Optional[str] = None) -> Dict[str, Any]:
  """The files a manifest written by us (by `writer`, if given) lists."""
  return (manifest.get(FILES_KEY) or {}) if is_ours(manifest, writer) else {}


def foreign(targets: Iterable[str], manifest_path: str, ops,
            writer: Optional[str] = None) -> List[str]:
  """The existing `targets` that our manifest at `manifest_path` (itself
  included, when ours) does not list: what a writer must not replace."""
  manifest = read_json(manifest_path, ops)
  own = {os.path.join(os.path.dirname(manifest_path), name)
         for name in listed_by_ours(manifest, writer)}
  if is_ours(manifest, writer):
    own.add(manifest_path)
  return [path for path in targets if path not in own and ops.exists(path)]


def check_ours(targets: Iterable[str], manifest_path: str, ops,
               flag: Optional[str] = None) -> None:
  """Refuses (`refuse_foreign`, naming `flag`) the `targets` and the manifest
  `manifest_path` unless the manifest is ours and lists them."""
  refuse_foreign(foreign(dict.fromkeys([*targets, manifest_path]),
                         manifest_path, ops), flag)


def refuse_foreign(paths: Sequence[str], flag: Optional[str] = None) -> None:
  """Raises FileExistsError naming `paths` (files we did not write at our
  target paths) and `flag`, the option that allows replacing them, if any."""
  if not paths:
    return
  one = len(paths) == 1
  raise FileExistsError(
      f"{', '.join(paths)} {'exists' if one else 'exist'} and no manifest of "
      f"realformer_tf lists {'it' if one else 'them'} (not written by us), so "
      "nothing was written: " + (
          f"pass {flag} to replace {'it' if one else 'them'}, or move "
          f"{'it' if one else 'them'} away." if flag else
          f"move {'it' if one else 'them'} away, or write elsewhere."))


# What train.py writes in its --model_dir besides checkpoints.
RUN_FILES = ("params.yaml", "train.lock")
# The entries of a SavedModel directory.
SAVED_MODEL_ENTRIES = frozenset((
    "saved_model.pb", "saved_model.pbtxt", "variables", "assets",
    "assets.extra", "fingerprint.pb", "keras_metadata.pb"))


def is_saved_model_entry(entry: str) -> bool:
  return entry in SAVED_MODEL_ENTRIES


def check_replaceable(path: str, entries: Optional[Iterable[str]],
                      is_own: Callable[[str], bool], kind: str,
                      instead: str = "write to a new or empty directory"
                      ) -> None:
  """Refuses to replace (or write into) the directory `path`, whose names
  are `entries` (None: a file), unless each is `kind`'s (`is_own`): a
  FileExistsError names what is not, and what to do (`instead`)."""
  if entries is None:
    raise FileExistsError(f"{path} is a file, not a {kind} directory; not "
                          f"replaced: {instead}.")
  entries = sorted(entry.rstrip("/") for entry in entries)
  found = [entry for entry in entries if not is_own(entry)]
  if not found:
    return
  run = [entry for entry in entries if entry in RUN_FILES]
  what = (f"a train.py run directory (it holds {', '.join(run)})" if run
          else f"not a {kind}")
  shown = ", ".join(found[:8]) + (", ..." if len(found) > 8 else "")
  raise FileExistsError(
      f"{path} is {what}: {shown} {'is' if len(found) == 1 else 'are'} not "
      f"part of a {kind}, so it is not replaced (--overwrite replaces only "
      f"a {kind} written before); {instead}.")
