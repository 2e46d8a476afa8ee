"""The reproduction's outputs: the plan as text, results.md/.json, figures."""

import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tqdm import auto as tqdm

from tensorboard.backend.event_processing import event_accumulator
from realformer_tf import utils
from realformer_tf.analysis import plots
from realformer_tf.data import glue_tasks
from realformer_tf.data import output_sets
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import tables
from realformer_tf.training import runs
from realformer_tf.training import sweep

WRITER = "realformer_tf.reproduce"

# The paper's own GLUE dev numbers for RealFormer (BERT-Large, Table 3), for
# `--scale=large`; per task, the metrics the sweep reports (as fractions).
PAPER_GLUE_LARGE_REALFORMER = {
    "cola": {"matthews_corrcoef": 0.5983}, "sst2": {"accuracy": 0.9404},
    "mrpc": {"accuracy": 0.8701, "f1": 0.9091}, "rte": {"accuracy": 0.7370},
    "stsb": {"pearson": 0.9011, "spearman": 0.8988},
    "qnli": {"accuracy": 0.9189}, "qqp": {"accuracy": 0.9134, "f1": 0.8828}}


def _encoder_line(plan: plan_lib.Plan) -> str:
  encoder = plan.pretrain[0].config.task.model.encoder.get()
  return (f"{encoder.num_layers} layers, hidden {encoder.hidden_size}, "
          f"{encoder.num_attention_heads} heads, feed-forward "
          f"{encoder.intermediate_size}")


def estimate_seconds(plan: plan_lib.Plan) -> float:
  """The whole reproduction's seconds on 2 shared CPU cores, from the
  measured `plan_lib.CpuCost` (tiny scale only; else nan): the data, each
  run's start and steps, each architecture's attention analysis."""
  cost = plan.scale.cpu_cost
  if cost is None:
    return float("nan")
  seconds = cost.data + cost.analysis * len(plan.options.archs)
  for r in plan.all_runs:
    if isinstance(r, plan_lib.PretrainRun):
      seconds += cost.pretrain_start + cost.pretrain_step * r.train_steps
    else:
      seconds += cost.finetune_start + cost.finetune_step * r.train_steps
  return seconds


def describe(plan: plan_lib.Plan) -> str:
  """The plan as text (what `--dry_run` prints): every run and its status."""
  o, s = plan.options, plan.scale
  lines = [f"Scale {o.scale}: {_encoder_line(plan)}.",
           f"Data: {plan.data['source']} (vocabulary {plan.data['vocab_size']}"
           f" tokens); seq {s.seq_length}, batch {s.batch_size}.",
           f"Pre-training: {len(plan.pretrain)} runs ({', '.join(o.archs)} x "
           f"{o.seeds} seeds), {plan.pretrain[0].train_steps} steps each; "
           f"fine-tuning: epochs {list(s.glue_epochs)} x lr "
           f"{list(s.glue_learning_rates)} per task and pre-training run."]
  lines += runs.plan_lines(plan.all_runs)
  for task, why in plan.skipped_tasks.items():
    lines.append(f"Fine-tuning {task}: skipped ({why}).")
  lines.append(f"Attention analysis: seed 0 of {', '.join(o.archs)}, "
               f"{s.analysis_examples} examples.")
  estimate = estimate_seconds(plan)
  if np.isnan(estimate):
    lines.append("Estimated time: no estimate at this scale "
                 "(accelerator-sized).")
  else:
    low = estimate / plan_lib.FREE_MACHINE_SPEEDUP
    unit = "h:min:s" if estimate >= 3600 else "min:s"
    # tqdm's [h:]mm:ss.
    low_s, high_s = (tqdm.tqdm.format_interval(round(t))
                     for t in (low, estimate))
    lines.append(
        f"Estimated time: {low_s} to {high_s} ({unit}) on 2 CPU cores, free "
        "to heavily shared (data, runs and analysis, runs already done "
        "included; measured rates, reproduce/plan.py CpuCost).")
  return "\n".join(lines)


summarize_pretraining = tables.summarize_pretraining


