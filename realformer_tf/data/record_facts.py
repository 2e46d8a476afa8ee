"""What a full read of a TFRecord file of `tf.train.Example`s proves, read once.

Per file: the record count, the first record's feature lengths and each int64
feature's min and max, from the converter's manifest (`listing`) or one read
kept in a cache file (`scan`).
"""

import contextlib
import dataclasses
import os
from typing import (Any, Callable, Dict, Iterator, Mapping, Optional, Sequence,
                    Tuple)

import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import output_sets

# The manifest key listing each record file's facts, by file name.
RECORDS_KEY = "records"
WRITER = "realformer_tf.data.record_facts"  # Of the cache file (`keep`).
# Records parsed at a time by `scan`.
BATCH = 4096

# The cache entries of the files this process read or looked up: without a
# cache file (the checks of a sweep's runs in one process) each is read once.
_READ: Dict[str, Dict[str, Any]] = {}
# {path: identity} of copied big files whose sampled bytes this process
# checked against their manifest (`output_sets.file_mismatch`).
_VERIFIED: Dict[str, Any] = {}
# {path: (identity, manifest entry)} of files this process matched to their
# manifest entry: a sweep's runs hash a small file once, not once a run.
_MATCHED: Dict[str, Any] = {}

ManifestOf = Callable[[str], Optional[Tuple[str, Dict[str, Any]]]]


@dataclasses.dataclass(frozen=True)
class RecordFacts:
  """See the module docstring; `source`: "manifest", "cache" or "scan"."""
  count: int
  lengths: Dict[str, int]
  min: Dict[str, int]
  max: Dict[str, int]
  source: str = "scan"

  def as_dict(self) -> Dict[str, Any]:
    return {key: getattr(self, key) for key in _KEYS}

  @classmethod
  def from_dict(cls, entry: Mapping[str, Any], source: str) -> "RecordFacts":
    return cls(**{key: entry[key] for key in _KEYS}, source=source)


_KEYS = ("count", "lengths", "min", "max")


class UnreadableRecords(ValueError):
  """A record file that cannot be read to its end as `tf.train.Example`s;
  `first`: the index of the first record of the batch that failed."""

  def __init__(self, path: str, first: int, error: Exception):
    message = getattr(error, "message", str(error)).splitlines()
    self.reason = f"{type(error).__name__}: {message[0] if message else ''}"
    super().__init__(f"{path}: {self.reason}")
    self.path, self.first, self.error = path, first, error


def first_example(path: str) -> tf.train.Example:
  """The first record of `path`; raises `UnreadableRecords` (its `error` an
  `OpError` for a file that is not TFRecords, or without records)."""
  try:
    record = tf.data.TFRecordDataset(path).take(1).get_single_element()
    return tf.train.Example.FromString(record.numpy())
  except Exception as e:  # pylint: disable=broad-except
    raise UnreadableRecords(path, 0, e) from None


def lengths_of(example: tf.train.Example) -> Dict[str, int]:
  """The number of values of each feature of `example`."""
  return {name: sum(len(value.value) for _, value in feature.ListFields())
          for name, feature in example.features.feature.items()}


def scan(path: str) -> RecordFacts:
  """Reads every record of `path`; raises `UnreadableRecords`."""
  example = first_example(path)
  features = example.features.feature
  spec = {name: tf.io.VarLenFeature(tf.int64)
          for name, feature in features.items()
          if feature.WhichOneof("kind") == "int64_list"}

  def reduce(records):
    parsed = tf.io.parse_example(records, spec)
    return tf.shape(records)[0], {
        name: (tf.size(ids.values), tf.reduce_min(ids.values),
               tf.reduce_max(ids.values)) for name, ids in parsed.items()}

  count, low, high = 0, {}, {}
  try:
    for n, found in tf.data.TFRecordDataset(path).batch(BATCH).map(
        reduce, num_parallel_calls=tf.data.AUTOTUNE):
      for name, (size, smallest, largest) in found.items():
        if size:
          low[name] = min(low.get(name, int(smallest)), int(smallest))
          high[name] = max(high.get(name, int(largest)), int(largest))
      count += int(n)
  except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
    raise UnreadableRecords(path, count, e) from None
  return RecordFacts(count, lengths_of(example), low, high)


