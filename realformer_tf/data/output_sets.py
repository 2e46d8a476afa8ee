"""Output sets: the files of one conversion change together, and a reader
tells a whole set from a mixed one.

A converter's outputs are read together (GLUE's records and
`<task>_meta_data.json`; SQuAD's record, meta data and schedule; pre-training
records and vocabulary). Replacing each file atomically is not enough: a kill
after the first rename leaves new records beside the old meta data.

Design. The paths stay those configs and the README name; a versioned
directory with one pointer would change them, or need symbolic links, which
object stores (gs://) lack. Instead the set's manifest is the converter's
meta data JSON, extended by `files` (name -> size, mtime and SHA-256) and
`writer` (the module to run again):

  1. every file of the set is written as `<name>.tmp-PID` beside its final
     path (a kill here leaves the previous set byte-identical; the next
     writer in that folder removes the temporaries, `utils.remove_stale_temps`);
  2. the staged files are fingerprinted into the manifest, staged too;
  3. the files are renamed into place, the manifest last, and files of the
     previous set that the new one lacks are deleted.

Only a kill during step 3 (a few renames) leaves a mixed set, and it does
not match its manifest: `check_set` refuses it, naming the file, what
differs and the command to run again. Training calls it before anything is
written (`training.plan_facts.Reader`, a run plan's manifest check).

Hashing: a check compares each file's size, mtime and inode with those
recorded (a rename keeps both; a file renamed in by a later writer is another
inode). A file of at most `ALWAYS_HASH_BYTES` is always hashed: an in-place
edit that keeps size and mtime (a vocabulary fixed by hand, then `touch -d` or
`os.utime`, or a copy with `cp -p` over it) changes what the records' ids
mean, and nothing downstream checks a vocabulary or schedule file. A bigger
file (TFRecords) is hashed only when its mtime or inode changed (copied;
renamed on an object store, which has no inodes): hashing gigabytes before
every run would cost minutes, and its records carry CRC32C checksums that the
reader checks. Either passes if its SHA-256 is still the recorded one.
"""

import contextlib
import hashlib
import json
import os
from typing import Any, Dict, Iterator, Optional

from absl import logging
import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import swap

# 16 MiB: above every vocabulary (BERT's is 0.2 MB, a 250k-piece
# SentencePiece model about 5 MB), meta data and schedule file; below the
# records of any real conversion. Hashing it takes ~30 ms.
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


def _stat(path: str) -> Dict[str, int]:
  """A file's size, mtime (ns) and inode (0 on object stores, whose
  `tf.io.gfile.stat` has whole-second mtimes and no inode)."""
  if "://" not in path:
    stat = os.stat(path)
    return dict(size=stat.st_size, mtime_ns=stat.st_mtime_ns,
                inode=stat.st_ino)
  stat = tf.io.gfile.stat(path)
  return dict(size=int(stat.length), mtime_ns=int(stat.mtime_nsec), inode=0)


def fingerprint(path: str) -> Dict[str, Any]:
  """A file's size, mtime (ns), inode and SHA-256, as a manifest lists it."""
  return dict(_stat(path), sha256=file_sha256(path))


class OutputSet:
  """The files of one conversion, staged beside their final paths.

  Made by `output_set`; `stage` each file, then `commit` the manifest.
  """

  def __init__(self, manifest_path: str, writer: str):
    self.manifest_path = manifest_path
    self.directory = os.path.dirname(manifest_path)
    self.writer = writer
    self.staged: Dict[str, str] = {}  # Final path -> temporary path.
    self.committed = False

  def stage(self, path: str) -> str:
    """The temporary name to write `path` (a file of the set) under."""
    if os.path.dirname(path) != self.directory:
      raise ValueError(f"{path} is not in {self.directory}, the folder of "
                       f"the set's manifest {self.manifest_path}.")
    tmp = f"{path}{utils.TMP_INFIX}{os.getpid()}"
    swap.claim(tmp, utils.GFILE_OPS)  # Proof for `remove_stale_temps`.
    self.staged[path] = tmp
    return tmp

  def commit(self, manifest: Dict[str, Any]) -> Dict[str, Any]:
    """Writes `manifest` (plus `files` and `writer`) and swaps the set in;
    returns the manifest written."""
    files = {}
    for path, tmp in self.staged.items():
      if not tf.io.gfile.exists(tmp):
        raise RuntimeError(f"{path} was staged as {tmp} but not written.")
      files[os.path.basename(path)] = fingerprint(tmp)
    manifest = dict(manifest, **{FILES_KEY: files, WRITER_KEY: self.writer})
    old_files = set((read_manifest(self.manifest_path) or {}).get(
        FILES_KEY) or ())
    utils.write_json_atomically(self.stage(self.manifest_path), manifest)
    for path, tmp in self.staged.items():  # The manifest last.
      tf.io.gfile.rename(tmp, path, overwrite=True)
      swap.release(tmp, utils.GFILE_OPS)
    self.committed = True
    for name in sorted(old_files - set(files)):
      stale = os.path.join(self.directory, name)
      if name != os.path.basename(self.manifest_path):
        utils.remove(stale)
        logging.info("Removed %s: not part of the new set %s.", stale,
                     self.manifest_path)
    return manifest

  def discard(self) -> None:
    for tmp in self.staged.values():
      utils.remove(tmp)
      swap.release(tmp, utils.GFILE_OPS)


