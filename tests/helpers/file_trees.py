"""What is under a directory, to assert that a refused or failed write left
it as it was."""

import os


def files_under(directory):
  """{path relative to `directory`: (bytes, mtime_ns)} of every file under
  `directory` (a rewrite with the same bytes still changes the mtime)."""
  found = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, directory)] = (f.read(),
                                                  os.stat(path).st_mtime_ns)
  return found
