"""Sharded record sets: `<stem>-SSSSS-of-NNNNN<suffix>` names, and whole sets.

Model Garden's `input_reader.match_files` trains on whatever is there;
`check_whole` refuses a partial set first, naming the missing shards.
"""

import collections
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

_SHARD = re.compile(
    r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})(?P<suffix>.*)$")


def shard_path(stem: str, index: int, count: int, suffix: str = "") -> str:
  """`stem-SSSSS-of-NNNNN<suffix>` (0 <= index < count)."""
  if not 0 <= index < count:
    raise ValueError(f"Shard index {index} is not in [0, {count}).")
  return f"{stem}-{index:05d}-of-{count:05d}{suffix}"


def shard_paths(stem: str, count: int, suffix: str = "") -> List[str]:
  """The `count` shard paths of a set, in index order."""
  return [shard_path(stem, i, count, suffix) for i in range(count)]


def parse(path: str) -> Optional[Tuple[str, int, int, str]]:
  """(stem, index, count, suffix) of a shard path; None for other names."""
  directory, name = os.path.split(path)
  match = _SHARD.match(name)
  if not match:
    return None
  return (os.path.join(directory, match["stem"]), int(match["index"]),
          int(match["count"]), match["suffix"])


def pattern(stem: str, count: int, suffix: str = "") -> str:
  """The glob matching exactly the shards of a set: `stem-?????-of-NNNNN`."""
  return f"{stem}-?????-of-{count:05d}{suffix}"


def check_whole(files: Sequence[str], what: str = "input") -> None:
  """Raises ValueError when shard-named `files` (as a glob matched them) are
  not whole sets: a shard missing, or two shard counts for one stem. The
  message names `what` (e.g. a config key), the set and the missing shards.
  Files with other names are not checked."""
  sets: Dict[Tuple[str, str], Dict[int, set]] = collections.defaultdict(
      lambda: collections.defaultdict(set))
  for path in files:
    parsed = parse(path)
    if parsed:
      stem, index, count, suffix = parsed
      sets[(stem, suffix)][count].add(index)
  for (stem, suffix), counts in sorted(sets.items()):
    if len(counts) > 1:
      raise ValueError(
          f"{what}: shards of {len(counts)} different sets share the name "
          f"{stem}-*{suffix}: "
          + ", ".join(f"{len(counts[n])} of {n}" for n in sorted(counts)) +
          ". A set was rewritten with another shard count beside the old "
          "one; delete the old set, or name one with its pattern (e.g. "
          f"{pattern(stem, max(counts), suffix)}).")
    (count, present), = counts.items()
    missing = sorted(set(range(count)) - present)
    if missing:
      names = [os.path.basename(shard_path(stem, i, count, suffix))
               for i in missing]
      raise ValueError(
          f"{what}: the shard set {pattern(stem, count, suffix)} is "
          f"incomplete: {len(present)} of {count} shards, missing "
          f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}. A "
          "writer was killed before the set was whole, or the input path "
          "names only part of it; write the set again (or name all of it).")
