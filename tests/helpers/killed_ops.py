"""A SIGKILL emulated in-process for the writer kill suite: the K-th call of
the writer layer's file operations that changes the file system (write,
rename, remove, makedirs) raises `Killed`, and from then on every file
operation raises again, so no cleanup (`finally`, `except`) touches the
disk, as after a real SIGKILL.

Both faces' `FileOps` (`core.writes.OS_OPS`, `utils.GFILE_OPS`) are patched
field by field (so a reference kept anywhere sees it), and the direct
mutators a writer could call outside them (`os.remove`/`rename`/`replace`,
`shutil.rmtree`/`move`, `tf.io.gfile.remove`/`rmtree`/`rename`) are frozen
once dead. The killed writer runs as another process would: `os.getpid` is
a pid that has ended, alive to the layer until the kill, dead after it, so
the next writer treats its leftovers as a killed writer's.
`tests/core/writer_suite_test.py` checks against a real SIGKILL that this
leaves the same files.
"""

import contextlib
import dataclasses
import os
import shutil
from typing import Callable, Iterator, List, Optional, Tuple

import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from tests.helpers import kill_writer

MUTATING = ("write", "rename", "remove", "makedirs")
_DIRECT = ((os, ("remove", "unlink", "rename", "replace", "rmdir")),
           (shutil, ("rmtree", "move")),
           (tf.io.gfile, ("remove", "rmtree", "rename")))
_DEAD_PID: List[int] = []


class Killed(BaseException):
  """The emulated SIGKILL (a BaseException: no `except Exception` stops it)."""


def dead_pid() -> int:
  """One pid of an ended process for the session's killed writers."""
  if not _DEAD_PID:
    _DEAD_PID.append(kill_writer.dead_pid())
  return _DEAD_PID[0]


@dataclasses.dataclass
class Run:
  """One patched run: `points`, the mutating calls seen; `kill_at` (None:
  count only); `dead` once killed; `calls`, each mutating call's op name
  and first path, in order; `kinds`, the ops that are points."""
  kill_at: Optional[int] = None
  kinds: Tuple[str, ...] = MUTATING
  points: int = 0
  dead: bool = False
  calls: List = dataclasses.field(default_factory=list)


def _set(ops: writes.FileOps, name: str, fn: Callable) -> None:
  object.__setattr__(ops, name, fn)  # FileOps is frozen.


@contextlib.contextmanager
def patched(run: Run, as_other_process: bool = True) -> Iterator[Run]:
  """Patches both faces' ops (and the direct mutators) for `run`; the block
  ends with `Killed` swallowed if `run` was killed in it."""
  saved = []
  depth = [0]

  def wrap(name, fn):
    def call(*args):
      if run.dead:
        raise Killed(f"{name} after the kill")
      if name in run.kinds:
        run.points += 1
        run.calls.append((name, args[0] if args else None))
        if run.points == run.kill_at:
          run.dead = True
          raise Killed(f"killed at {name} {args}")
      depth[0] += 1
      try:
        return fn(*args)
      finally:
        depth[0] -= 1
    return call

  def freeze(fn):
    def call(*args, **kwargs):
      if run.dead:
        raise Killed("a direct change after the kill")
      return fn(*args, **kwargs)
    return call

  for ops in (writes.OS_OPS, utils.GFILE_OPS):
    for field in dataclasses.fields(ops):
      fn = getattr(ops, field.name)
      saved.append((ops, field.name, fn, True))
      _set(ops, field.name, wrap(field.name, fn))
  for module, names in _DIRECT:
    for name in names:
      fn = getattr(module, name)
      saved.append((module, name, fn, False))
      setattr(module, name, freeze(fn))
  if as_other_process:
    pid, alive, real_getpid = dead_pid(), ownership.process_alive, os.getpid
    saved += [(os, "getpid", real_getpid, False),
              (ownership, "process_alive", alive, False)]
    os.getpid = lambda: pid
    ownership.process_alive = lambda p: (not run.dead) if p == pid else (
        alive(p))
  try:
    yield run
  except BaseException:  # pylint: disable=broad-except
    if not run.dead:  # What a writer raises after the kill is not seen.
      raise
  finally:
    for owner, name, fn, is_ops in reversed(saved):
      if is_ops:
        _set(owner, name, fn)
      else:
        setattr(owner, name, fn)
  if run.kill_at is not None and not run.dead:
    raise AssertionError(f"Not killed: {run.points} points, kill_at "
                         f"{run.kill_at}.")


def count_points(write: Callable[[], object],
                 kinds: Tuple[str, ...] = MUTATING) -> Run:
  """`write()` run whole with its calls of `kinds` counted."""
  run = Run(kinds=kinds)
  with patched(run, as_other_process=False):
    write()
  return run


def run_killed(write: Callable[[], object], kill_at: int,
               kinds: Tuple[str, ...] = MUTATING) -> Run:
  """`write()` killed at its `kill_at`-th call of `kinds`, as another
  process."""
  run = Run(kill_at=kill_at, kinds=kinds)
  with patched(run):
    write()
  return run
