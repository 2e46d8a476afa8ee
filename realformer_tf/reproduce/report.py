"""The reproduction's report, for both faces, without TensorFlow: results.md
(the paper's Tables 2 and 3 at that size, seconds per run), results.json,
curves.png and, from the faces' `analysis/<arch>/summary.json`, attention.png.
"""

import json
import os
import re
from typing import Dict, List, Optional

import numpy as np

from realformer_tf.analysis import plots
from realformer_tf.core import writes
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.training import seed_stats

PRETRAIN_METRICS = ("masked_lm_accuracy", "lm_example_loss")
# The paper's Table 2, held-out MLM accuracy (%) after 1M steps; a size with
# no row of its own compares to BERT-Small's.
PAPER_TABLE2 = {
    "small": ("BERT-Small", {"post_ln": 61.88, "pre_ln": 61.67,
                             "realformer": 62.02}),
    "base": ("BERT-Base", {"post_ln": 70.20, "pre_ln": 69.74,
                           "realformer": 70.42}),
    "large": ("BERT-Large", {"post_ln": 73.64, "pre_ln": 73.21,
                             "realformer": 73.94}),
}
# The paper's GLUE dev numbers for RealFormer (BERT-Large, Table 3), for
# `--size=large`; per task, the metrics the sweep reports (as fractions).
PAPER_GLUE_LARGE_REALFORMER = {
    "cola": {"matthews_corrcoef": 0.5983}, "sst2": {"accuracy": 0.9404},
    "mrpc": {"accuracy": 0.8701, "f1": 0.9091}, "rte": {"accuracy": 0.7370},
    "stsb": {"pearson": 0.9011, "spearman": 0.8988},
    "qnli": {"accuracy": 0.9189}, "qqp": {"accuracy": 0.9134, "f1": 0.8828}}


def encoder_line(size: plan_lib.Size) -> str:
  return (f"{size.num_layers} layers, hidden {size.hidden_dim}, "
          f"{size.num_heads} heads, feed-forward {size.intermediate_dim}")


def scale_note(plan: plan_lib.Plan) -> Optional[str]:
  """What a CPU-sized run's report and figures must say: its numbers show
  the pipeline runs, they are not findings (None at the other sizes)."""
  if not plan.size.cpu:
    return None
  return (f"{plan.options.size.capitalize()} size ({encoder_line(plan.size)}"
          f"; {plan.train_steps} pre-training steps on a CPU): a check that "
          "the pipeline runs, not the paper's findings.")


def paper_row(plan: plan_lib.Plan):
  """(paper size name, {arch: MLM accuracy %}) this size compares to."""
  return PAPER_TABLE2[plan.size.paper or "small"]


def summarize_pretraining(results: Dict[str, List[Dict]]) -> Dict:
  """{arch: {metric: {median, std, values}}} over seeds (numpy std, ddof=0);
  `results`: {arch: [{"eval_logs": {metric: value}}, ...]}."""
  return {arch: {m: seed_stats.median_std([r["eval_logs"][m] for r in runs])
                 for m in PRETRAIN_METRICS}
          for arch, runs in results.items()}


def plus_minus(stat: Dict, scale: float = 100.0) -> str:
  """Median ± std over seeds; one seed has no spread to show."""
  if len(stat["values"]) < 2:
    return f"{scale * stat['median']:.2f} (1 seed)"
  return f"{scale * stat['median']:.2f} ± {scale * stat['std']:.2f}"


def pretraining_table(labels: Dict[str, str], pretraining: Dict,
                      paper=PAPER_TABLE2["small"]) -> List[str]:
  """Table 2's rows in `labels`' order beside the paper's, then `ordering`."""
  name, numbers = paper
  lines = [f"| Architecture | MLM accuracy (%) | MLM loss | Paper, {name} "
           "(%) |", "|---|---|---|---|"]
  for arch, label in labels.items():
    if arch in pretraining:
      p = pretraining[arch]
      lines.append(f"| {label} | {plus_minus(p['masked_lm_accuracy'])} | "
                   f"{plus_minus(p['lm_example_loss'], 1.0)} | "
                   f"{f'{numbers[arch]:.2f}' if arch in numbers else '-'} |")
  return lines + ["", ordering(labels, pretraining, paper)]


