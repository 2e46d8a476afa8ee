"""The Keras 3 reproduction's execution: one writer per output dir, the data
once, every run not done yet (resumed from its checkpoint), the report."""

import contextlib
import fcntl
import json
import os
import time
from typing import Dict, Iterator, Optional, Sequence

from realformer_tf.reproduce.keras3 import data as data_lib
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import report
from realformer_tf.reproduce.keras3 import train

LOCK_FILE = plan_lib.LOCK_FILE


class OutputDirBusy(RuntimeError):
  """Another process is writing to the output dir."""


@contextlib.contextmanager
def sole_writer(output_dir: str) -> Iterator[None]:
  """Holds an exclusive lock on `output_dir/.lock` (released when the
  process ends, killed or not).

  Raises:
    OutputDirBusy: Another process is writing to `output_dir`.
  """
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(output_dir, LOCK_FILE), "a") as lock:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      raise OutputDirBusy(
          f"Another process is writing to {output_dir} (it holds "
          f"{lock.name}); wait for it or use another --output_dir.") from None
    yield


def read_result(path: str) -> Optional[Dict]:
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def execute(plan: plan_lib.Plan) -> Dict:
  """Runs the plan (see the package docstring); returns results.json's
  content."""
  o = plan.options
  train.check_backend()
  start = time.time()
  with sole_writer(o.output_dir):
    sequences = data_lib.prepare(
        os.path.join(o.output_dir, "data"), o.corpus, plan.size.vocab_size,
        plan.size.seq_length)
    data_seconds = time.time() - start
    results = {}
    for run in plan.runs:
      path = os.path.join(run.run_dir, plan_lib.RESULT_FILE)
      result = read_result(path)
      if result is None or result.get("config") != train.run_config(
          plan, train.resolve_policy(o.dtype_policy)):
        result = train.train_run(plan, run, sequences)
        data_lib.remove_own_temps(run.run_dir, plan_lib.RESULT_FILE)
        data_lib.write_atomically(path, lambda f, r=result: f.write(
            json.dumps(r, indent=2).encode("utf-8")))
      else:
        print(f"{run.arch} seed {run.seed}: done ({path}).", flush=True)
      results.setdefault(run.arch, []).append(result)
    summary = report.write_results(plan, sequences, results)
  print(f"This invocation: {time.time() - start:.0f} s, of which the data "
        f"{data_seconds:.0f} s.", flush=True)
  return summary


def reproduce(output_dir: str, size: str = "small",
              archs: Sequence[str] = tuple(plan_lib.ARCHS), **options) -> Dict:
  """`python -m realformer_tf.reproduce.keras3` as a function (`Options`'
  fields as keyword arguments)."""
  return execute(plan_lib.make_plan(plan_lib.Options(
      output_dir=output_dir, size=size, archs=tuple(archs),
      **{k: tuple(v) if isinstance(v, list) else v
         for k, v in options.items()})))
