"""The Keras 3 reproduction's outputs: results.md (the tf_keras
reproduction's Table 2 and ordering, `tables`), results.json, curves.png."""

import os
from typing import Dict, List, Optional

from realformer_tf.core import writes
from realformer_tf.reproduce import tables
from realformer_tf.reproduce.keras3 import data as data_lib
from realformer_tf.reproduce.keras3 import plan as plan_lib



def scale_note(plan: plan_lib.Plan) -> Optional[str]:
  """What a tiny run's report and figure must say: its numbers show the
  pipeline runs, they are not findings (None at the other sizes; the
  tf_keras reproduction's `report.scale_note` says the same)."""
  if plan.options.size != "tiny":
    return None
  s = plan.size
  return (f"Tiny size ({s.num_layers} layers, hidden {s.hidden_dim}; "
          f"{plan.train_steps} pre-training steps): a check that the "
          "pipeline runs, not the paper's findings.")


def format_results(plan: plan_lib.Plan, sequences: data_lib.Sequences,
                   results: Dict[str, List[Dict]], pretraining: Dict) -> str:
  """`results.md`: the paper's Table 2 shape, the ordering, how it ran."""
  o, s = plan.options, plan.size
  first = results[o.archs[0]][0]
  seconds = {a: sum(r["seconds"] for r in runs) for a, runs in results.items()}
  note = scale_note(plan)
  lines = [
      f"# Post-LN vs Pre-LN vs RealFormer on Keras 3 (JAX), size `{o.size}`",
      "", *([f"**{note}**", ""] if note else []),
      f"Encoder: {s.num_layers} layers, hidden {s.hidden_dim}, "
      f"{s.num_heads} heads, feed-forward {s.intermediate_dim} "
      f"(`RealFormerBackbone` + keras-hub's masked LM head); vocabulary "
      f"{sequences.vocab_size} WordPiece tokens learned from "
      f"{sequences.source}.",
      f"Pre-training: {plan.train_steps} steps, batch {s.batch_size}, seq "
      f"{s.seq_length}, masked LM only (at most {s.max_predictions} masked "
      f"positions a sequence), {o.seeds} seed(s) per architecture with "
      "identical batches, masks and initial weights (where shapes allow). "
      "Numbers: " + ("median ± std over seeds." if o.seeds > 1 else
                     "one seed per architecture, so no spread (\"1 seed\"); "
                     "`--seeds=3` or more gives median and std."),
      batches_line(results),
      passes_line(plan, sequences),
      f"Held-out: {len(sequences.eval)} sequences of held-out documents "
      f"(at most {s.eval_sequences} evaluated), masked once.",
      f"Ran on {first['device']} ({first['dtype_policy']}): " + ", ".join(
          f"{tables.ARCH_LABELS[a]} {seconds[a]:.0f} s" for a in o.archs
          if a in seconds) + " of training and evaluation (compilation "
      "included).",
      "", "## Pre-training (paper Table 2): held-out masked LM", ""]
  lines += tables.pretraining_table(plan.labels, pretraining)
  lines += [
      "", f"Curves: `{plan_lib.CURVES_PNG}` (training accuracy averaged over "
      "each device call's steps; held-out accuracy at each evaluation).", "",
      "The paper's numbers are BERT-sized models pre-trained for 1M steps "
      "on Wikipedia + BooksCorpus; at a smaller scale the ordering of the "
      "architectures need not be the paper's."]
  return "\n".join(lines) + "\n"


def passes(plan: plan_lib.Plan, sequences: data_lib.Sequences) -> float:
  """How many times each training sequence was seen, on average."""
  return plan.train_steps * plan.size.batch_size / max(len(sequences.train), 1)


def passes_line(plan: plan_lib.Plan, sequences: data_lib.Sequences) -> str:
  """What the number of passes over the corpus makes of the numbers."""
  n = passes(plan, sequences)
  if n < 0.95:  # "seen about 0.0 times" says nothing
    return (f"Data passes: {plan.train_steps * plan.size.batch_size} "
            f"sequences of the {len(sequences.train)} training sequences, "
            f"{100 * n:.1f}% of one pass.")
  line = (f"Data passes: each of the {len(sequences.train)} training "
          f"sequences was seen about {n:.1f} times (new masks each time).")
  if n > 2:
    line += (" A corpus this small is memorized: training accuracy climbs "
             "past held-out accuracy, so the held-out numbers compare how "
             "each architecture generalizes from a small corpus, not the "
             "paper's one-pass pre-training regime.")
  return line


def batches_line(results: Dict[str, List[Dict]]) -> str:
  """Whether every architecture of a seed saw the same batches (their
  running SHA-256, `data.digest`)."""
  by_seed = {}
  for runs in results.values():
    for r in runs:
      by_seed.setdefault(r["seed"], set()).add(r["batch_digest"])
  if all(len(d) == 1 for d in by_seed.values()):
    return ("Batches: the same for every architecture (SHA-256 of the "
            "masked batches, " + ", ".join(
                f"seed {seed}: `{next(iter(d))[:12]}`"
                for seed, d in sorted(by_seed.items())) + ").")
  return ("Batches: NOT the same for every architecture (seeds " + ", ".join(
      str(seed) for seed, d in sorted(by_seed.items()) if len(d) > 1) +
          "): the comparison is not like for like.")


def write_results(plan: plan_lib.Plan, sequences: data_lib.Sequences,
                  results: Dict[str, List[Dict]]) -> Dict:
  """Publishes results.json, the manifest of results.md and curves.png (one
  output set: a user's file at those paths is refused); prints results.md."""
  o = plan.options
  pretraining = tables.summarize_pretraining(results)
  curves = {a: {r["seed"]: r["curves"] for r in runs}
            for a, runs in results.items()}
  summary = {"face": "keras3", "size": o.size, "archs": list(o.archs),
             "seeds": o.seeds, "train_steps": plan.train_steps,
             "data": {"source": sequences.source,
                      "vocab_size": sequences.vocab_size,
                      "train_sequences": len(sequences.train),
                      "eval_sequences": len(sequences.eval)},
             "pretraining": pretraining, "pretraining_runs": results}
  text = format_results(plan, sequences, results, pretraining)
  n = passes(plan, sequences)
  memorized = (f"{n:.0f} passes over {len(sequences.train)} training "
               "sequences: a small corpus, memorized" if n > 2 else None)
  out = {name: os.path.join(o.output_dir, name) for name in plan_lib.REPORT}
  with writes.output_set(out[plan_lib.RESULTS_JSON], plan_lib.WRITER,
                         writes.OS_OPS, writes.size_of,
                         list(out.values())) as outputs:
    with open(outputs.stage(out[plan_lib.RESULTS_MD]), "w",
              encoding="utf-8") as f:
      f.write(text)
    with open(outputs.stage(out[plan_lib.CURVES_PNG]), "wb") as f:
      tables.curves_figure(curves, plan.labels, f, note=" ".join(
          filter(None, [scale_note(plan), memorized])) or None)
    summary = outputs.commit(summary)
  print(text, flush=True)
  return summary
