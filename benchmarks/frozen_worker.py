"""How long a two-worker run's survivor takes to end when its peer freezes.

A frozen worker (SIGSTOP: a machine gone off the network, its connections
left open) is not a reset connection: only the coordination service's
heartbeats notice it (`training/multi_worker.py`, `HEARTBEAT_TIMEOUT_S`).
Not a CI test (it waits out the heartbeat timeout); run by hand:

  python benchmarks/frozen_worker.py --workdir=/tmp/frozen_worker

Prints the survivor's exit status, the seconds from the SIGSTOP to its
exit, and its last lines. Measured on 2 shared CPU cores: exit status 1
after 40 and 43 s (docs/pretraining_at_scale.md).
"""

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from tests.helpers import train_runs
from tests.training import multi_worker_test
# pylint: enable=g-import-not-at-top,wrong-import-position


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="/tmp/frozen_worker",
                      help="Scratch folder (replaced).")
  parser.add_argument("--freeze_after_step", type=int, default=5)
  parser.add_argument("--wait_s", type=int, default=400,
                      help="Give up on the survivor after this long.")
  args = parser.parse_args()
  work = pathlib.Path(args.workdir)
  shutil.rmtree(work, ignore_errors=True)
  work.mkdir(parents=True)
  pattern = train_runs.write_pretraining_shards(str(work / "train"), 4, 32)
  overrides = train_runs.tiny_overrides(
      pattern, "dummy", train_steps=400, steps_per_loop=1,
      checkpoint_interval=20, batch_size=8, dropout=0.0)
  overrides["runtime"] = {"distribution_strategy": "multi_worker_mirrored"}
  overrides["trainer"]["validation_interval"] = 10_000
  config = train_runs.write_yaml(str(work / "cluster.yaml"), overrides)
  procs, logs = multi_worker_test._start(work, config, 0)  # pylint: disable=protected-access
  try:
    frozen_at = multi_worker_test._kill_in_a_step(  # pylint: disable=protected-access
        procs, logs, 1, signal.SIGSTOP, args.freeze_after_step)
    try:
      code = procs[0].wait(timeout=args.wait_s)
      print(f"worker 0 ended with exit status {code}, "
            f"{time.time() - frozen_at:.1f} s after worker 1 froze")
    except subprocess.TimeoutExpired:
      print(f"worker 0 still running {args.wait_s} s after worker 1 froze")
    print("its last lines:\n" + "\n".join(
        logs[0].read_text().strip().splitlines()[-3:]))
  finally:
    procs[1].send_signal(signal.SIGCONT)
    for proc in procs:
      proc.kill()
      proc.wait()


if __name__ == "__main__":
  main()
