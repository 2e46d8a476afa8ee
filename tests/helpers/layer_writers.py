r"""The kill suite's writers of each kind of `core.writes` (a file, a folder,
an output set), and a subprocess that SIGKILLs one at its K-th write or
rename (every one, temps and journals included), without TensorFlow.

  python -m tests.helpers.layer_writers KIND K FOLDER VERSION
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys

from realformer_tf.core import writes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SET_FILES = ("a.rec", "b.rec", "c.rec")
MANIFEST = "set.json"


def write_file(folder, version):
  writes.replace_file(os.path.join(folder, "result.json"),
                      json.dumps({"version": version}), writes.OS_OPS)


def write_folder(folder, version):
  def fill(tmp):
    for name in ("x", "y"):
      writes.OS_OPS.write(os.path.join(tmp, name), f"{name}{version}")
  writes.replace_folder(os.path.join(folder, "export"), fill, writes.OS_OPS)


def _size(path):
  return dict(size=os.path.getsize(path))


def publish_set(folder, version):
  with writes.output_set(
      os.path.join(folder, MANIFEST), "realformer_tf.test", writes.OS_OPS,
      _size, [os.path.join(folder, name) for name in SET_FILES]) as outputs:
    for name in SET_FILES:
      writes.OS_OPS.write(outputs.stage(os.path.join(folder, name)),
                          f"{name} v{version}")
    outputs.commit({"version": version})


WRITERS = {"file": write_file, "folder": write_folder, "set": publish_set}


def read_whole(kind, folder):
  """The version `folder`'s output of `kind` holds whole (None: none yet).

  Raises:
    AssertionError: If it is a mix of versions, or not whole.
  """
  if kind == "file":
    path = os.path.join(folder, "result.json")
    return json.load(open(path))["version"] if os.path.exists(path) else None
  if kind == "folder":
    path = os.path.join(folder, "export")
    if not os.path.exists(path):
      return None
    found = {name: open(os.path.join(path, name)).read()
             for name in sorted(os.listdir(path))}
    version = found["x"][1:]
    assert found == {"x": f"x{version}", "y": f"y{version}"}, found
    return int(version)
  path = os.path.join(folder, MANIFEST)
  if not os.path.exists(path):
    assert not any(os.path.exists(os.path.join(folder, name))
                   for name in SET_FILES)
    return None
  manifest = json.load(open(path))
  version = manifest["version"]
  for name in SET_FILES:
    assert open(os.path.join(folder, name)).read() == f"{name} v{version}"
  return version


def count_points(kind, folder, version):
  """How many writes and renames `kind`'s writer makes (run in-process)."""
  seen = []
  _patch(lambda: seen.append(1))
  try:
    WRITERS[kind](folder, version)
  finally:
    _unpatch()
  return len(seen)


_REAL = writes.OS_OPS


def _patch(at_point):
  def counted(fn):
    def call(*args):
      at_point()
      return fn(*args)
    return call
  writes.OS_OPS = dataclasses.replace(
      _REAL, write=counted(_REAL.write), rename=counted(_REAL.rename))


def _unpatch():
  writes.OS_OPS = _REAL


def run_killed(kind, kill_at, folder, version):
  """Runs `kind`'s writer in a subprocess SIGKILLed at its K-th point."""
  env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  result = subprocess.run(
      [sys.executable, "-m", "tests.helpers.layer_writers", kind,
       str(kill_at), folder, str(version)], cwd=REPO_ROOT, env=env,
      capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]


def main():
  kind, kill_at, folder, version = sys.argv[1:]
  count = [0]

  def kill():
    count[0] += 1
    if count[0] == int(kill_at):
      os.kill(os.getpid(), signal.SIGKILL)

  _patch(kill)
  WRITERS[kind](folder, int(version))
  sys.exit(f"Not killed: {count[0]} points.")


if __name__ == "__main__":
  main()
