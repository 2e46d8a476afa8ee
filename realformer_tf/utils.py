"""The package's one helper per job: atomic writes, checkpoint restoring,
dummy inputs, the width/heads check and reproducible gzip bytes.

Every writer of ours goes through `atomic_path`, so a killed run leaves at most
a `*.tmp-PID` leftover (removed once its process is gone by
`remove_stale_temps` or `recover_interrupted_swap`, which remove only what
an owner file proves ours: `core.swap`) and never a half-written output; a
directory is swapped in (old one renamed aside, new one renamed in,
old one deleted), and a kill between the two renames is undone by the next
writer of that path (`recover_interrupted_swap`). Sets of files that must
change together use `data.output_sets`. What a run directory holds (its
config, latest readable checkpoint, lock) is `checkpoints.run_directory`'s.
"""

import contextlib
import inspect
import json
import os
import struct
import zlib
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from absl import app
from absl import flags
from absl import logging
import psutil
import tensorflow as tf

from realformer_tf.core import deprecation
from realformer_tf.core import swap

TMP_INFIX = swap.TMP_INFIX  # `<path>.tmp-PID`: being written by PID.
BACKUP_INFIX = swap.BACKUP_INFIX  # `<path>.old-PID`: set aside by PID.


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
  """Yields a temporary name for `path` (file or dir); renames it on success.

  On an exception the temporary is removed and `path` is left untouched. A
  directory cannot be renamed over an existing one: the old one is renamed
  to `<path>.old-PID` first and deleted once the new one is in place, so
  `path` is whole (old or new) at every moment but between two renames; a
  kill there is undone by `recover_interrupted_swap`, which the directory
  writers (serving export, checkpoint convert) call before their checks.

  >>> with atomic_path("/tmp/realformer_doc.txt") as tmp:
  ...   with tf.io.gfile.GFile(tmp, "w") as f:
  ...     _ = f.write("x")
  """
  path = path.rstrip("/")
  parent = os.path.dirname(path)
  if parent:
    tf.io.gfile.makedirs(parent)
  tmp = f"{path}{TMP_INFIX}{os.getpid()}"
  swap.claim(tmp, GFILE_OPS)
  try:
    yield tmp
  except BaseException:
    remove(tmp)
    swap.release(tmp, GFILE_OPS)
    raise
  if tf.io.gfile.isdir(tmp) and tf.io.gfile.exists(path):
    backup = f"{path}{BACKUP_INFIX}{os.getpid()}"
    swap.claim(backup, GFILE_OPS)
    tf.io.gfile.rename(path, backup)
    tf.io.gfile.rename(tmp, path)
    remove(backup)
    swap.release(backup, GFILE_OPS)
  else:
    tf.io.gfile.rename(tmp, path, overwrite=True)
  swap.release(tmp, GFILE_OPS)


def _read_text(path: str):
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      return f.read()
  except (tf.errors.OpError, UnicodeDecodeError):
    return None


def _write_text(path: str, text: str) -> None:
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(text)


def _live(pid: int, _) -> bool:
  return psutil.pid_exists(pid)


def _scan(folder: str, infix: str, name=None) -> swap.Found:
  folder = folder or "."
  if not tf.io.gfile.isdir(folder):
    return swap.Found([], [], [])
  return swap.scan(folder, infix, tf.io.gfile.listdir(folder), _live,
                   _read_text, name)


def swap_leftovers(path: str, infix: str) -> List[Tuple[str, int]]:
  """(`<path><infix>PID`, PID) for each such entry whose process is gone
  and that its owner file proves ours (`core.swap`; `infix`: `TMP_INFIX` or
  `BACKUP_INFIX`), sorted."""
  return _scan(os.path.dirname(path), infix, os.path.basename(path)).stale


def _log_unclaimed(found: swap.Found) -> None:
  for entry in found.unclaimed:
    logging.info("Kept %s: named like a leftover of ours but without our "
                 "%s record (not written by realformer_tf).", entry,
                 swap.OWNER_SUFFIX)


def remove_stale_temps(folder: str) -> List[str]:
  """Removes the `*.tmp-PID` files and folders in `folder` that a killed
  writer of ours left (its owner file proves it, `core.swap`; PID gone);
  returns their paths. Those of live processes (another writer at work) and
  look-alikes we did not write (a user's `data.tmp-20240102`) are kept."""
  found = _scan(folder, TMP_INFIX)
  removed = []
  for tmp, _ in found.stale:
    remove(tmp)
    swap.release(tmp, GFILE_OPS)
    removed.append(tmp)
  for record in found.orphans:
    remove(record)
  _log_unclaimed(found)
  return sorted(removed)


def recover_interrupted_swap(path: str) -> None:
  """Undoes what a killed `atomic_path(path)` left, logging each step.

  A `<path>.old-PID` of a dead process that its owner file proves ours is
  the previous `path`: restored when `path` is missing (the kill fell
  between the two renames), else deleted (the swap had finished). Our
  `<path>.tmp-PID` of dead processes are deleted. Look-alikes without our
  owner file (a user's `path.old-20240101`) are kept.
  """
  parent, name = os.path.dirname(path), os.path.basename(path)
  backups = _scan(parent, BACKUP_INFIX, name)
  for backup, pid in backups.stale:
    if tf.io.gfile.exists(path):
      remove(backup)
      logging.warning("Removed %s, the previous %s set aside by process %d, "
                      "which was killed after replacing it.", backup, path,
                      pid)
    else:
      tf.io.gfile.rename(backup, path)
      logging.warning("Restored %s from %s: process %d was killed while "
                      "replacing it.", path, backup, pid)
    swap.release(backup, GFILE_OPS)
  temps = _scan(parent, TMP_INFIX, name)
  for tmp, pid in temps.stale:
    remove(tmp)
    swap.release(tmp, GFILE_OPS)
    logging.warning("Removed %s, left unfinished by killed process %d.", tmp,
                    pid)
  for record in backups.orphans + temps.orphans:
    remove(record)
  _log_unclaimed(backups)
  _log_unclaimed(temps)


