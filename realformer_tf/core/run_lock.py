"""One writer per run directory or output folder: a lock file naming its holder.

Model Garden and Orbit take no lock on `model_dir`. `hold(folder)` links
the lock into place (`os.link` is atomic also over NFS, where `flock` may
be local to one client); a dead local run's lock is taken over.
"""

import contextlib
import datetime
import json
import os
import socket
import sys
import uuid
from typing import Iterator, Optional

from absl import logging
import psutil

from realformer_tf.core import ownership
from realformer_tf.core import writes

# A lock's process started within this of its recorded start (not a reused pid).
_START_TIME_SLACK_S = 1.0
LOCK_FILE = "train.lock"  # train.py's, in its --model_dir.


class ModelDirBusyError(RuntimeError):
  """Another live run holds the run directory or output folder."""


def _is_remote(path: str) -> bool:
  return "://" in path


def _process_start(pid: int) -> Optional[float]:
  try:
    return psutil.Process(pid).create_time()
  except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
    return None


def _describe(holder: dict) -> str:
  return (f"pid {holder.get('pid')} on host {holder.get('host')!r} since "
          f"{holder.get('since')} ({holder.get('command', '?')})")


def _not_a_lock(path: str, what: str) -> ModelDirBusyError:
  return ModelDirBusyError(
      f"{path} exists but names no run ({what}). If no run uses this "
      "directory, remove that file and start again.")


def _read(path: str) -> Optional[dict]:
  """The lock's content, or None; a lock we did not write is an error naming
  the file (taking it over could let two runs write one directory)."""
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except FileNotFoundError:
    return None
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise _not_a_lock(path, f"its bytes are not UTF-8 text ({e.reason} at "
                      f"byte {e.start}: {raw[:40]!r})") from None
  try:
    holder = json.loads(text)
    pid = holder["pid"]
    str(holder["host"]), str(holder["token"])
  except (ValueError, KeyError, TypeError):
    raise _not_a_lock(path, f"content {text[:200]!r}") from None
  if not isinstance(pid, int) or isinstance(pid, bool) or not (
      0 < pid <= ownership.PID_MAX_LIMIT):
    raise _not_a_lock(path, f"its pid {pid!r} is not a process id (1 to "
                      f"{ownership.PID_MAX_LIMIT})")
  return holder


def _is_gone(holder: dict) -> bool:
  """Whether the lock's process has certainly ended (this host only)."""
  if holder["host"] != socket.gethostname():
    return False
  start = _process_start(int(holder["pid"]))
  recorded = holder.get("process_start")
  if start is None:
    return not psutil.pid_exists(int(holder["pid"]))
  # The pid lives; it is another process if it started after the lock's.
  return isinstance(recorded, (int, float)) and (
      start > recorded + _START_TIME_SLACK_S)


def _take_over(path: str, stale: dict) -> None:
  """Removes the stale lock at `path`, unless another run took it over first."""
  aside = f"{path}.stale-{os.getpid()}"
  try:
    writes.OS_OPS.rename(path, aside)  # The layer's one rename.
  except FileNotFoundError:
    return  # Another run removed it first.
  try:
    with open(aside, encoding="utf-8") as f:
      moved = json.loads(f.read())
  except ValueError:
    moved = None
  if moved is not None and moved.get("token") != stale["token"]:
    # A live lock was taken aside: put it back (the next try reports it).
    try:
      os.link(aside, path)
    except FileExistsError:
      pass
  else:
    logging.warning(
        "Took over %s from %s: that process is gone (killed?).", path,
        _describe(stale))
  os.remove(aside)


def _try_create(path: str, holder: dict, flag: str) -> bool:
  """Creates the lock with `holder`'s content; False if one exists; a
  ValueError naming the directory if it cannot be written."""
  tmp = f"{path}.new-{os.getpid()}-{holder['token']}"
  created = False
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      created = True
      json.dump(holder, f, indent=2, sort_keys=True)
      f.write("\n")
      f.flush()
      os.fsync(f.fileno())
    # Atomic, also over NFS; a reader never sees a half-written lock.
    os.link(tmp, path)
    return True
  except FileExistsError:
    return False
  except OSError as e:
    raise ValueError(
        f"{flag}={os.path.dirname(path)}: cannot write its lock {path} "
        f"({e.strerror or e}; a read-only file system or a full disk?). "
        f"Nothing was written; free space or use a writable {flag}."
    ) from None
  finally:
    # Only what this call made: removing what open() could not create raises.
    if created:
      try:
        os.remove(tmp)
      except OSError as e:
        logging.warning("Could not remove the lock's temporary file %s "
                        "(%s).", tmp, e.strerror or e)


def acquire(model_dir: str, name: str = LOCK_FILE,
            flag: str = "--model_dir") -> Optional[dict]:
  """Takes the lock `model_dir/name` (else `ModelDirBusyError` naming the
  live run that holds it); returns what it wrote, or None for a remote
  directory (not locked). `flag` names the folder in messages."""
  if _is_remote(model_dir):
    logging.warning(
        "%s=%s is not on a local filesystem: it is not locked "
        "against a second writer writing to it at the same time.", flag,
        model_dir)
    return None
  try:
    os.makedirs(model_dir, exist_ok=True)
  except OSError as e:
    raise ValueError(f"{flag}={model_dir}: cannot create it "
                     f"({e.strerror}: {e.filename}).") from None
  path = os.path.join(model_dir, name)
  pid = os.getpid()
  holder = {
      "pid": pid, "host": socket.gethostname(),
      "since": datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      "process_start": _process_start(pid), "token": uuid.uuid4().hex,
      "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
                 if sys.argv and sys.argv[0] else "python"}
  for _ in range(10):  # Retries only after a stale lock was removed.
    if _try_create(path, holder, flag):
      return holder
    current = _read(path)
    if current is None:
      continue  # Released meanwhile.
    if not _is_gone(current):
      raise ModelDirBusyError(
          f"{flag}={model_dir} is in use by another run: "
          f"{_describe(current)}. Wait for it to end, or use another "
          f"{flag}. (If that run is gone, e.g. its machine died, "
          f"remove {path}.)")
    _take_over(path, current)
  raise ModelDirBusyError(f"Could not take {path}: other runs keep taking it.")


def release(model_dir: str, holder: Optional[dict],
            name: str = LOCK_FILE) -> None:
  """Removes the lock `acquire` returned, if it is still this one's."""
  if holder is None:
    return
  path = os.path.join(model_dir, name)
  try:
    current = _read(path)
  except ModelDirBusyError:
    current = None
  if current and current.get("token") == holder["token"]:
    os.remove(path)
  else:
    logging.warning("%s is no longer this run's lock; left as it is.", path)


@contextlib.contextmanager
def hold(model_dir: str, enabled: bool = True, name: str = LOCK_FILE,
         flag: str = "--model_dir") -> Iterator[Optional[dict]]:
  """Holds the lock `model_dir/name` for the block, unless not `enabled`; a
  `model_dir` it created and the block left empty is removed again."""
  if not enabled:
    yield None
    return
  existed = _is_remote(model_dir) or os.path.isdir(model_dir)
  holder = None
  try:
    holder = acquire(model_dir, name, flag)
    yield holder
  finally:
    release(model_dir, holder, name)
    if not existed:
      try:
        os.rmdir(model_dir)  # Only if empty.
      except OSError:
        pass