def listing(staged: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
  """A manifest's `records` entry: the facts of each record file (named
  `*.tfrecord` or `*.tf_record`) of `staged` ({final path: the path
  written}), by final file name."""
  return {os.path.basename(final): scan(written).as_dict()
          for final, written in staged.items()
          if final.endswith((".tfrecord", ".tf_record"))}


def _read_cache(cache_path: Optional[str]) -> Dict[str, Dict[str, Any]]:
  """The cache at `cache_path` ({"scans": ..., "verified": ...}); empty when
  it is None, unreadable or not written by us."""
  read = output_sets.read_manifest(cache_path) if cache_path else None
  read = read if ownership.is_ours(read) else {}
  return {key: dict(read.get(key) or {}) for key in ("scans", "verified")}


@contextlib.contextmanager
def _cache(cache_path: Optional[str]) -> Iterator[Dict[str, Dict[str, Any]]]:
  """`_read_cache` over what this process learnt; read only: only `keep`
  writes it (checks run before a run holds its folder)."""
  cache = _read_cache(cache_path)
  cache["verified"].update(_VERIFIED)
  yield cache
  _VERIFIED.update(cache["verified"])


def keep(cache_path: str, files: Sequence[str]) -> None:
  """Writes what this process learnt of `files` (read or verified) into the
  cache at `cache_path`, for a restart; the caller holds its folder."""
  cache = _read_cache(cache_path)
  before = repr(cache)
  for path in files:
    if path in _READ:
      cache["scans"][path] = _READ[path]
    if path in _VERIFIED:
      cache["verified"][path] = _VERIFIED[path]
  if repr(cache) != before:
    writes.publish_json(cache_path, cache, WRITER, utils.GFILE_OPS)


def _listed(path: str, manifest_of: ManifestOf,
            verified: Dict[str, Any]) -> Optional[RecordFacts]:
  """`path`'s facts from its manifest, if it lists them and the file is
  still the one it lists."""
  meta_path, meta = manifest_of(path) or (None, {})
  name = os.path.basename(path)
  entry = (meta.get(RECORDS_KEY) or {}).get(name)
  expected = (meta.get(output_sets.FILES_KEY) or {}).get(name)
  if meta_path is None or not entry or not expected:
    return None
  seen = (repr(output_sets.file_identity(path)), repr(expected))
  if _MATCHED.get(path) != seen:  # Else matched in this process: not hashed.
    if output_sets.file_mismatch(path, expected, verified):
      return None  # The manifest check names it.
    _MATCHED[path] = seen
  return RecordFacts.from_dict(entry, "manifest")


def facts(files: Sequence[str], manifest_of: ManifestOf,
          cache_path: Optional[str] = None, read: bool = True
         ) -> Dict[str, RecordFacts]:
  """The facts of each of `files`: from its manifest (`manifest_of(path)`:
  (path, contents) of the manifest listing it, or None), else from the
  cache at `cache_path` (or of this process), else read (`scan`, kept in the
  cache) when `read`; a file left unread is left out. Raises
  `UnreadableRecords`."""
  found = {}
  with _cache(cache_path) as cache:
    for path in files:
      known = _listed(path, manifest_of, cache["verified"])
      identity = output_sets.file_identity(path)
      entry = next((e for e in (cache["scans"].get(path), _READ.get(path))
                    if e and e.get("identity") == identity), None)
      if known is None and entry:
        known = RecordFacts.from_dict(entry[RECORDS_KEY], "cache")
      if known is None and read:
        known = scan(path)
        entry = {"identity": identity, RECORDS_KEY: known.as_dict()}
      if entry:
        cache["scans"][path] = _READ[path] = entry
      if known is not None:
        found[path] = known
  return found


def check_set(manifest_path: str, manifest: Dict[str, Any],
              cache_path: Optional[str] = None) -> None:
  """`output_sets.check_set`, remembering in the cache which copied files
  were verified (a restart reads none of them again)."""
  with _cache(cache_path) as cache:
    output_sets.check_set(manifest_path, manifest, cache["verified"])
