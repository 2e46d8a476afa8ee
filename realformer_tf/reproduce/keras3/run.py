"""The Keras 3 reproduction's execution: one writer per output dir
(`core.run_lock`), the data
once, every run not done yet (resumed from its checkpoint), the report."""

import os
import time
from typing import Dict, Sequence

from realformer_tf.core import ownership
from realformer_tf.core import run_lock
from realformer_tf.core import writes
from realformer_tf.reproduce.keras3 import data as data_lib
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import report
from realformer_tf.reproduce.keras3 import train

LOCK_FILE = plan_lib.LOCK_FILE


def execute(plan: plan_lib.Plan) -> Dict:
  """Runs the plan (see the package docstring); returns results.json's
  content."""
  o = plan.options
  data_dir = os.path.join(o.output_dir, "data")
  # A user's file at a path of ours is refused before a write.
  data_lib.check(data_dir)
  for run in plan.runs:
    ownership.check_ours((), os.path.join(run.run_dir, plan_lib.RESULT_FILE),
                         writes.OS_OPS)
    train.check_checkpoint(os.path.join(run.run_dir,
                                        plan_lib.CHECKPOINT_FILE))
  train.check_backend()
  start = time.time()
  with run_lock.hold(o.output_dir, name=LOCK_FILE, flag="--output_dir"):
    sequences = data_lib.prepare(data_dir, o.corpus, plan.size.vocab_size,
                                 plan.size.seq_length)
    data_seconds = time.time() - start
    results = {}
    for run in plan.runs:
      path = os.path.join(run.run_dir, plan_lib.RESULT_FILE)
      result = ownership.read_json(path, writes.OS_OPS)
      if result is None or result.get("config") != train.run_config(
          plan, train.resolve_policy(o.dtype_policy)):
        result = train.train_run(plan, run, sequences)
        result = writes.publish_json(path, result, plan_lib.WRITER,
                                     writes.OS_OPS)
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