def read_curves(model_dir: str, tag: str = "masked_lm_accuracy"
                ) -> Dict[str, List[List[float]]]:
  """{"train": [[step, value], ...], "validation": [...]} from TensorBoard.

  One point per step, the last written (by wall time) wins: a resumed run
  may log a step again.
  """
  curves = {}
  for split in ("train", "validation"):
    path, by_step = os.path.join(model_dir, split), {}
    if tf.io.gfile.isdir(path):
      events = event_accumulator.EventAccumulator(
          path, size_guidance=event_accumulator.STORE_EVERYTHING_SIZE_GUIDANCE,
          purge_orphaned_data=False).Reload()
      # TF2 summaries (Orbit's) are tensors.
      for e in sorted(events.Tensors(tag) if tag in events.Tags()["tensors"]
                      else [], key=lambda e: e.wall_time):
        by_step[e.step] = float(tf.make_ndarray(e.tensor_proto))
    curves[split] = [[step, value] for step, value in sorted(by_step.items())]
  return curves


def scale_note(plan: plan_lib.Plan) -> Optional[str]:
  """What a tiny-scale run's figures and report must say: its numbers show
  the pipeline runs, they are not findings (None at the other scales)."""
  if plan.options.scale != "tiny":
    return None
  return (f"Tiny scale ({_encoder_line(plan)}; "
          f"{plan.pretrain[0].train_steps} pre-training steps on a CPU): a "
          "check that the pipeline runs, not the paper's findings.")


def plot_attention(analyses: Dict[str, str], path: str,
                   plan: Optional[plan_lib.Plan] = None):
  """Per-head attention entropy and JSD of each architecture, side by side;
  with `plan`, its scale note and the entropy of uniform attention."""
  summaries = {}
  for arch, out_dir in analyses.items():
    with tf.io.gfile.GFile(os.path.join(out_dir, "summary.json")) as f:
      summaries[plan_lib.ARCHS[arch][0]] = json.load(f)["models"][0]
  return plots.summary_figure(
      summaries, path, note=scale_note(plan) if plan else None,
      seq_length=plan.scale.seq_length if plan else None)


def majority_class_lines(glue_results: Dict[str, Dict[str, List[Dict]]]
                         ) -> List[str]:
  """A line per architecture and task whose every run scored exactly what
  always predicting the most frequent label scores (`majority_class_*`):
  such a classifier learned nothing, whatever its number says."""
  found = []
  for arch, by_task in glue_results.items():
    for task, results in sorted(by_task.items()):
      metrics = glue_tasks.get_task(task).metrics
      logs = [r.get("eval_logs", {}) for r in results]
      if logs and all(
          f"majority_class_{m}" in log and
          abs(log[m] - log[f"majority_class_{m}"]) < 1e-6
          for log in logs for m in metrics):
        values = ", ".join(f"{m} {100 * logs[0][m]:.2f}" for m in metrics)
        found.append(
            f"- {plan_lib.ARCHS[arch][0]}, {task}: every run scored exactly "
            f"the majority class ({values}: one label for every example); "
            "the classifier learned nothing at this scale.")
  return found