def remove(path: str) -> None:
  """Deletes a file or a folder tree; nothing if `path` does not exist."""
  if tf.io.gfile.isdir(path):
    tf.io.gfile.rmtree(path)
  elif tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)


GFILE_OPS = swap.FileOps(read=_read_text, write=_write_text,
                         exists=tf.io.gfile.exists, remove=remove)


def link_or_copy(source: str, target: str) -> None:
  """Makes `target` a hard link to the file `source`, or a copy where links
  are not possible (another file system, an object store); a folder is
  recreated with its contents linked or copied the same way."""
  if tf.io.gfile.isdir(source):
    tf.io.gfile.makedirs(target)
    for entry in tf.io.gfile.listdir(source):
      entry = entry.rstrip("/")
      link_or_copy(os.path.join(source, entry), os.path.join(target, entry))
    return
  try:
    os.link(source, target)
  except OSError:
    tf.io.gfile.copy(source, target, overwrite=True)


def existing_ancestor(path: str) -> Optional[str]:
  """`path` if it exists, else its nearest ancestor that does ("." for a
  relative path none of whose folders exists); None on an object store
  (gs://) where none of it exists yet."""
  path = path.rstrip("/") or "/"
  while not tf.io.gfile.exists(path):
    parent = os.path.dirname(path)
    if not parent:
      return "."
    if parent == path or parent.endswith(":/"):
      return None
    path = parent
  return path


def check_directory_path(path: str, what: str, instead: str) -> None:
  """Raises a ValueError naming `what` (e.g. "--model_dir") when `path`
  cannot be made a directory: it is a file, or under one. TensorFlow's
  `makedirs` would raise a bare FailedPreconditionError at the first write.
  `instead`: what to pass, the end of the message."""
  path = path.rstrip("/") or "/"
  found = existing_ancestor(path)
  if found is None or tf.io.gfile.isdir(found):
    return
  where = ("is a file" if found == path else
           f"is under {found!r}, which is a file")
  raise ValueError(f"{what}={path!r} {where}, not a directory: {instead}.")


def write_text_atomically(path: str, text: str) -> None:
  with atomic_path(path) as tmp, tf.io.gfile.GFile(tmp, "w") as f:
    f.write(text)


def write_lines_atomically(path: str, lines: Iterable[str]) -> None:
  """Writes `lines` (one per line, UTF-8) to `path`."""
  write_text_atomically(path, "".join(line + "\n" for line in lines))


def write_json_atomically(path: str, data: Any) -> None:
  write_text_atomically(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


# The gzip header of our files (RFC 1952, 2.3): magic, deflate, no flags,
# mtime 0, XFL 2 (best compression), OS 3 (Unix). `gzip.compress(mtime=0)`
# wrote these through zlib on CPython 3.11 and 3.12, but 3.13 writes its own
# header with OS 255 (Lib/gzip.py, `_create_simple_gzip_header`), so the
# header is written here: the same bytes give the same file on every
# Python (the quickstart's shipped corpus relies on it).
_GZIP_HEADER = bytes([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3])


def gzip_bytes(data: bytes) -> bytes:
  """`data` gzipped at level 9 with `_GZIP_HEADER`: a raw deflate stream
  between that header and the CRC-32 and length trailer."""
  deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
  body = deflate.compress(data) + deflate.flush()
  return (_GZIP_HEADER + body +
          struct.pack("<LL", zlib.crc32(data), len(data) & 0xffffffff))


def dummy_inputs(masked_positions: int = 0) -> Dict[str, tf.Tensor]:
  """A one-example BERT input batch (ids 1) that creates a model's variables."""
  ids = tf.ones([1, 2], tf.int32)
  inputs = dict(input_word_ids=ids, input_mask=ids,
                input_type_ids=tf.zeros_like(ids))
  if masked_positions:
    inputs["masked_lm_positions"] = tf.zeros([1, masked_positions], tf.int32)
  return inputs


def check_heads_divide(width: int, num_heads: int, what: str) -> None:
  """Raises ValueError when `num_heads` does not divide the hidden `width`;
  `what` names the values in the error, e.g. "encoder.hidden_size"."""
  if num_heads < 1 or width % num_heads:
    raise ValueError(f"{what}: width {width} is not divisible by "
                     f"num_attention_heads={num_heads}.")


def flags_main(fn: Callable[..., Any],
               to_json: Callable[[Any], Any] = lambda result: result):
  """An absl `main` for our CLIs: `fn(**flags)`, its result printed as JSON.

  Each parameter of `fn` takes the value of the flag of the same name.
  """
  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    result = fn(**{name: flags.FLAGS[name].value
                   for name in inspect.signature(fn).parameters})
    print(json.dumps(to_json(result), indent=2))
  return main


# Moved names -> their new module; each warns once used (removed in 0.2).
_MOVED = {"resolve_checkpoint": "realformer_tf.checkpoints.run_directory"}


__getattr__ = deprecation.moved_names(__name__, _MOVED)
