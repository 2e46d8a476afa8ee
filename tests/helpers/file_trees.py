"""What is under a directory, to assert that a refused or failed write left
it as it was; a killed writer's leftovers, faked."""

import os
import re

import pytest

from realformer_tf.core import ownership


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


def claim_as_ours(leftover, pid):
  """Writes the owner record a writer of ours (process `pid`) puts beside a
  temp or backup it makes (`core.ownership.claim`): a test's stand-in for what a
  killed writer leaves. A leftover without one is a user's, never removed."""
  with open(ownership.owner_path(os.fspath(leftover)), "w") as f:
    f.write(ownership.owner_record(os.fspath(leftover), pid))


# A bucket this machine cannot reach (no credentials, no network).
UNREACHABLE_FOLDER = "gs://realformer-tf-no-such-bucket/pretrain"


def assert_unreachable_refused(write, name, cwd):
  """`write(path)` of `UNREACHABLE_FOLDER/name` is one refusal naming the
  folder, and nothing appears in `cwd` (the current directory); skipped
  where gs:// answers. TensorFlow imported here: the module is TF-free."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.io.gfile.exists(UNREACHABLE_FOLDER)
  except tf.errors.OpError:
    pass
  else:
    pytest.skip("gs:// is reachable here.")
  with pytest.raises(ValueError, match=re.escape(
      f"Output folder='{UNREACHABLE_FOLDER}' cannot be reached: ") +
                     r"[^\n]+$"):
    write(f"{UNREACHABLE_FOLDER}/{name}")
  assert os.listdir(cwd) == []
