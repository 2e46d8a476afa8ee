"""The Keras 3 reproduction's sizes, options and plan (`--dry_run`)."""

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

from realformer_tf.core import writes
from realformer_tf.reproduce import tables

# Architecture -> `RealFormerBackbone` arguments (Post-LN with no residual
# attention is keras-hub's `BertBackbone` exactly).
ARCHS = {
    "post_ln": dict(residual_attention="none", normalize_first=False),
    "pre_ln": dict(residual_attention="none", normalize_first=True),
    "realformer": dict(residual_attention="sum", normalize_first=False),
}
# The reference initialisation every architecture copies where shapes allow.
REFERENCE_ARCH = "post_ln"
# What a reproduction writes in --output_dir (`make_plan` refuses others).
LOCK_FILE = ".lock"
# The module to run again, in every manifest the reproduction writes.
WRITER = "realformer_tf.reproduce.keras3"
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
CURVES_PNG = "curves.png"
# The report: results.json, the manifest of the others (one output set).
REPORT = (RESULTS_JSON, RESULTS_MD, CURVES_PNG)
OUTPUT_ENTRIES = (LOCK_FILE, "data", *ARCHS, *REPORT)


@dataclasses.dataclass(frozen=True)
class Size:
  """Model, data shape and budget of one `--size`.

  `max_predictions`: masked positions per sequence (BERT's 20 at seq 128);
  `learning_rate`: AdamW's peak, after `warmup_fraction` of the steps
  (linear), then cosine decay to 0; `evals`: held-out evaluations (points
  of the curve); `checkpoint_steps`, `steps_per_execution`: defaults of the
  flags; `eval_sequences`: the most held-out sequences evaluated.
  """
  num_layers: int
  hidden_dim: int
  num_heads: int
  intermediate_dim: int
  seq_length: int
  batch_size: int
  max_predictions: int
  train_steps: int
  learning_rate: float
  vocab_size: int
  evals: int
  checkpoint_steps: int
  steps_per_execution: int
  warmup_fraction: float = 0.1
  dropout: float = 0.1
  eval_sequences: int = 8192


SIZES = {
    # BERT-Small (the paper's Table 1) at seq 128, batch 128: one GPU.
    "small": Size(num_layers=4, hidden_dim=512, num_heads=8,
                  intermediate_dim=2048, seq_length=128, batch_size=128,
                  max_predictions=20, train_steps=2000, learning_rate=5e-4,
                  vocab_size=30522, evals=10, checkpoint_steps=500,
                  steps_per_execution=100),
    # A CPU in seconds: the CI smoke test.
    "tiny": Size(num_layers=2, hidden_dim=32, num_heads=2,
                 intermediate_dim=64, seq_length=32, batch_size=8,
                 max_predictions=5, train_steps=24, learning_rate=1e-3,
                 vocab_size=1000, evals=4, checkpoint_steps=12,
                 steps_per_execution=3, eval_sequences=64),
}


@dataclasses.dataclass
class Options:
  """What the command line asks for (see `__main__`)."""
  output_dir: str
  size: str = "small"
  archs: Sequence[str] = tuple(ARCHS)
  seeds: int = 1
  corpus: Sequence[str] = ()
  train_steps: Optional[int] = None
  checkpoint_steps: Optional[int] = None
  steps_per_execution: Optional[int] = None
  dtype_policy: str = "auto"


@dataclasses.dataclass(frozen=True)
class Run:
  """One (architecture, seed) pre-training run and its directory."""
  arch: str
  seed: int
  run_dir: str


