"""The one writer layer of both faces: outputs and sets replaced whole.

A writer fills a claimed `<path>.tmp-PID` and renames it over `path`
(`staged`); a set goes in through a journal the next writer rolls forward
after a kill (`OutputSet.commit`); `sweep` removes only leftovers a `.owner`
file proves ours. `OS_OPS` here, `utils.GFILE_OPS` for gs://.
"""

import contextlib
import dataclasses
import json
import os
import shutil
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence, Set, Tuple)

from absl import logging

from realformer_tf.core import ownership

# `<path>.tmp-PID`: being written by process PID.
TMP_INFIX = ".tmp-"
# `<path>.old-PID`: the previous folder `path`, set aside by process PID.
BACKUP_INFIX = ".old-"
# `<manifest>.pending-PID`: the renames of a set's publish by process PID.
JOURNAL_INFIX = ".pending-"
_ACTIVE: Set[str] = set()  # The leftovers this process is writing now.


def _live(pid: int, _: str) -> bool:  # Whether a leftover's writer may run.
  return ownership.process_alive(pid)


@dataclasses.dataclass(frozen=True)
class FileOps:
  """How one face reads, writes, lists, renames and deletes (os or gfile)."""
  read: Callable[[str], Optional[str]]  # None when missing or unreadable.
  write: Callable[[str, str], None]
  exists: Callable[[str], bool]
  remove: Callable[[str], None]  # A file or a folder tree; nothing if gone.
  rename: Callable[[str, str], None]  # Replaces a file at the target.
  isdir: Callable[[str], bool]
  listdir: Callable[[str], List[str]]
  makedirs: Callable[[str], None]


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


# Local files through `os` (looked up at each call, so a test may patch it).
OS_OPS = FileOps(read=_read_text, write=_write_text,
                 exists=lambda path: os.path.lexists(path), remove=_remove,
                 rename=lambda source, target: os.replace(source, target),
                 isdir=lambda path: os.path.isdir(path),
                 listdir=lambda path: os.listdir(path),
                 makedirs=lambda path: os.makedirs(path, exist_ok=True))


def absolute(path: str) -> str:
  """A local path made absolute; a `scheme://` one (gs://, ram://) as is."""
  return path if "://" in path else os.path.abspath(path)


def target_of(name: str) -> str:
  """The output a leftover `<name><infix>PID[.owner]` is of (else `name`)."""
  for infix in (TMP_INFIX, BACKUP_INFIX, JOURNAL_INFIX):
    name = name.split(infix, 1)[0]
  return name


def is_writing(path: str) -> bool:
  """Whether this process is writing `path` now (a temp of `staged`)."""
  return path in _ACTIVE


@dataclasses.dataclass(frozen=True)
class Found:
  """A folder's leftovers of one infix: `stale` (leftover, pid) of dead
  writers, proven ours; `orphans`, our owner files of gone leftovers;
  `unclaimed`, look-alikes (kept)."""
  stale: List[Tuple[str, int]]
  orphans: List[str]
  unclaimed: List[str]


def scan(folder: str, infix: str, entries: Iterable[str],
         live: Callable[[int, str], bool],
         read: Callable[[str], Optional[str]],
         name: Optional[str] = None) -> Found:
  """The leftovers `<stem><infix>PID` among `entries` (of `<name>` only, if
  given); `live(pid, path)`: whether that writer may still be at work (its
  leftover is then in no list); `read` reads an owner file."""
  names = {entry.rstrip("/") for entry in entries}
  stale, orphans, unclaimed = [], [], []
  for entry in sorted(names):
    is_owner = entry.endswith(ownership.OWNER_SUFFIX)
    base = entry[:-len(ownership.OWNER_SUFFIX)] if is_owner else entry
    stem, sep, pid = base.rpartition(infix)
    if not (sep and stem and pid.isdigit()) or (
        name is not None and stem != name):
      continue
    leftover, pid = os.path.join(folder, base), int(pid)
    record = (leftover if infix == JOURNAL_INFIX else
              ownership.owner_path(leftover))
    if is_owner:
      if (base not in names and not live(pid, leftover) and
          ownership.is_owned(leftover, pid,
                             read(os.path.join(folder, entry)))):
        orphans.append(os.path.join(folder, entry))
    elif live(pid, leftover):
      continue
    elif ((infix == JOURNAL_INFIX or
           base + ownership.OWNER_SUFFIX in names) and
          ownership.is_owned(leftover, pid, read(record))):
      stale.append((leftover, pid))
    else:
      unclaimed.append(leftover)
  return Found(stale, orphans, unclaimed)


def interrupted_swap(path: str, ops: FileOps) -> Optional[str]:
  """Our `<path>.old-PID` backup of the folder `path` when a writer killed
  mid-swap left `path` missing; else None."""
  path = path.rstrip("/")
  parent = os.path.dirname(path) or "."
  if not path or ops.exists(path) or not ops.isdir(parent):
    return None
  backups = scan(parent, BACKUP_INFIX, ops.listdir(parent), _live,
                 ops.read, os.path.basename(path)).stale
  return backups[-1][0] if backups else None