def _ranked(labels: Dict[str, str], values: Dict[str, float]) -> str:
  """"A 1.00 > B 0.50": best first, ties (at the shown precision) as `=` in
  `labels`' order."""
  archs = sorted((a for a in labels if a in values), key=lambda a: -values[a])
  shown = [f"{values[a]:.2f}" for a in archs]
  ranked = f"{labels[archs[0]]} {shown[0]}" if archs else "none"
  for i in range(1, len(archs)):
    ranked += (f" {'=' if shown[i] == shown[i - 1] else '>'} "
               f"{labels[archs[i]]} {shown[i]}")
  return ranked


def ordering(labels: Dict[str, str], pretraining: Dict,
             paper=PAPER_TABLE2["small"]) -> str:
  """The architectures by median held-out MLM accuracy beside the paper's
  ordering at `paper`'s size."""
  ours = _ranked(labels, {a: 100 * p["masked_lm_accuracy"]["median"]
                          for a, p in pretraining.items()})
  return (f"Ordering by held-out MLM accuracy: {ours} (the paper's, "
          f"{paper[0]} after 1M steps: {_ranked(labels, paper[1])}).")


def majority_class_lines(glue_results: Dict[str, Dict[str, List[Dict]]]
                         ) -> List[str]:
  """A line per architecture and task whose every run scored exactly what
  always predicting the most frequent label scores (`majority_class_*`):
  such a classifier learned nothing, whatever its number says."""
  found = []
  for arch, by_task in glue_results.items():
    for task, results in sorted(by_task.items()):
      metrics = list(results[0]["metrics"])
      logs = [r.get("eval_logs", {}) for r in results]
      if all(f"majority_class_{m}" in log and
             abs(log[m] - log[f"majority_class_{m}"]) < 1e-6
             for log in logs for m in metrics):
        values = ", ".join(f"{m} {100 * logs[0][m]:.2f}" for m in metrics)
        found.append(
            f"- {plan_lib.ARCHS[arch].label}, {task}: every run scored "
            f"exactly the majority class ({values}: one label for every "
            "example); the classifier learned nothing at this scale.")
  return found


def glue_table(plan: plan_lib.Plan, glue: Dict, glue_runs: Dict
               ) -> List[str]:
  """Table 3's shape: per architecture each task's best grid point (the
  metrics in the order the runs report them)."""
  tasks = sorted({t for summary in glue.values() for t in summary["tasks"]})
  metrics = {t: list(next(by_task[t] for by_task in glue_runs.values()
                          if t in by_task)[0]["metrics"]) for t in tasks}
  header = ["Architecture"] + [f"{t} ({'/'.join(metrics[t])})" for t in tasks]
  s = plan.size
  lines = ["## Fine-tuning (paper Table 3): GLUE dev, x100", "",
           f"Grid: epochs {list(s.glue_epochs)} x learning rates "
           f"{list(s.glue_learning_rates)}; best point by the median of the "
           "task's main metric over the pre-training seeds.", "",
           "| " + " | ".join(header + ["Overall"]) + " |",
           "|" + "---|" * (len(header) + 1)]
  for arch in (a for a in plan.options.archs if a in glue):
    by_task = glue[arch]["tasks"]
    cells = [" / ".join(plus_minus(by_task[t]["best"]["metrics"][m])
                        for m in metrics[t]) if t in by_task else ""
             for t in tasks]
    lines.append(f"| {plan_lib.ARCHS[arch].label} | " + " | ".join(cells) +
                 f" | {100 * glue[arch]['overall']:.2f} |")
  if plan.options.size == "large":
    cells = [" / ".join(f"{100 * PAPER_GLUE_LARGE_REALFORMER[t][m]:.2f}"
                        for m in metrics[t])
             if t in PAPER_GLUE_LARGE_REALFORMER else "" for t in tasks]
    lines.append("| RealFormer, paper (BERT-Large) | " + " | ".join(cells) +
                 " | |")
  return lines + [""]


