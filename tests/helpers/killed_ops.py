"""A SIGKILL at every point of a writer, emulated in-process by recording
what it would leave: a SIGKILL at one of the writer layer's file operations
that change the file system (write, rename, remove, makedirs) leaves the
disk exactly as it is just before that call, since nothing of the process
runs after it (no `finally`, no cleanup). So the writer runs once, and the
output folder is copied before each such call; each copy is what a kill
there leaves.

Both faces' `FileOps` (`core.writes.OS_OPS`, `utils.GFILE_OPS`) are patched
field by field (so a reference kept anywhere sees it). The writer runs as
another process would: `os.getpid` is a pid that has ended (alive to the
layer while it runs, dead after), so the next writer treats its leftovers
as a killed writer's. `tests/core/writer_suite_test.py` checks against a
real SIGKILL that a copy holds what the kill leaves.
"""

import contextlib
import dataclasses
import os
import shutil
from typing import Callable, Iterator, List, Tuple

from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from tests.helpers import kill_writer

MUTATING = ("write", "rename", "remove", "makedirs")
INFIXES = (writes.TMP_INFIX, writes.BACKUP_INFIX, writes.JOURNAL_INFIX)
_DEAD_PID: List[int] = []


def dead_pid() -> int:
  """One pid of an ended process for the session's emulated writers."""
  if not _DEAD_PID:
    _DEAD_PID.append(kill_writer.dead_pid())
  return _DEAD_PID[0]


def _set(ops: writes.FileOps, name: str, fn: Callable) -> None:
  object.__setattr__(ops, name, fn)  # FileOps is frozen.


@contextlib.contextmanager
def patched(before_point: Callable[[str, tuple], None]) -> Iterator[None]:
  """Both faces' ops call `before_point(op name, args)` before each call
  that changes the file system; the block runs as the ended `dead_pid()`."""
  saved = []
  alive = [True]

  def wrap(name, fn):
    def call(*args):
      if name in MUTATING:
        before_point(name, args)
      return fn(*args)
    return call

  for ops in (writes.OS_OPS, utils.GFILE_OPS):
    for field in dataclasses.fields(ops):
      fn = getattr(ops, field.name)
      saved.append((ops, field.name, fn))
      if field.name in MUTATING:
        _set(ops, field.name, wrap(field.name, fn))
  pid, process_alive, getpid = dead_pid(), ownership.process_alive, os.getpid
  os.getpid = lambda: pid
  ownership.process_alive = lambda p: alive[0] if p == pid else (
      process_alive(p))
  try:
    yield
  finally:
    alive[0] = False
    os.getpid, ownership.process_alive = getpid, process_alive
    for ops, name, fn in saved:
      _set(ops, name, fn)


def _copy(source: str, target: str) -> None:
  if os.path.isdir(source) and not os.path.islink(source):
    shutil.copytree(source, target, symlinks=True)
  elif os.path.lexists(source):
    shutil.copy2(source, target, follow_symlinks=False)


def state_paths(folder: str) -> List[str]:
  """`folder` and the layer's leftovers beside it (a folder's temp and
  backup, their owner records): what a writer of `folder` changes."""
  parent, name = os.path.split(folder)
  return [folder] * os.path.lexists(folder) + [os.path.join(parent, entry)
                     for entry in sorted(os.listdir(parent))
                     if entry.startswith(name) and entry != name and any(
                         infix in entry for infix in INFIXES)]


def restore(state: str, folder: str) -> None:
  """Puts the copy `state` (of `record_points`) back at `folder`."""
  for path in state_paths(folder):
    writes.OS_OPS.remove(path)
  parent = os.path.dirname(folder)
  for entry in os.listdir(state):
    _copy(os.path.join(state, entry), os.path.join(parent, entry))


def record_points(write: Callable[[], object], folder: str, states: str
                  ) -> List[Tuple[str, tuple, str]]:
  """Runs `write()` whole (as another process), copying `folder` (and its
  leftovers beside it) into a new folder under `states` before each call
  that changes the file system; returns (op, args, copy) per call."""
  points = []

  def before_point(name, args):
    copy = os.path.join(states, str(len(points) + 1))
    os.makedirs(copy)
    for path in state_paths(folder):
      _copy(path, os.path.join(copy, os.path.basename(path)))
    points.append((name, args, copy))

  with patched(before_point):
    write()
  return points