def _roll_forward(journal: str, pid: int, ops: FileOps) -> List[str]:
  """Finishes the publish that `journal` (of dead process `pid`) names."""
  plan = json.loads(ops.read(journal))
  folder = os.path.dirname(journal)
  done = []
  for staged_name, final_name in plan["renames"]:
    staged_path = os.path.join(folder, staged_name)
    if ops.exists(staged_path):
      ops.rename(staged_path, os.path.join(folder, final_name))
      done.append(final_name)
    ownership.release(staged_path, ops)
  for name in plan["remove"]:
    ops.remove(os.path.join(folder, name))
  ops.remove(journal)
  return [f"Finished publishing {os.path.join(folder, plan['manifest'])}: "
          f"process {pid} was killed while renaming its set in; renamed "
          f"{', '.join(done) or 'nothing'} as {journal} lists."]


def sweep(folder: str, ops: FileOps, name: Optional[str] = None
          ) -> List[str]:
  """Undoes or finishes what killed writers of ours left in `folder` (of
  `name` only, if given), logging what it did; returns those leftovers.
  """
  folder = folder or "."
  if not ops.isdir(folder):
    return []
  said, done, orphans = [], [], []
  for infix in (JOURNAL_INFIX, BACKUP_INFIX, TMP_INFIX):
    found = scan(folder, infix, ops.listdir(folder), _live, ops.read, name)
    for leftover, pid in found.stale:
      done.append(leftover)
      if infix == JOURNAL_INFIX:
        said += _roll_forward(leftover, pid, ops)
        continue
      target = leftover[:leftover.rindex(infix)]
      if infix == BACKUP_INFIX and not ops.exists(target):
        ops.rename(leftover, target)
        said.append(f"Restored {target} from {leftover}: process {pid} was "
                    "killed while replacing it.")
      else:
        ops.remove(leftover)
        said.append(f"Removed {leftover}, left by process {pid}, a killed "
                    "writer.")
      ownership.release(leftover, ops)
    orphans += found.orphans
    for kept in found.unclaimed:
      logging.info("Kept %s: named like a leftover of ours but without our "
                   "%s record.", kept, ownership.OWNER_SUFFIX)
  for record in orphans:
    ops.remove(record)
  for line in said:
    logging.warning("%s", line)
  return done


def recover(path: str, ops: FileOps) -> List[str]:
  """`sweep` of `path`'s own leftovers (every writer runs it first)."""
  path = path.rstrip("/")
  return sweep(os.path.dirname(path), ops, os.path.basename(path))


def _install(tmp: str, path: str, ops: FileOps) -> None:
  """Renames `tmp` over `path`; a folder at `path` is set aside first."""
  if not (ops.isdir(tmp) and ops.exists(path)):
    ops.rename(tmp, path)
    return
  backup = f"{path}{BACKUP_INFIX}{os.getpid()}"
  ownership.claim(backup, ops)
  ops.rename(path, backup)
  try:
    ops.rename(tmp, path)
  except BaseException:
    ops.rename(backup, path)
    raise
  finally:
    if ops.exists(path):
      ops.remove(backup)
      ownership.release(backup, ops)


@contextlib.contextmanager
def staged(path: str, ops: FileOps, inner: bool = False,
           folder: bool = False) -> Iterator[str]:
  """Yields the claimed temp for `path` (an empty folder with `folder`): on
  success it replaces `path` whole, on an exception it is removed. `inner`:
  written as `path`'s name in a temp folder (a suffix Keras needs)."""
  path = path.rstrip("/")
  if os.path.dirname(path):
    ops.makedirs(os.path.dirname(path))
  recover(path, ops)
  tmp = f"{path}{TMP_INFIX}{os.getpid()}"
  ownership.claim(tmp, ops)
  _ACTIVE.add(tmp)
  try:
    if folder or inner:
      ops.makedirs(tmp)
    if inner:
      yield os.path.join(tmp, os.path.basename(path))
      ops.rename(os.path.join(tmp, os.path.basename(path)), path)
    else:
      yield tmp
      _install(tmp, path, ops)
  finally:
    _ACTIVE.discard(tmp)
    ops.remove(tmp)
    ownership.release(tmp, ops)


@contextlib.contextmanager
def scratch(path: str, ops: FileOps) -> Iterator[str]:
  """A claimed empty folder `<path>.tmp-PID` for the block, removed after."""
  tmp = f"{path.rstrip('/')}{TMP_INFIX}{os.getpid()}"
  ownership.claim(tmp, ops)
  try:
    ops.makedirs(tmp)
    yield tmp
  finally:
    ops.remove(tmp)
    ownership.release(tmp, ops)


def replace_file(path: str, text: str, ops: FileOps) -> None:
  """Writes `text` (UTF-8) to `path` whole."""
  with staged(path, ops) as tmp:
    ops.write(tmp, text)