def format_results(plan: plan_lib.Plan, pretraining: Dict, glue: Dict,
                   majority: Sequence[str] = ()) -> str:
  """`results.md`: the paper's Table 2 and Table 3 shapes; `majority`:
  `majority_class_lines`, under the GLUE table."""
  o, s = plan.options, plan.scale
  label = {arch: plan_lib.ARCHS[arch][0] for arch in o.archs}
  note = scale_note(plan)
  lines = [
      f"# Post-LN vs Pre-LN vs RealFormer, scale `{o.scale}`", "",
      *([f"**{note}**", ""] if note else []),
      f"Encoder: {_encoder_line(plan)}; vocabulary {plan.data['vocab_size']} "
      f"({plan.data['source']}).",
      f"Pre-training: {plan.pretrain[0].train_steps} steps, batch "
      f"{s.batch_size}, seq {s.seq_length}, {o.seeds} seed(s) per "
      "architecture with identical data order and steps. Numbers: " + (
          "median ± std over seeds." if o.seeds > 1 else
          "one seed per architecture, so no spread (\"1 seed\"); "
          "`--seeds=3` or more gives median and std."), "",
      "## Pre-training (paper Table 2): held-out masked LM", ""]
  lines += tables.pretraining_table(label, pretraining) + [""]
  if glue:
    tasks = sorted({t for summary in glue.values() for t in summary["tasks"]})
    metrics = {t: glue_tasks.get_task(t).metrics for t in tasks}
    header = ["Architecture"] + [f"{t} ({'/'.join(metrics[t])})"
                                 for t in tasks]
    lines += ["## Fine-tuning (paper Table 3): GLUE dev, x100", "",
              f"Grid: epochs {list(s.glue_epochs)} x learning rates "
              f"{list(s.glue_learning_rates)}; best point by the median of "
              "the task's main metric over the pre-training seeds.", "",
              "| " + " | ".join(header + ["Overall"]) + " |",
              "|" + "---|" * (len(header) + 1)]
    for arch in (a for a in o.archs if a in glue):
      cells = [" / ".join(tables.plus_minus(glue[arch]["tasks"][t]["best"]["metrics"][m])
                          for m in metrics[t]) for t in tasks]
      lines.append(f"| {label[arch]} | " + " | ".join(cells) +
                   f" | {100 * glue[arch]['overall']:.2f} |")
    if o.scale == "large":
      cells = [" / ".join(f"{100 * PAPER_GLUE_LARGE_REALFORMER[t][m]:.2f}"
                          for m in metrics[t])
               if t in PAPER_GLUE_LARGE_REALFORMER else "" for t in tasks]
      lines.append("| RealFormer, paper (BERT-Large) | " + " | ".join(cells)
                   + " | |")
    lines.append("")
  lines += list(majority)
  for task, why in plan.skipped_tasks.items():
    lines.append(f"- {task} not fine-tuned: {why}.")
  lines += [
      "", f"Curves: `{plan_lib.CURVES_PNG}`; attention entropy and JSD of "
      f"seed 0: `{plan_lib.ATTENTION_PNG}` (per architecture: "
      "`analysis/<arch>/`).",
      "", "The paper's numbers are BERT-sized models pre-trained for 1M steps "
      "on Wikipedia + BooksCorpus; at a smaller scale the ordering of the "
      "architectures need not be the paper's."]
  return "\n".join(lines) + "\n"


def write_results(plan: plan_lib.Plan, pretrain_results: Dict[str, List[Dict]],
                  glue_results: Dict[str, Dict[str, List[Dict]]],
                  analyses: Dict[str, str]) -> Dict:
  """Publishes results.json, the manifest of results.md, curves.png and
  attention.png (one output set: a user's file at one of those paths is
  refused, `tables.check_output_dir`); returns results.json's content."""
  o = plan.options
  pretraining = summarize_pretraining(pretrain_results)
  glue = {arch: sweep.summarize(by_task)
          for arch, by_task in glue_results.items()}
  curves = {arch: {r["seed"]: read_curves(plan_lib.pretrain_dir(
      o.output_dir, arch, r["seed"])) for r in arch_runs}
            for arch, arch_runs in pretrain_results.items()}
  results = {"scale": o.scale, "archs": list(o.archs), "seeds": o.seeds,
             "data": {k: str(v) for k, v in plan.data.items()},
             "pretraining": pretraining,
             "pretraining_runs": pretrain_results,
             "glue": glue, "curves": curves, "analysis": analyses}
  text = format_results(plan, pretraining, glue,
                        majority_class_lines(glue_results))
  out = {name: os.path.join(o.output_dir, name) for name in plan_lib.REPORT}
  with output_sets.output_set(out[plan_lib.RESULTS_JSON], WRITER,
                              list(out.values())) as outputs:
    with tf.io.gfile.GFile(outputs.stage(out[plan_lib.RESULTS_MD]), "w") as f:
      f.write(text)
    with tf.io.gfile.GFile(outputs.stage(out[plan_lib.CURVES_PNG]), "wb") as f:
      tables.curves_figure(curves, {a: plan_lib.ARCHS[a][0] for a in curves},
                           f, note=scale_note(plan))
    with tf.io.gfile.GFile(outputs.stage(out[plan_lib.ATTENTION_PNG]),
                           "wb") as f:
      plot_attention(analyses, f, plan)
    results = outputs.commit(results)
  print(text, flush=True)
  return results