def squad_table(plan: plan_lib.Plan, squad: Dict) -> List[str]:
  """Table 4's shape: per architecture SQuAD v1.1's best grid point."""
  if not squad:
    return []
  seq_length, stride, _ = plan_lib.squad_lengths(plan.size)
  lines = ["## Fine-tuning (paper Table 4): SQuAD v1.1 dev, x100", "",
           "Exact match and F1 by the official script's rules; best point "
           f"by the median F1 over the pre-training seeds. Sequence "
           f"{seq_length}, stride {stride}.", "",
           "| Architecture | EM | F1 |", "|---|---|---|"]
  for arch in (a for a in plan.options.archs if a in squad):
    best = squad[arch]["best"]
    lines.append(f"| {plan_lib.ARCHS[arch].label} | " + " | ".join(
        plus_minus(best["metrics"][m]) for m in ("exact_match", "f1")) +
                 " |")
  return lines + [""]


def seconds_lines(plan: plan_lib.Plan, results: Dict[str, Dict]) -> List[str]:
  """Each architecture's seconds per pre-training run (seed order) and per
  fine-tuning run (mean), training and evaluation, compilation included."""
  lines = ["## Seconds per run", ""]
  for arch in plan.options.archs:
    pre = [results[r.run_dir]["seconds"] for r in plan.pretrain
           if r.arch == arch]
    fine = [results[f.run_dir]["seconds"] for r in plan.pretrain
            if r.arch == arch for f in plan.finetune[r.run_dir]]
    lines.append(f"- {plan_lib.ARCHS[arch].label}: pre-training "
                 f"{', '.join(f'{s:.0f}' for s in pre)} s" + (
                     f"; fine-tuning {len(fine)} runs, "
                     f"{np.mean(fine):.0f} s each on average" if fine else ""))
  return lines + [""]


def by_arch(plan: plan_lib.Plan, results: Dict[str, Dict]):
  """({arch: [pre-training result per seed]}, {arch: {GLUE task:
  [fine-tuning results]}}, {arch: [SQuAD results]}) from the runs'
  `results` ({run_dir: result})."""
  pretrain_runs, glue_runs, squad_runs = {}, {}, {}
  for run in plan.pretrain:
    pretrain_runs.setdefault(run.arch, []).append(results[run.run_dir])
    for spec in plan.finetune[run.run_dir]:
      runs = (squad_runs.setdefault(run.arch, []) if spec.task ==
              plan_lib.SQUAD else glue_runs.setdefault(
                  run.arch, {}).setdefault(spec.task, []))
      runs.append(results[spec.run_dir])
  return pretrain_runs, glue_runs, squad_runs


def format_results(plan: plan_lib.Plan, results: Dict[str, Dict],
                   pretraining: Dict, glue: Dict,
                   squad: Optional[Dict] = None) -> str:
  """`results.md` from the runs' `results` ({run_dir: result}) and their
  summaries."""
  o, s = plan.options, plan.size
  note = scale_note(plan)
  pretrain_runs, glue_runs, _ = by_arch(plan, results)
  lines = [
      f"# Post-LN vs Pre-LN vs RealFormer, size `{o.size}`, face `{o.face}`",
      "", *([f"**{note}**", ""] if note else []),
      f"Encoder: {encoder_line(s)}; vocabulary {plan.data['vocab_size']} "
      f"WordPiece tokens ({plan.data['source']}).",
      f"Pre-training: {plan.train_steps} steps, batch {s.batch_size}, seq "
      f"{s.seq_length}, at most {s.max_predictions} masked positions a "
      f"sequence, {o.seeds} seed(s) per architecture with identical data "
      "order and steps. Numbers: " + (
          "median ± std over seeds." if o.seeds > 1 else
          "one seed per architecture, so no spread (\"1 seed\"); "
          "`--seeds=3` or more gives median and std."),
      *plan.face.report_lines(plan, pretrain_runs), "",
      "## Pre-training (paper Table 2): held-out masked LM", ""]
  lines += pretraining_table(plan.labels, pretraining, paper_row(plan)) + [""]
  if glue:
    lines += glue_table(plan, glue, glue_runs)
  lines += squad_table(plan, squad or {}) + majority_class_lines(glue_runs) + [
      f"- {task} not fine-tuned: {why}."
      for task, why in plan.skipped_tasks.items()]
  lines += ["", *seconds_lines(plan, results),
            f"Curves: `{plan_lib.CURVES_PNG}` (training accuracy at each "
            "logged step, held-out accuracy at each evaluation). Attention "
            f"entropy and JSD of seed 0: `{plan_lib.ATTENTION_PNG}` (per "
            "architecture: `analysis/<arch>/`).", "",
            "The paper's numbers are BERT-sized models pre-trained for 1M "
            "steps on Wikipedia + BooksCorpus; at a smaller scale the "
            "ordering of the architectures need not be the paper's."]
  return re.sub("\n\n\n+", "\n\n", "\n".join(lines) + "\n")


