"""What both reproductions' reports share, without TensorFlow: the
architectures' names and the check of `--archs`, Table 2 (held-out masked LM
per architecture, the ordering) and the curves figure.
"""

import os
from typing import Dict, Iterable, List, Optional, Sequence

from realformer_tf.analysis import plots
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.training import seed_stats

PRETRAIN_METRICS = ("masked_lm_accuracy", "lm_example_loss")
# The paper's architectures, as both reports name them.
ARCH_LABELS = {"post_ln": "Post-LN", "pre_ln": "Pre-LN",
               "realformer": "RealFormer"}
# The paper's held-out MLM accuracy (%) at BERT-Base (its Table 2).
PAPER_ORDER = "RealFormer 73.94 > Post-LN 73.64 > Pre-LN 73.21"


def check_choice(flag: str, value, choices) -> None:
  """Raises a ValueError naming `--flag` unless `value` is one of
  `choices`."""
  if value not in choices:
    raise ValueError(f"--{flag}={value!r}: use one of {', '.join(choices)}.")


def check_output_dir(output_dir: str, entries: Optional[Iterable[str]],
                     own: Iterable[str], report: Sequence[str] = (),
                     ops: Optional[writes.FileOps] = None) -> None:
  """Refuses (ValueError) an --output_dir whose `entries` (None: a file)
  are not `own` or our leftovers of those (a train.py run, a user's folder),
  and a file at the `report` paths (its manifest first) that the manifest of
  ours does not list (`ownership.check_ours`, through `ops`)."""
  if entries is None:
    raise ValueError(f"--output_dir={output_dir!r} is a file, not a "
                     "directory.")
  own = set(own)
  names = sorted(entry.rstrip("/") for entry in entries)
  foreign = [name for name in names if writes.target_of(name) not in own]
  if not foreign and report:
    ownership.check_ours([os.path.join(output_dir, name) for name in report],
                         os.path.join(output_dir, report[0]), ops)
  if not foreign:
    return
  run = [name for name in names if name in ownership.RUN_FILES]
  shown = ", ".join(foreign[:8]) + (", ..." if len(foreign) > 8 else "")
  raise ValueError(
      f"--output_dir={output_dir!r} holds {shown}, which a reproduction does "
      "not write" + (f" (a train.py run: it holds {', '.join(run)})" if run
                     else "") +
      f"; a reproduction writes {', '.join(sorted(own))} there, so nothing "
      "was written. Pass a new or empty --output_dir, or one a reproduction "
      "wrote.")


def check_positive(flag: str, value) -> None:
  """Raises a ValueError naming `--flag` unless `value` is None or a
  positive int (not a bool)."""
  if value is not None and (type(value) is not int or value < 1):
    raise ValueError(f"--{flag} must be a positive integer, got {value!r}.")


def check_archs(archs, known) -> None:
  """Raises a ValueError naming `--archs` unless `archs` are distinct names
  of `known`."""
  unknown = [a for a in archs if a not in known]
  if unknown or not archs:
    raise ValueError(f"--archs: unknown {unknown or 'empty list'}; use some "
                     f"of {', '.join(known)}.")
  if len(set(archs)) != len(archs):
    raise ValueError(f"--archs={','.join(archs)} repeats a name.")


def summarize_pretraining(results: Dict[str, List[Dict]]) -> Dict:
  """{arch: {metric: {median, std, values}}} over seeds (numpy std, ddof=0);
  `results`: {arch: [{"eval_logs": {metric: value}}, ...]}."""
  return {arch: {m: seed_stats.median_std([r["eval_logs"][m] for r in arch_runs])
                 for m in PRETRAIN_METRICS}
          for arch, arch_runs in results.items()}


def plus_minus(stat: Dict, scale: float = 100.0) -> str:
  """Median ± std over seeds; one seed has no spread to show."""
  if len(stat["values"]) < 2:
    return f"{scale * stat['median']:.2f} (1 seed)"
  return f"{scale * stat['median']:.2f} ± {scale * stat['std']:.2f}"


def pretraining_table(labels: Dict[str, str], pretraining: Dict
                      ) -> List[str]:
  """Table 2's rows, in `labels`' order, then the ordering (`ordering`)."""
  lines = ["| Architecture | MLM accuracy (%) | MLM loss |", "|---|---|---|"]
  for arch, label in labels.items():
    if arch in pretraining:
      p = pretraining[arch]
      lines.append(f"| {label} | {plus_minus(p['masked_lm_accuracy'])} | "
                   f"{plus_minus(p['lm_example_loss'], 1.0)} |")
  return lines + ["", ordering(labels, pretraining)]


def ordering(labels: Dict[str, str], pretraining: Dict) -> str:
  """The architectures by median held-out MLM accuracy, best first (ties
  in `labels`' order), beside the paper's."""
  archs = sorted((a for a in labels if a in pretraining),
                 key=lambda a: -pretraining[a]["masked_lm_accuracy"]["median"])
  shown = [f"{100 * pretraining[a]['masked_lm_accuracy']['median']:.2f}"
           for a in archs]
  ranked = f"{labels[archs[0]]} {shown[0]}" if archs else "none"
  for i in range(1, len(archs)):  # A tie at the shown precision is a tie.
    ranked += (f" {'=' if shown[i] == shown[i - 1] else '>'} "
               f"{labels[archs[i]]} {shown[i]}")
  return (f"Ordering by held-out MLM accuracy: {ranked} (the paper's, "
          f"BERT-Base after 1M steps: {PAPER_ORDER}).")


def curves_figure(curves: Dict[str, Dict[int, Dict]], labels: Dict[str, str],
                  path: str, note: Optional[str] = None) -> None:
  """`curves.png`: {arch: {seed: {"train": [[step, accuracy]], "validation":
  [...]}}}, MLM accuracy in % (as results.md's Table 2 column); `note`:
  a line under the title (e.g. that a tiny run checks the pipeline only)."""
  plots.curves_figure({labels[arch]: by_seed
                       for arch, by_seed in curves.items()}, path,
                      metric="MLM accuracy", percent=True, note=note)
