r"""Kill tests' subprocess: runs one of our writers and SIGKILLs it before
its K-th rename (`tf.io.gfile.rename`, `os.rename` or `os.replace`) into a
final path (one whose name has none of `.tmp-`, `.old-` and `.pending-`: not
a leftover or journal of `core.writes`), the moments at which a writer's
outputs change.

  python -m tests.helpers.kill_writer K MODULE FUNCTION JSON_KWARGS

K=0 kills at no rename: for a FUNCTION that SIGKILLs itself at another point
(inside Keras' zip write, before TensorFlow writes `saved_model.pb`).

`run_killed` runs it and checks that the kill happened.
"""

import importlib
import json
import os
import signal
import subprocess
import sys

from tests.helpers import watchdog

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def dead_pid() -> int:
  """The pid of a process that has ended (a killed writer's, for leftovers
  named after it)."""
  return int(subprocess.run([sys.executable, "-c", "import os; print("
                             "os.getpid())"], capture_output=True, text=True,
                            check=True).stdout)


def run_killed(kill_at: int, module: str, function: str, **kwargs) -> None:
  """Runs `module.function(**kwargs)` in a fresh process killed (SIGKILL)
  before its `kill_at`-th rename into a final path; fails the test if the
  writer was not killed there."""
  env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="2",
             CUDA_VISIBLE_DEVICES="")
  result = watchdog.run(
      [sys.executable, "-m", "tests.helpers.kill_writer", str(kill_at), module,
       function, json.dumps(kwargs)], cwd=REPO_ROOT, env=env)
  assert result.returncode == -signal.SIGKILL, (
      f"rc {result.returncode}, not killed:\n{result.stderr[-3000:]}")


def main():
  kill_at, module, function, kwargs = sys.argv[1:]
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rename, os_rename, os_replace = tf.io.gfile.rename, os.rename, os.replace
  count = [0]

  def count_or_kill(target):
    name = os.path.basename(os.fspath(target).rstrip("/"))
    if not any(infix in name for infix in (".tmp-", ".old-", ".pending-")):
      count[0] += 1
      if count[0] == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)

  def killing_rename(source, target, overwrite=False):
    count_or_kill(target)
    return rename(source, target, overwrite)

  def killing_os_rename(source, target, **kwargs):
    count_or_kill(target)
    return os_rename(source, target, **kwargs)

  def killing_os_replace(source, target, **kwargs):
    count_or_kill(target)
    return os_replace(source, target, **kwargs)

  tf.io.gfile.rename = killing_rename
  os.rename = killing_os_rename
  os.replace = killing_os_replace  # core.writes.OS_OPS.
  getattr(importlib.import_module(module), function)(**json.loads(kwargs))
  sys.exit(f"Not killed: {count[0]} renames into final paths.")


if __name__ == "__main__":
  main()
