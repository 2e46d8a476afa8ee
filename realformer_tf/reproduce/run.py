"""The reproduction's executor, for both faces, without TensorFlow: one
writer per output dir (`core.run_lock`), the face's data once, then every run
in the plan's order. A run is done when its result.json is ours and was made
with this plan's config (`Plan.config_of`); else the face trains it, resuming
from its checkpoint. Each result records its seconds; then the report.
"""

import dataclasses
import os
import time
from typing import Dict

from realformer_tf.core import ownership
from realformer_tf.core import run_lock
from realformer_tf.core import writes
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from realformer_tf.training import stop_signals


def result_path(run) -> str:
  return os.path.join(run.run_dir, plan_lib.RESULT_FILE)


def status(plan: plan_lib.Plan, run) -> str:
  """"done", "resume" (a checkpoint of it) or "new"."""
  result = ownership.read_json(result_path(run), plan.face.OPS)
  if result is not None and result.get("config") == plan.config_of(run):
    return "done"
  return "resume" if plan.face.has_checkpoint(run) else "new"


def describe(plan: plan_lib.Plan) -> str:
  """The plan as text (what `--dry_run` prints): every run and its status."""
  o, s = plan.options, plan.size
  lines = [
      f"Size {o.size}: {report.encoder_line(s)}; seq {s.seq_length}, batch "
      f"{s.batch_size}, at most {s.max_predictions} masked positions.",
      f"Data: {plan.data['source']} (vocabulary {plan.data['vocab_size']} "
      f"tokens) in {os.path.join(o.output_dir, 'data')}.",
      f"Pre-training: {len(plan.pretrain)} runs ({', '.join(o.archs)} x "
      f"{o.seeds} seed(s)), {plan.train_steps} steps each, peak lr "
      f"{s.learning_rate:g}, held-out evaluation after steps "
      f"{plan.eval_steps()}.",
      (f"Fine-tuning: epochs {list(s.glue_epochs)} x lr "
       f"{list(s.glue_learning_rates)} per task and pre-training run, batch "
       f"{s.glue_batch_size}, seq {s.glue_seq_length}" + (
           "; SQuAD v1.1 (epochs over its {} training questions) seq {}, "
           "doc stride {}, question {}".format(
               plan.squad_size, *plan_lib.squad_lengths(s))
           if plan.squad_size else "") + ".")]
  lines += [f"{status(plan, r):>6s}  {r.run_dir}  {r.details()}"
            for r in plan.all_runs]
  lines += [f"Fine-tuning {task}: skipped ({why})."
            for task, why in plan.skipped_tasks.items()]
  return "\n".join(lines + plan.face.describe_lines(plan))


def check(plan: plan_lib.Plan) -> None:
  """Refuses, before anything is written, a user's file at a result path
  and an output dir a reproduction of the other face wrote."""
  ops = plan.face.OPS
  for run in plan.all_runs:
    ownership.check_ours((), result_path(run), ops)
  results = ownership.read_json(
      os.path.join(plan.options.output_dir, plan_lib.RESULTS_JSON), ops)
  if results and results.get("face", plan.options.face) != plan.options.face:
    raise ValueError(
        f"--output_dir={plan.options.output_dir} holds a reproduction of "
        f"the {results['face']} face: pass --face={results['face']} or "
        "another --output_dir.")


def execute(plan: plan_lib.Plan) -> Dict:
  """Runs every run of `plan` not done yet, then writes the report; returns
  results.json's content. A stop signal ends the current run at its next
  step (`stop_signals.Stopped`); the same command goes on from there."""
  face, o = plan.face, plan.options
  check(plan)
  face.check_writes(plan)
  start = time.time()
  with run_lock.hold(o.output_dir, name=plan_lib.LOCK_FILE,
                     flag="--output_dir"):
    plan = dataclasses.replace(plan, data=face.prepare_data(plan))
    data_seconds = time.time() - start
    results = {}
    runs = plan.all_runs
    with stop_signals.raised_on_signals():
      for i, run in enumerate(runs):
        state = status(plan, run)
        print(f"[{i + 1}/{len(runs)}] {run.run_dir}: {state} "
              f"({run.details()})", flush=True)
        if state == "done":
          results[run.run_dir] = ownership.read_json(result_path(run),
                                                     face.OPS)
          continue
        began = time.time()
        step = (face.pretrain if isinstance(run, plan_lib.PretrainRun)
                else face.finetune)
        try:
          result = step(plan, run)
          result.setdefault("seconds", time.time() - began)
          result["config"] = plan.config_of(run)
          results[run.run_dir] = writes.publish_json(
              result_path(run), result, plan_lib.WRITER, face.OPS)
          stop_signals.raise_if_stopped()  # One held back to the run's end.
        except stop_signals.Stopped as stop:
          print(f"stopped by {stop.name} during run {i + 1}/{len(runs)} "
                f"({run.run_dir}); rerun the same command to go on: finished "
                "runs are kept, this one resumes from its latest checkpoint.",
                flush=True)
          raise
    summary = report.write_results(plan, results, face.analyse(plan))
  print(f"This invocation: {time.time() - start:.0f} s, of which the data "
        f"{data_seconds:.0f} s.", flush=True)
  return summary


def reproduce(**options) -> Dict:
  """The command as a function (`Options`' fields as keyword arguments)."""
  options = plan_lib.Options(**{k: tuple(v) if isinstance(v, list) else v
                                for k, v in options.items()})
  return execute(plan_lib.make_plan(options, plan_lib.load_face(options.face)))
