"""Output sets: the files of one conversion change together.

`output_set` publishes a converter's files through `core.writes.OutputSet`,
its manifest (the meta data JSON) last; `check_set` refuses a set that does
not match its manifest (by each file's size, mtime and inode), naming the file
and the command to run again.
"""

import hashlib
import json
import os
from typing import Any, ContextManager, Dict, Optional, Sequence

from absl import logging
import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import writes

# Above every vocabulary and meta data file, below any real records.
ALWAYS_HASH_BYTES = 16 << 20

FILES_KEY = "files"
WRITER_KEY = "writer"


def file_sha256(path: str) -> str:
  """Hex SHA-256 of a file's bytes (read in 1 MB chunks)."""
  digest = hashlib.sha256()
  with tf.io.gfile.GFile(path, "rb") as f:
    while chunk := f.read(1 << 20):
      digest.update(chunk)
  return digest.hexdigest()


def file_identity(path: str) -> Dict[str, int]:
  """A file's size, mtime (ns) and inode (0 on object stores, whose
  `tf.io.gfile.stat` has whole-second mtimes and no inode)."""
  if "://" not in path:
    stat = os.stat(path)
    return dict(size=stat.st_size, mtime_ns=stat.st_mtime_ns,
                inode=stat.st_ino)
  stat = tf.io.gfile.stat(path)
  return dict(size=int(stat.length), mtime_ns=int(stat.mtime_nsec), inode=0)


# Bytes read at each end of a big file for its `sample_sha256`.
SAMPLE_BYTES = 1 << 20


def _sample_sha256(path: str, size: int) -> str:
  """Hex SHA-256 of a file's size and its first and last `SAMPLE_BYTES`."""
  digest = hashlib.sha256(str(size).encode())
  with tf.io.gfile.GFile(path, "rb") as f:
    digest.update(f.read(SAMPLE_BYTES))
    f.seek(max(0, size - SAMPLE_BYTES))
    digest.update(f.read(SAMPLE_BYTES))
  return digest.hexdigest()


def fingerprint(path: str) -> Dict[str, Any]:
  """A file's size, mtime (ns), inode and SHA-256 (a big file's:
  `sample_sha256`), as a manifest lists it."""
  stat = file_identity(path)
  if stat["size"] > ALWAYS_HASH_BYTES:
    return dict(stat, sample_sha256=_sample_sha256(path, stat["size"]))
  return dict(stat, sha256=file_sha256(path))


def output_set(manifest_path: str, writer: str, targets: Sequence[str] = (),
               overwrite_flag: Optional[str] = None, overwrite: bool = False
               ) -> ContextManager[writes.OutputSet]:
  """`core.writes.output_set` on `tf.io.gfile`, fingerprinted as `check_set`
  checks. Refuses a file at the manifest's folder first (naming it)."""
  directory = os.path.dirname(manifest_path)
  utils.check_directory_path(directory or ".", "--output_dir",
                             "pass the directory to write "
                             f"{os.path.basename(manifest_path)} and its "
                             "set's files in")
  return writes.output_set(manifest_path, writer, utils.GFILE_OPS,
                           fingerprint, targets, overwrite_flag, overwrite)


def read_manifest(path: str) -> Optional[Dict[str, Any]]:
  """The JSON object at `path`; None if it is missing or not one."""
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      manifest = json.load(f)
  except (ValueError, OSError, tf.errors.OpError):
    return None
  return manifest if isinstance(manifest, dict) else None


def file_mismatch(path: str, expected: Dict[str, Any],
                  verified: Optional[Dict[str, Any]] = None) -> Optional[str]:
  """What differs between the file `path` and its manifest entry `expected`
  (None: nothing). `verified`: {path: identity} of big files whose bytes
  were checked against `expected` since they changed identity (read, and
  updated)."""
  if not tf.io.gfile.exists(path):
    return f"{path} is missing"
  stat = file_identity(path)
  if stat["size"] != expected["size"]:
    return (f"{path} has {stat['size']} bytes, the manifest "
            f"{expected['size']}")
  big = stat["size"] > ALWAYS_HASH_BYTES
  same = all(stat[key] == expected.get(key) for key in ("mtime_ns", "inode"))
  seen = dict(stat, expected=expected)
  if big and (same or (verified or {}).get(path) == seen):
    return None
  if big and "sample_sha256" in expected:
    key, sha = "sample_sha256", _sample_sha256(path, stat["size"])
  else:
    key, sha = "sha256", file_sha256(path)
  if sha != expected[key]:
    return (f"{path} has SHA-256 {sha[:12]}..., the manifest "
            f"{expected[key][:12]}...")
  if big and verified is not None:
    verified[path] = seen
  return None


def find_mismatch(manifest_path: str, manifest: Dict[str, Any],
                  verified: Optional[Dict[str, Any]] = None
                 ) -> Optional[str]:
  """Why the files `manifest` lists are not those it was written with (the
  first such file and what differs), or None when they all match
  (`file_mismatch`)."""
  directory = os.path.dirname(manifest_path)
  return next(filter(None, (
      file_mismatch(os.path.join(directory, name), expected, verified)
      for name, expected in sorted((manifest.get(FILES_KEY) or {}).items()))),
              None)


def check_set(manifest_path: str, manifest: Dict[str, Any],
              verified: Optional[Dict[str, Any]] = None) -> None:
  """Raises ValueError when the files `manifest` (read from `manifest_path`)
  lists do not match it, naming the file, what differs and what to do
  (`file_mismatch`); one without `files` cannot be checked (a warning).
  """
  if FILES_KEY not in manifest:
    logging.warning(
        "%s lists no file fingerprints (written by an older version): the "
        "records next to it cannot be checked against it. Convert the data "
        "again to get the check.", manifest_path)
    return
  mismatch = find_mismatch(manifest_path, manifest, verified)
  if mismatch:
    raise ValueError(
        f"{mismatch}: it is not the file {manifest_path} was written with. "
        "A conversion was killed while replacing the set, or the file was "
        "changed since; the records and their meta data may not belong "
        f"together. Run `python -m {manifest.get(WRITER_KEY, '<converter>')}`"
        " again to write a whole set.")