def replace_lines(path: str, lines: Iterable[str], ops: FileOps) -> None:
  """Writes `lines` (one per line, UTF-8) to `path` whole."""
  replace_file(path, "".join(line + "\n" for line in lines), ops)


def replace_folder(path: str, write: Callable[[str], Any], ops: FileOps,
                   check: Optional[Callable[[str], None]] = None) -> str:
  """`write(temp)` fills a fresh folder swapped in for `path` whole; `check`
  (which raises to refuse `path`) runs first. Returns `path`."""
  path = path.rstrip("/")
  recover(path, ops)
  if check:
    check(path)
  with staged(path, ops, folder=True) as tmp:
    write(tmp)
  return path


class OutputSet:
  """The files of one conversion, staged beside their final paths and
  published whole; made by `output_set`."""

  def __init__(self, manifest_path: str, writer: str, ops: FileOps,
               fingerprint: Callable[[str], Dict[str, Any]],
               overwrite_flag: Optional[str] = None, overwrite: bool = False):
    self.manifest_path = manifest_path
    self.directory = os.path.dirname(manifest_path)
    self.writer, self.ops, self.fingerprint = writer, ops, fingerprint
    self.flag, self.overwrite = overwrite_flag, overwrite
    self.staged: Dict[str, str] = {}  # Final path -> temporary path.
    self.committed = False

  def check(self, paths: Iterable[str]) -> None:
    """Refuses target `paths` holding files no manifest of ours lists."""
    for path in paths:
      if os.path.dirname(path) != self.directory:
        raise ValueError(f"{path} is not in {self.directory}, the folder of "
                         f"the set's manifest {self.manifest_path}.")
    if not self.overwrite:
      ownership.check_ours(paths, self.manifest_path, self.ops, self.flag)

  def stage(self, path: str) -> str:
    """The claimed temporary name to write `path` (a file of the set) as."""
    self.check([path])
    tmp = f"{path}{TMP_INFIX}{os.getpid()}"
    ownership.claim(tmp, self.ops)
    self.staged[path] = tmp
    return tmp

  def commit(self, manifest: Dict[str, Any]) -> Dict[str, Any]:
    """Writes `manifest` (plus `files` and `writer`) and publishes the set
    through its journal; returns the manifest written."""
    files = {}
    for path, tmp in self.staged.items():
      if not self.ops.exists(tmp):
        raise RuntimeError(f"{path} was staged as {tmp} but not written.")
      files[os.path.basename(path)] = self.fingerprint(tmp)
    manifest = dict(manifest, **{ownership.FILES_KEY: files,
                                 ownership.WRITER_KEY: self.writer})
    old = ownership.listed_by_ours(ownership.read_json(self.manifest_path,
                                                       self.ops))
    self.ops.write(self.stage(self.manifest_path),
                   json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    pid = os.getpid()
    journal = f"{self.manifest_path}{JOURNAL_INFIX}{pid}"
    name = os.path.basename
    renames = [[name(tmp), name(path)] for path, tmp in self.staged.items()
               if path != self.manifest_path]
    renames.append([name(self.staged[self.manifest_path]),
                    name(self.manifest_path)])  # The manifest last.
    with staged(journal, self.ops) as tmp:
      self.ops.write(tmp, ownership.owner_record(
          journal, pid, manifest=name(self.manifest_path), renames=renames,
          remove=sorted(set(old) - set(files) - {name(self.manifest_path)})))
    # The journal owns the staged files now: the next writer rolls forward.
    self.staged.clear()
    _roll_forward(journal, pid, self.ops)
    self.committed = True
    return manifest

  def discard(self) -> None:
    for tmp in self.staged.values():
      self.ops.remove(tmp)
      ownership.release(tmp, self.ops)


def size_of(path: str) -> Dict[str, int]:  # The Keras 3 face's fingerprint.
  return {"size": os.path.getsize(path)}


@contextlib.contextmanager
def output_set(manifest_path: str, writer: str, ops: FileOps,
               fingerprint: Callable[[str], Dict[str, Any]],
               targets: Sequence[str] = (),
               overwrite_flag: Optional[str] = None,
               overwrite: bool = False) -> Iterator[OutputSet]:
  """Yields an `OutputSet` of `manifest_path` after sweeping its folder and
  refusing foreign files at `targets`; the block must `commit` (an exception
  removes the staged files)."""
  directory = os.path.dirname(manifest_path) or "."
  ops.makedirs(directory)
  sweep(directory, ops)
  outputs = OutputSet(manifest_path, writer, ops, fingerprint, overwrite_flag,
                      overwrite)
  outputs.check(targets)
  try:
    yield outputs
  except BaseException:
    outputs.discard()
    raise
  if not outputs.committed:
    outputs.discard()
    raise RuntimeError(f"The set of {manifest_path} was never committed.")


def publish_json(path: str, data: Dict[str, Any], writer: str,
                 ops: FileOps) -> Dict[str, Any]:
  """Writes `data` (and `writer`) to `path` whole, refusing a file there that
  is not ours; returns it."""
  with output_set(path, writer, ops, size_of) as outputs:
    return outputs.commit(data)
