"""The names a whole-or-nothing writer gives its leftovers, on both faces.

A writer fills `<path>.tmp-PID` and renames it to `path`; a directory
already at `path` is first renamed to `<path>.old-PID` and removed once the
new one is in place. `utils.atomic_path` (the tf_keras face, any
`tf.io.gfile` file system) and `keras3.saving.save_preset` (presets) both
write so, and both find what a killed writer left with `leftovers`: one
naming rule, whatever lists the folder and tells a live writer.
"""

import os
from typing import Callable, Iterable, List, Tuple

# `<path>.tmp-PID`: being written by process PID.
TMP_INFIX = ".tmp-"
# `<path>.old-PID`: the previous `path`, set aside by process PID while it
# swaps a new directory in.
BACKUP_INFIX = ".old-"


def leftovers(path: str, infix: str, entries: Iterable[str],
              writing: Callable[[int, str], bool]) -> List[Tuple[str, int]]:
  """(`<path><infix>PID`, PID) for each such entry whose writer is gone.

  Args:
    path: What the writer writes.
    infix: `TMP_INFIX` or `BACKUP_INFIX`.
    entries: The names in `path`'s folder (a trailing "/" is ignored).
    writing: `writing(pid, leftover_path)`: whether that writer may still
      be at work (its leftover is then not listed).

  Returns:
    The leftovers of writers that are gone, sorted.
  """
  parent, name = os.path.split(path)
  found = []
  for entry in entries:
    entry = entry.rstrip("/")
    pid = entry[len(name) + len(infix):]
    if entry.startswith(name + infix) and pid.isdigit():
      leftover = os.path.join(parent, entry)
      if not writing(int(pid), leftover):
        found.append((leftover, int(pid)))
  return sorted(found)