def draw_attention(plan: plan_lib.Plan, found: Dict[str, str], path,
                   note=None):
  """Per-head attention entropy and JSD of each architecture (`found`: {arch:
  its analysis dir}), side by side, with the entropy of uniform attention."""
  summaries = {}
  for arch, out_dir in found.items():
    with plan.face.open_file(os.path.join(out_dir, "summary.json")) as f:
      summaries[plan_lib.ARCHS[arch].label] = json.load(f)["models"][0]
  return plots.summary_figure(summaries, path, note=note,
                              seq_length=plan.size.seq_length)


def write_results(plan: plan_lib.Plan, results: Dict[str, Dict],
                  analyses: Dict[str, str]) -> Dict:
  """Publishes results.json, the manifest of results.md, curves.png and
  (with `analyses`) attention.png, one output set: a user's file at one of
  those paths is refused. Prints results.md; returns results.json's
  content."""
  o, face = plan.options, plan.face
  pretrain_runs, glue_runs, squad_runs = by_arch(plan, results)
  pretraining = summarize_pretraining(pretrain_runs)
  squad = {arch: seed_stats.summarize_task(plan_lib.SQUAD, runs, main="f1")
           for arch, runs in squad_runs.items()}
  glue = {arch: seed_stats.summarize(by_task)
          for arch, by_task in glue_runs.items()}
  curves = {arch: {r["seed"]: r["curves"] for r in runs}
            for arch, runs in pretrain_runs.items()}
  summary = {"face": o.face, "size": o.size, "archs": list(o.archs),
             "seeds": o.seeds, "train_steps": plan.train_steps,
             "data": {k: v for k, v in plan.data.items()
                      if isinstance(v, (str, int, float))},
             "pretraining": pretraining, "pretraining_runs": pretrain_runs,
             "glue": glue, "squad": squad, "curves": curves,
             "analysis": analyses}
  text = format_results(plan, results, pretraining, glue, squad)
  out = {name: os.path.join(o.output_dir, name) for name in plan_lib.REPORT}
  note = " ".join(filter(None, [scale_note(plan),
                                *face.figure_notes(plan)])) or None
  with writes.output_set(out[plan_lib.RESULTS_JSON], plan_lib.WRITER, face.OPS,
                         face.fingerprint, list(out.values())) as outputs:
    with face.open_file(outputs.stage(out[plan_lib.RESULTS_MD]), "w") as f:
      f.write(text)
    with face.open_file(outputs.stage(out[plan_lib.CURVES_PNG]), "wb") as f:
      plots.curves_figure({plan_lib.ARCHS[a].label: by_seed
                           for a, by_seed in curves.items()}, f, note=note)
    if analyses:
      with face.open_file(outputs.stage(out[plan_lib.ATTENTION_PNG]),
                          "wb") as f:
        draw_attention(plan, analyses, f, scale_note(plan))
    summary = outputs.commit(summary)
  print(text, flush=True)
  return summary