@contextlib.contextmanager
def output_set(manifest_path: str, writer: str) -> Iterator[OutputSet]:
  """Yields an `OutputSet` whose manifest is `manifest_path`.

  Creates its folder (a file there is a ValueError naming it) and removes
  the temporaries killed writers of ours left there.
  On an exception the staged files are removed and the previous set is left
  as it was; the block must end with `commit`.
  """
  directory = os.path.dirname(manifest_path)
  utils.check_directory_path(directory or ".", "--output_dir",
                             "pass the directory to write "
                             f"{os.path.basename(manifest_path)} and its "
                             "set's files in")
  tf.io.gfile.makedirs(directory or ".")
  for path in utils.remove_stale_temps(directory or "."):
    logging.warning("Removed %s, left by a killed writer.", path)
  outputs = OutputSet(manifest_path, writer)
  try:
    yield outputs
  except BaseException:
    outputs.discard()
    raise
  if not outputs.committed:
    outputs.discard()
    raise RuntimeError(f"The set of {manifest_path} was never committed.")


def read_manifest(path: str) -> Optional[Dict[str, Any]]:
  """The JSON object at `path`; None if it is missing or not one."""
  try:
    with tf.io.gfile.GFile(path, "r") as f:
      manifest = json.load(f)
  except (ValueError, OSError, tf.errors.OpError):
    return None
  return manifest if isinstance(manifest, dict) else None


def find_mismatch(manifest_path: str, manifest: Dict[str, Any]
                 ) -> Optional[str]:
  """Why the files `manifest` lists are not those it was written with (the
  first such file and what differs), or None when they all match."""
  directory = os.path.dirname(manifest_path)
  for name, expected in sorted((manifest.get(FILES_KEY) or {}).items()):
    path = os.path.join(directory, name)
    if not tf.io.gfile.exists(path):
      return f"{path} is missing"
    stat = _stat(path)
    if stat["size"] != expected["size"]:
      return (f"{path} has {stat['size']} bytes, the manifest "
              f"{expected['size']}")
    if stat["size"] <= ALWAYS_HASH_BYTES or any(
        stat[key] != expected.get(key) for key in ("mtime_ns", "inode")):
      sha = file_sha256(path)
      if sha != expected["sha256"]:
        return (f"{path} has SHA-256 {sha[:12]}..., the manifest "
                f"{expected['sha256'][:12]}...")
  return None


def check_set(manifest_path: str, manifest: Dict[str, Any]) -> None:
  """Raises ValueError when the files `manifest` (read from `manifest_path`)
  lists do not match it, naming the file, what differs and what to do.

  A manifest without `files` (written before manifests were) is accepted with
  a warning: it cannot be checked.
  """
  if FILES_KEY not in manifest:
    logging.warning(
        "%s lists no file fingerprints (written by an older version): the "
        "records next to it cannot be checked against it. Convert the data "
        "again to get the check.", manifest_path)
    return
  mismatch = find_mismatch(manifest_path, manifest)
  if mismatch:
    raise ValueError(
        f"{mismatch}: it is not the file {manifest_path} was written with. "
        "A conversion was killed while replacing the set, or the file was "
        "changed since; the records and their meta data may not belong "
        f"together. Run `python -m {manifest.get(WRITER_KEY, '<converter>')}`"
        " again to write a whole set.")