@dataclasses.dataclass(frozen=True)
class Plan:
  options: Options
  size: Size
  train_steps: int
  checkpoint_steps: int
  steps_per_execution: int
  runs: List[Run]

  @property
  def labels(self) -> Dict[str, str]:
    return {a: tables.ARCH_LABELS[a] for a in self.options.archs}

  def eval_steps(self) -> List[int]:
    """Steps after which the held-out set is evaluated (the last included)."""
    every = max(self.train_steps // self.size.evals, 1)
    return sorted({*range(every, self.train_steps + 1, every),
                   self.train_steps})

  def boundaries(self) -> List[int]:
    """Steps where a run stops its device loop: evaluations, checkpoints."""
    return sorted({*self.eval_steps(), self.train_steps,
                   *range(self.checkpoint_steps, self.train_steps + 1,
                          self.checkpoint_steps)})


def make_plan(options: Options) -> Plan:
  """Checks the options (a ValueError names the flag) and lists the runs;
  reads the corpus' existence only, writes nothing."""
  if not options.output_dir:
    raise ValueError("--output_dir is required.")
  if os.path.lexists(options.output_dir):
    tables.check_output_dir(
        options.output_dir, os.listdir(options.output_dir)
        if os.path.isdir(options.output_dir) else None, OUTPUT_ENTRIES,
        REPORT, writes.OS_OPS)
  tables.check_choice("size", options.size, SIZES)
  tables.check_archs(options.archs, ARCHS)
  for name in ("seeds", "train_steps", "checkpoint_steps",
               "steps_per_execution"):
    tables.check_positive(name, getattr(options, name))
  if options.dtype_policy not in ("auto", "float32", "mixed_bfloat16",
                                  "mixed_float16"):
    raise ValueError(f"--dtype_policy={options.dtype_policy!r}: use auto, "
                     "float32, mixed_bfloat16 or mixed_float16.")
  for path in options.corpus:
    if not os.path.isfile(path):
      raise ValueError(f"--corpus: {path} is not a file.")
  size = SIZES[options.size]
  steps = options.train_steps or size.train_steps
  return Plan(
      options=options, size=size, train_steps=steps,
      checkpoint_steps=min(options.checkpoint_steps or size.checkpoint_steps,
                           steps),
      steps_per_execution=options.steps_per_execution or (
          size.steps_per_execution),
      runs=[Run(arch, seed, run_dir(options.output_dir, arch, seed))
            for seed in range(options.seeds) for arch in options.archs])


def run_dir(output_dir: str, arch: str, seed: int) -> str:
  return os.path.join(output_dir, arch, f"seed{seed}")


def describe(plan: Plan) -> str:
  """The plan as text (what `--dry_run` prints)."""
  o, s = plan.options, plan.size
  lines = [
      f"Size {o.size}: {s.num_layers} layers, hidden {s.hidden_dim}, "
      f"{s.num_heads} heads, feed-forward {s.intermediate_dim}; seq "
      f"{s.seq_length}, batch {s.batch_size}, {s.max_predictions} masked "
      "positions at most.",
      "Data: " + (", ".join(o.corpus) or "the quickstart's stdlib corpus") +
      f"; WordPiece vocabulary of up to {s.vocab_size} tokens, learned once "
      f"in {os.path.join(o.output_dir, 'data')}.",
      f"Pre-training: {len(plan.runs)} runs ({', '.join(o.archs)} x "
      f"{o.seeds} seed(s)), {plan.train_steps} steps each, AdamW "
      f"{s.learning_rate:g}, held-out evaluation after steps "
      f"{plan.eval_steps()}, a checkpoint every {plan.checkpoint_steps} "
      f"steps, {plan.steps_per_execution} steps per device call."]
  for run in plan.runs:
    lines.append(f"  {run.arch} seed {run.seed}: {run_status(run)} "
                 f"({run.run_dir})")
  return "\n".join(lines)


def run_status(run: Run) -> str:
  if os.path.exists(os.path.join(run.run_dir, RESULT_FILE)):
    return "done"
  if os.path.exists(os.path.join(run.run_dir, CHECKPOINT_FILE)):
    return "resumes from its checkpoint"
  return "to run"


RESULT_FILE = "result.json"
CHECKPOINT_FILE = "checkpoint.npz"
