r"""The paper's comparison in one command: Post-LN vs Pre-LN vs RealFormer.

  python -m realformer_tf.reproduce --output_dir=OUT \
    [--scale=tiny|small|base|large] \
    [--corpus=FILES | --train_data=GLOB --validation_data=GLOB --vocab_file=V] \
    [--archs=post_ln,pre_ln,realformer] [--seeds=3] \
    [--glue_tasks=mrpc,stsb,cola] [--glue_dir=DIR] [--train_steps=N] \
    [--config_file=runtime.yaml ...] [--dry_run]

What it runs, in order (each step skipped when its output is already there,
so a killed or repeated command carries on where it stopped):

1. Data, once for all runs: `OUT/data` (WordPiece vocabulary and MLM/NSP
   records, built by the quickstart's `prepare_quickstart_data` from
   `--corpus`, else WikiText-2 from `REALFORMER_DATA_DIR`/`../shared/data`
   when present, else the quickstart's stdlib corpus), or the records given
   by `--train_data`/`--validation_data`; then the GLUE tasks present in
   `--glue_dir`, converted with that vocabulary (`OUT/glue_data`).
2. Pre-training, `OUT/pretrain/<arch>/seed<S>`: `realformer/pretraining` with
   the scale's sizes and the architecture's `official_configs/models/arch_*`
   file. For one seed every architecture gets the same data order
   (`task.train_data.seed = S`), the same initialisation seed, steps and
   optimizer: only the architecture differs.
3. Fine-tuning, `OUT/finetune/<arch>/seed<S>/<task>/...`: the sweep's GLUE
   protocol (`realformer_tf.training.sweep`: grid of epochs x learning rates, best
   grid point by the median of the task's main metric over the pre-training
   seeds), each run initialised from its pre-training run.
4. Attention analysis of seed 0 of each architecture, `OUT/analysis/<arch>`.
5. `OUT/results.md` (the paper's Table 2 and Table 3 shapes: median +- std
   over seeds; "1 seed" where there is one), `OUT/results.json`,
   `OUT/curves.png` (train and eval MLM accuracy of every run, one point per
   step) and `OUT/attention.png` (per-head entropy and JSD medians and
   quartiles of the architectures side by side, from each analysis'
   `summary.json`).

Every run trains in this process through Model Garden's `train_lib`
(`sweep.train_and_evaluate`), one after the other.
"""

import dataclasses
import json
import os
import time
from typing import Callable, Dict, List, Optional, Sequence

from absl import app
from absl import flags
from absl import logging
import matplotlib
matplotlib.use("Agg")
from matplotlib import ticker  # pylint: disable=g-import-not-at-top
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
import numpy as np
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from realformer_tf import utils
from realformer_tf.analysis import plots
from realformer_tf.analysis import runner as analysis_runner
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.configs import recipe
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import glue as glue_data
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.training import sweep

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MODELS_DIR = os.path.join(_REPO_ROOT, "official_configs", "models")
_EXPERIMENTS_DIR = os.path.join(_REPO_ROOT, "official_configs", "experiments")

PRETRAIN_RESULT = "pretrain_result.json"
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
CURVES_PNG = "curves.png"
ATTENTION_PNG = "attention.png"

# Architecture -> (label, `official_configs/models` file, learning-rate
# multiplier). "realformer_2xlr" is the paper's RealFormer with a larger
# learning rate (its Table 2 row "RealFormer, lr 2e-4" at BERT-Base).
ARCHS = {
    "post_ln": ("Post-LN", "arch_post_ln.yaml", 1.0),
    "pre_ln": ("Pre-LN", "arch_pre_ln.yaml", 1.0),
    "realformer": ("RealFormer", "arch_realformer.yaml", 1.0),
    "realformer_2xlr": ("RealFormer (2x lr)", "arch_realformer.yaml", 2.0),
}
DEFAULT_ARCHS = ("post_ln", "pre_ln", "realformer")
DEFAULT_GLUE_TASKS = ("mrpc", "stsb", "cola")

# The paper's own GLUE dev numbers for RealFormer (BERT-Large, Table 3), for
# `--scale=large`; per task, the metrics the sweep reports (as fractions).
PAPER_GLUE_LARGE_REALFORMER = {
    "cola": {"matthews_corrcoef": 0.5983},
    "mrpc": {"accuracy": 0.8701, "f1": 0.9091},
    "stsb": {"pearson": 0.9011, "spearman": 0.8988},
    "sst2": {"accuracy": 0.9404},
    "qnli": {"accuracy": 0.9189},
    "qqp": {"accuracy": 0.9134, "f1": 0.8828},
    "rte": {"accuracy": 0.7370},
}


@dataclasses.dataclass(frozen=True)
class Scale:
  """Model size and budget of one `--scale`.

  Attributes:
    size_yaml: `official_configs/models` size file (None: `encoder` only).
    recipe_yaml: `official_configs/experiments` pre-training recipe, or None.
    encoder: Encoder overrides (after `size_yaml`).
    seq_length, max_predictions, batch_size, train_steps, learning_rate,
      warmup_steps: Pre-training data shape and schedule (paper's AdamW,
      linear warm-up and decay).
    vocab_size: Target WordPiece size when the vocabulary is learned.
    evals: Evaluations during pre-training (points of the eval curve).
    glue_seq_length, glue_epochs, glue_learning_rates: Fine-tuning; fewer grid
      points at the small scales.
    analysis_examples: Held-out examples of the attention analysis.
    seconds_per_step: Rough 2-core CPU cost of a pre-training step (tiny
      only; None elsewhere), for `--dry_run`'s estimate.
  """
  size_yaml: Optional[str]
  recipe_yaml: Optional[str]
  encoder: Dict[str, object]
  seq_length: int
  max_predictions: int
  batch_size: int
  train_steps: int
  learning_rate: float
  warmup_steps: int
  vocab_size: int
  evals: int
  glue_seq_length: int
  glue_epochs: Sequence[float]
  glue_learning_rates: Sequence[float]
  analysis_examples: int
  seconds_per_step: Optional[float] = None


_PAPER_RECIPE = Scale(
    size_yaml="bert_base.yaml", recipe_yaml="pretrain_paper.yaml",
    encoder={}, seq_length=512, max_predictions=80, batch_size=512,
    train_steps=1000000, learning_rate=1e-4, warmup_steps=10000,
    vocab_size=30522, evals=10, glue_seq_length=128,
    glue_epochs=finetuning.PAPER_EPOCHS,
    glue_learning_rates=finetuning.PAPER_LEARNING_RATES,
    analysis_examples=8192)

SCALES = {
    # Minutes per run on 2 CPU cores; deep enough (4 layers) for the running
    # score sum to matter, small enough for 3 archs x 3 seeds in an hour.
    "tiny": Scale(
        size_yaml=None, recipe_yaml=None,
        encoder=dict(num_layers=4, hidden_size=64, num_attention_heads=2,
                     intermediate_size=256, max_position_embeddings=128),
        seq_length=64, max_predictions=10, batch_size=32, train_steps=1000,
        learning_rate=1e-3, warmup_steps=100, vocab_size=8000, evals=5,
        glue_seq_length=64, glue_epochs=(3,), glue_learning_rates=(1e-4,),
        analysis_examples=512, seconds_per_step=0.05),
    # BERT-Small (paper Table 1) on one accelerator: seq 128, 100k steps.
    "small": Scale(
        size_yaml="bert_small.yaml", recipe_yaml=None,
        encoder=dict(max_position_embeddings=512),
        seq_length=128, max_predictions=20, batch_size=256,
        train_steps=100000, learning_rate=1e-4, warmup_steps=10000,
        vocab_size=30522, evals=10, glue_seq_length=128, glue_epochs=(3,),
        glue_learning_rates=(2e-5, 5e-5), analysis_examples=8192),
    # The paper's recipe (seq 512, batch 512, 1M steps) and GLUE grid.
    "base": _PAPER_RECIPE,
    "large": dataclasses.replace(_PAPER_RECIPE, size_yaml="bert_large.yaml"),
}


@dataclasses.dataclass
class Options:
  """What the command line asks for (see `define_flags`)."""
  output_dir: str
  scale: str = "tiny"
  archs: Sequence[str] = DEFAULT_ARCHS
  seeds: int = 3
  corpus: Sequence[str] = ()
  train_data: str = ""
  validation_data: str = ""
  vocab_file: str = ""
  glue_tasks: Sequence[str] = DEFAULT_GLUE_TASKS
  glue_dir: str = ""
  train_steps: Optional[int] = None
  config_files: Sequence[str] = ()
  params_override: str = ""


@dataclasses.dataclass
class PretrainRun:
  arch: str
  seed: int
  model_dir: str
  config: cfg.ExperimentConfig


@dataclasses.dataclass
class Plan:
  """Every run of a reproduction, in execution order."""
  options: Options
  scale: Scale
  data: Dict[str, object]
  glue_tasks: List[str]
  pretrain: List[PretrainRun]
  skipped_tasks: Dict[str, str]


def wikitext_documents(path: str) -> List[List[str]]:
  """WikiText (tokenized release) as documents of sentences.

  Each top-level heading (` = Title = `) starts an article (a document); the
  section headings (` = = ... = = `) are dropped and paragraphs are split
  into sentences with the quickstart corpus's splitter.
  """
  documents, current = [], []
  for line in pretraining_data.read_lines(path):
    text = line.strip()
    if not text:
      continue
    if text.startswith("= ") and text.endswith(" ="):
      if not text.startswith("= ="):
        if current:
          documents.append(current)
        current = []
      continue
    current.extend(quickstart_corpus.split_sentences(text))
  if current:
    documents.append(current)
  return documents


def default_corpus() -> List[str]:
  """WikiText-2 files in the shared data dir, or [] (the stdlib corpus)."""
  wikitext_dir = os.path.join(pretraining_data.default_data_dir(), "corpus",
                              "wikitext-2")
  files = [os.path.join(wikitext_dir, name)
           for name in ("valid.txt", "test.txt")]
  return files if all(os.path.exists(f) for f in files) else []


def _check_options(options: Options) -> Scale:
  """Raises a ValueError naming the flag for any bad option."""
  if not options.output_dir:
    raise ValueError("--output_dir is required.")
  if options.scale not in SCALES:
    raise ValueError(f"--scale={options.scale!r}: use one of "
                     f"{', '.join(SCALES)}.")
  unknown = [a for a in options.archs if a not in ARCHS]
  if unknown or not options.archs:
    raise ValueError(f"--archs: unknown {unknown or 'empty list'}; use some "
                     f"of {', '.join(ARCHS)}.")
  if len(set(options.archs)) != len(options.archs):
    raise ValueError(f"--archs={','.join(options.archs)} repeats a name.")
  if isinstance(options.seeds, bool) or not isinstance(options.seeds, int) or (
      options.seeds < 1):
    raise ValueError(f"--seeds must be a positive integer, got "
                     f"{options.seeds!r}.")
  if options.train_steps is not None and options.train_steps < 1:
    raise ValueError(f"--train_steps must be positive, got "
                     f"{options.train_steps}.")
  for task in options.glue_tasks:
    glue_data.get_task(task)  # Names the unknown task.
  records = [options.train_data, options.validation_data]
  if any(records) and not all(records):
    raise ValueError("--train_data and --validation_data go together.")
  if all(records):
    if options.corpus:
      raise ValueError("Give --corpus or --train_data/--validation_data, "
                       "not both.")
    if not options.vocab_file:
      raise ValueError("--train_data needs --vocab_file (the vocabulary the "
                       "records were made with; GLUE is converted with it).")
    for flag, pattern in (("train_data", options.train_data),
                          ("validation_data", options.validation_data),
                          ("vocab_file", options.vocab_file)):
      if not tf.io.gfile.glob(pattern):
        raise ValueError(f"--{flag}={pattern}: no such file.")
  elif options.vocab_file:
    raise ValueError("--vocab_file is only used with --train_data (with "
                     "--corpus the vocabulary is learned).")
  for path in options.corpus:
    if not tf.io.gfile.exists(path):
      raise ValueError(f"--corpus: {path} does not exist.")
  return SCALES[options.scale]


def glue_tasks_present(glue_dir: str, tasks: Sequence[str]
                       ) -> Dict[str, Optional[str]]:
  """{task: None if its train and dev files are in `glue_dir`, else why not}."""
  status = {}
  for task in tasks:
    spec = glue_data.get_task(task)
    missing = [name for _, name in spec.split_files
               if not tf.io.gfile.exists(
                   os.path.join(glue_dir or "", spec.dir_name, name))]
    status[spec.name] = (
        None if glue_dir and not missing else
        f"{os.path.join(glue_dir or '<no --glue_dir>', spec.dir_name)} lacks "
        f"{', '.join(missing) or 'the task'}")
  return status


def pretraining_config(options: Options, scale: Scale, arch: str, seed: int,
                       data: Dict[str, object]) -> cfg.ExperimentConfig:
  """`realformer/pretraining` for one (architecture, seed) of the plan."""
  config = exp_factory.get_exp_config(experiments.PRETRAINING)
  files = [os.path.join(_MODELS_DIR, scale.size_yaml)] if scale.size_yaml else []
  if scale.recipe_yaml:
    files.append(os.path.join(_EXPERIMENTS_DIR, scale.recipe_yaml))
  files.append(os.path.join(_MODELS_DIR, ARCHS[arch][1]))
  for path in files:
    config = hyperparams.override_params_dict(config, path, is_strict=True)
  steps = options.train_steps or scale.train_steps
  warmup = min(scale.warmup_steps, max(steps // 10, 1))
  encoder = dict(scale.encoder, vocab_size=int(data["vocab_size"]))
  hidden = encoder.get("hidden_size",
                       config.task.model.encoder.get().hidden_size)
  data_shape = dict(seq_length=scale.seq_length,
                    max_predictions_per_seq=scale.max_predictions,
                    global_batch_size=scale.batch_size, seed=seed)
  config.override({
      "task": {
          "vocab_file": data["vocab_file"],
          "model": {"encoder": {"any": encoder},
                    "cls_heads": [{"inner_dim": hidden, "num_classes": 2,
                                   "dropout_rate": 0.1,
                                   "name": "next_sentence"}]},
          "train_data": dict(data_shape, input_path=data["train_file"]),
          "validation_data": dict(data_shape, input_path=data["eval_file"],
                                  drop_remainder=False),
      },
      "trainer": {
          "train_steps": steps,
          "validation_interval": max(steps // scale.evals, 1),
          "validation_steps": -1,
          "steps_per_loop": max(min(steps // scale.evals, 1000), 1),
          "summary_interval": max(min(steps // scale.evals, 1000), 1),
          "checkpoint_interval": max(steps // scale.evals, 1),
          "optimizer_config": {
              "learning_rate": {"polynomial": {
                  "initial_learning_rate": scale.learning_rate * ARCHS[arch][2],
                  "decay_steps": steps}},
              "warmup": {"polynomial": {"warmup_steps": warmup}},
          },
      },
  }, is_strict=True)
  if options.scale == "tiny":  # Sized for a CPU.
    config.runtime.distribution_strategy = "one_device"
  for path in options.config_files:
    config = hyperparams.override_params_dict(config, path, is_strict=True)
  if options.params_override:
    config = hyperparams.override_params_dict(config, options.params_override,
                                              is_strict=True)
  config.validate()
  return config


def prepare_data(options: Options, scale: Scale) -> Dict[str, object]:
  """The pre-training records and vocabulary every run shares (built once).

  Returns:
    dict(train_file, eval_file, vocab_file, vocab_size, source).
  """
  if options.train_data:
    vocab_size = sum(1 for line in pretraining_data.read_lines(
        options.vocab_file) if line.strip())
    return dict(train_file=options.train_data,
                eval_file=options.validation_data,
                vocab_file=options.vocab_file, vocab_size=vocab_size,
                source=f"records {options.train_data}")
  data_dir = os.path.join(options.output_dir, "data")
  corpus = list(options.corpus) or default_corpus()
  source = ", ".join(corpus) if corpus else "the quickstart's stdlib corpus"
  if corpus and not options.corpus:
    # WikiText is not in BERT's one-sentence-per-line format: rewrite it.
    documents = []
    for path in corpus:
      documents.extend(wikitext_documents(path))
    converted = os.path.join(data_dir, "wikitext2_documents.txt")
    if not tf.io.gfile.exists(converted):
      tf.io.gfile.makedirs(data_dir)
      quickstart_corpus.write_documents(converted, documents)
    corpus = [converted]
  data = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=corpus or None, vocab_size=scale.vocab_size,
      max_seq_length=scale.seq_length,
      max_predictions_per_seq=scale.max_predictions)
  return dict(data, source=source)


def make_plan(options: Options) -> Plan:
  """Checks the options, builds the data and lists every pre-training run."""
  scale = _check_options(options)
  data = prepare_data(options, scale)
  status = glue_tasks_present(options.glue_dir, options.glue_tasks)
  pretrain = [
      PretrainRun(arch=arch, seed=seed,
                  model_dir=pretrain_dir(options.output_dir, arch, seed),
                  config=pretraining_config(options, scale, arch, seed, data))
      for seed in range(options.seeds) for arch in options.archs]
  return Plan(options=options, scale=scale, data=data,
              glue_tasks=[t for t, why in status.items() if why is None],
              pretrain=pretrain,
              skipped_tasks={t: why for t, why in status.items() if why})


def pretrain_dir(output_dir: str, arch: str, seed: int) -> str:
  return os.path.join(output_dir, "pretrain", arch, f"seed{seed}")


def finetune_root(output_dir: str, arch: str, seed: int) -> str:
  return os.path.join(output_dir, "finetune", arch, f"seed{seed}")


def convert_glue(plan: Plan) -> str:
  """GLUE TSVs -> records with the pre-training vocabulary (once per task)."""
  out_dir = os.path.join(plan.options.output_dir, "glue_data")
  for task in plan.glue_tasks:
    if not tf.io.gfile.exists(glue_data.meta_data_path(out_dir, task)):
      glue_data.convert(task, plan.data["vocab_file"], out_dir,
                        max_seq_length=plan.scale.glue_seq_length,
                        glue_dir=plan.options.glue_dir)
  return out_dir


def finetune_runs(plan: Plan, run: PretrainRun, task: str,
                  glue_dir: str) -> List[sweep.RunSpec]:
  """The sweep's grid for one task, initialised from one pre-training run.

  The fine-tuning seed is the pre-training seed, so the sweep's median over
  seeds is the median over pre-training runs.
  """
  config = sweep.base_config(task, data_dir=glue_dir)
  config.override({"task": {
      "init_checkpoint": run.model_dir,
      "model": {"encoder": run.config.task.model.encoder.as_dict()},
      "train_data": {"seq_length": plan.scale.glue_seq_length},
      "validation_data": {"seq_length": plan.scale.glue_seq_length},
  }}, is_strict=True)
  config.runtime.distribution_strategy = (
      run.config.runtime.distribution_strategy)
  train_size = sweep.num_train_examples(config)
  runs = sweep.plan_runs(task, finetune_root(plan.options.output_dir,
                                             run.arch, run.seed),
                         plan.scale.glue_epochs,
                         plan.scale.glue_learning_rates, 1, config,
                         train_size)
  for spec in runs:
    spec.seed = run.seed
    spec.config.task.train_data.seed = run.seed
    spec.model_dir = os.path.join(os.path.dirname(spec.model_dir),
                                  f"seed{run.seed}")
  return runs


Runner = Callable[[cfg.ExperimentConfig, str, int], Dict]


def _pretrain_runner(config: cfg.ExperimentConfig, model_dir: str,
                     seed: int) -> Dict:
  return sweep.train_and_evaluate(config, model_dir, seed,
                                  mode="train_and_eval")


class Progress:
  """One line per step of the plan: which, how far, time left.

  A step finished by an earlier invocation says "done" and counts towards
  the percentage but not towards the rate the ETA is computed from: only
  work done by this invocation measures its speed.
  """

  def __init__(self, total_units: float):
    self.total = max(total_units, 1e-9)
    self.done = 0.0
    self.worked = 0.0
    self.start = time.time()

  def line(self, index: int, count: int, what: str,
           finished: bool = False) -> str:
    elapsed = time.time() - self.start
    if finished:
      message = (f"[reproduce {index}/{count}] {what}: done | "
                 f"{_duration(elapsed)} elapsed")
    else:
      remaining = self.total - self.done
      eta = ("?" if self.worked <= 0 else
             _duration(elapsed / self.worked * remaining))
      message = (f"[reproduce {index}/{count}] {what} | "
                 f"{100 * self.done / self.total:.0f}% done, "
                 f"{_duration(elapsed)} elapsed, ETA {eta}")
    logging.info(message)
    print(message, flush=True)
    return message

  def advance(self, units: float, worked: bool = True) -> None:
    """`units` more done; `worked`: by this invocation (not skipped)."""
    self.done += units
    if worked:
      self.worked += units


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds}s"
  if seconds < 3600:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _finetune_steps(plan: Plan, glue_dir: str) -> Dict[str, int]:
  """Train steps of one grid sweep per task (for the progress estimate)."""
  steps = {}
  for task in plan.glue_tasks:
    size = glue_data.read_meta_data(
        glue_data.meta_data_path(glue_dir, task))["train_data_size"]
    steps[task] = sum(
        recipe.train_steps(size, e) for e in plan.scale.glue_epochs
    ) * len(plan.scale.glue_learning_rates)
  return steps


def estimate_seconds(plan: Plan, finetune_steps: Dict[str, int]) -> float:
  """Rough 2-core CPU estimate for `--dry_run` (tiny scale only; else nan)."""
  if plan.scale.seconds_per_step is None:
    return float("nan")
  per_run = plan.pretrain[0].config.trainer.train_steps + sum(
      finetune_steps.values())
  # Fine-tuning steps cost about what pre-training steps do at these sizes;
  # each run adds ~15 s of graph building and evaluation.
  runs = len(plan.pretrain) * (1 + len(finetune_steps) * len(
      plan.scale.glue_epochs) * len(plan.scale.glue_learning_rates))
  return len(plan.pretrain) * per_run * plan.scale.seconds_per_step + 15 * runs


def describe(plan: Plan, finetune_steps: Dict[str, int]) -> str:
  """The plan as text (what `--dry_run` prints)."""
  o, s = plan.options, plan.scale
  encoder = plan.pretrain[0].config.task.model.encoder.get()
  lines = [f"Scale {o.scale}: {encoder.num_layers} layers, hidden "
           f"{encoder.hidden_size}, {encoder.num_attention_heads} heads, "
           f"feed-forward {encoder.intermediate_size}.",
           f"Data: {plan.data['source']} (vocabulary {plan.data['vocab_size']}"
           f" tokens); seq {s.seq_length}, batch {s.batch_size}.",
           f"Pre-training: {len(plan.pretrain)} runs ({', '.join(o.archs)} x "
           f"{o.seeds} seeds), "
           f"{plan.pretrain[0].config.trainer.train_steps} steps each."]
  for run in plan.pretrain:
    lines.append(f"  {_status(run.model_dir, PRETRAIN_RESULT):>6s}  "
                 f"{run.model_dir}")
  grid = f"epochs {list(s.glue_epochs)} x lr {list(s.glue_learning_rates)}"
  for task, steps in finetune_steps.items():
    lines.append(f"Fine-tuning {task}: {grid}, {steps} steps per "
                 "pre-training run.")
  for task, why in plan.skipped_tasks.items():
    lines.append(f"Fine-tuning {task}: skipped ({why}).")
  lines.append(f"Attention analysis: seed 0 of {', '.join(o.archs)}, "
               f"{s.analysis_examples} examples.")
  estimate = estimate_seconds(plan, finetune_steps)
  lines.append("Estimated time: " + (
      f"about {_duration(estimate)} on 2 CPU cores (runs already done "
      "included)" if not np.isnan(estimate) else
      "no estimate at this scale (accelerator-sized)."))
  return "\n".join(lines)


def _status(model_dir: str, result_file: str) -> str:
  if tf.io.gfile.exists(os.path.join(model_dir, result_file)):
    return "done"
  if tf.train.latest_checkpoint(model_dir):
    return "resume"
  return "new"


def run_pretraining(run: PretrainRun, runner: Runner) -> Dict:
  """Trains (or resumes) one pre-training run; its result is cached."""
  path = os.path.join(run.model_dir, PRETRAIN_RESULT)
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      return json.load(f)
  tf.io.gfile.makedirs(run.model_dir)
  start = time.time()
  output = runner(run.config, run.model_dir, run.seed)
  result = {"arch": run.arch, "seed": run.seed,
            "train_steps": run.config.trainer.train_steps,
            "global_step": output.get("global_step"),
            "seconds": time.time() - start,
            "eval_logs": output["eval_logs"]}
  utils.write_json_atomically(path, result)
  return result


def execute(plan: Plan, runner: Runner = _pretrain_runner,
            finetune_runner: sweep.Runner = sweep.train_and_evaluate,
            analyse: Callable[..., Dict] = analysis_runner.run_analysis
            ) -> Dict:
  """Runs everything the plan lists that is not done; writes the outputs."""
  o = plan.options
  glue_dir = convert_glue(plan)
  finetune_steps = _finetune_steps(plan, glue_dir)
  pretrain_steps = plan.pretrain[0].config.trainer.train_steps
  per_run = pretrain_steps + sum(finetune_steps.values())
  progress = Progress(len(plan.pretrain) * per_run + len(o.archs))
  count = len(plan.pretrain) * (1 + len(plan.glue_tasks)) + len(o.archs)
  index = 0
  pretrain_results, glue_results = {}, {}
  for run in plan.pretrain:
    index += 1
    status = _status(run.model_dir, PRETRAIN_RESULT)
    what = "" if status == "done" else f"{status}, "
    progress.line(index, count, f"pre-train {run.arch} seed {run.seed} "
                  f"({what}{pretrain_steps} steps)",
                  finished=status == "done")
    pretrain_results.setdefault(run.arch, []).append(
        run_pretraining(run, runner))
    progress.advance(pretrain_steps, worked=status != "done")
    for task in plan.glue_tasks:
      index += 1
      runs = finetune_runs(plan, run, task, glue_dir)
      finished = all(sweep.run_status(r) == "done" for r in runs)
      progress.line(index, count, f"fine-tune {task} from {run.arch} seed "
                    f"{run.seed} ({finetune_steps[task]} steps)",
                    finished=finished)
      results = sweep.execute(runs, finetune_runner)
      glue_results.setdefault(run.arch, {}).setdefault(task, []).extend(
          results)
      progress.advance(finetune_steps[task], worked=not finished)
  analyses = {}
  for arch in o.archs:
    index += 1
    out_dir = os.path.join(o.output_dir, "analysis", arch)
    summary_path = os.path.join(out_dir, "summary.json")
    finished = tf.io.gfile.exists(summary_path)
    progress.line(index, count, f"attention analysis of {arch} seed 0",
                  finished=finished)
    if not finished:
      analyse(model_dir=pretrain_dir(o.output_dir, arch, 0),
              output_dir=out_dir,
              num_examples=plan.scale.analysis_examples)
    analyses[arch] = out_dir
    progress.advance(1, worked=not finished)
  results = write_results(plan, pretrain_results, glue_results, analyses)
  progress.line(count, count, os.path.join(o.output_dir, RESULTS_MD),
                finished=True)
  return results


PRETRAIN_METRICS = ("masked_lm_accuracy", "lm_example_loss")


def _median_std(values: Sequence[float]) -> Dict[str, object]:
  return {"median": float(np.median(values)), "std": float(np.std(values)),
          "values": [float(v) for v in values]}


def summarize_pretraining(results: Dict[str, List[Dict]]) -> Dict:
  """{arch: {metric: {median, std, values}}} over seeds (numpy std, ddof=0)."""
  return {arch: {m: _median_std([r["eval_logs"][m] for r in runs])
                 for m in PRETRAIN_METRICS}
          for arch, runs in results.items()}


def read_curves(model_dir: str, tag: str = "masked_lm_accuracy"
                ) -> Dict[str, List[List[float]]]:
  """{"train": [[step, value], ...], "validation": [...]} from TensorBoard.

  A resumed run writes a new event file and may log a step again (an
  evaluation or summary written before the kill, repeated after the
  resume): one point per step, the last written (by wall time) wins.
  """
  curves = {}
  for split in ("train", "validation"):
    by_step = {}
    for path in sorted(tf.io.gfile.glob(
        os.path.join(model_dir, split, "events.out.tfevents.*"))):
      for event in tf.compat.v1.train.summary_iterator(path):
        for value in event.summary.value:
          if value.tag == tag:
            number = (float(tf.make_ndarray(value.tensor))
                      if value.HasField("tensor") else value.simple_value)
            step = int(event.step)
            if step not in by_step or event.wall_time >= by_step[step][0]:
              by_step[step] = (event.wall_time, number)
    curves[split] = [[step, number]
                     for step, (_, number) in sorted(by_step.items())]
  return curves


# One style per architecture (in `--archs` order), so coinciding curves stay
# visible: a thin dashed line over a thick solid one, hollow markers of
# different shapes and sizes.
CURVE_STYLES = (
    dict(linestyle="-", marker="o", linewidth=2.6, markersize=8),
    dict(linestyle="--", marker="s", linewidth=1.8, markersize=6),
    dict(linestyle=":", marker="^", linewidth=1.4, markersize=5),
    dict(linestyle="-.", marker="x", linewidth=1.0, markersize=4))


def plot_curves(curves: Dict[str, Dict[int, Dict]], path: str
                ) -> matplotlib.figure.Figure:
  """Train and eval MLM accuracy of every run, one style per architecture."""
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True,
                           layout="constrained")
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for i, (arch, by_seed) in enumerate(curves.items()):
    style = CURVE_STYLES[i % len(CURVE_STYLES)]
    for seed, run in sorted(by_seed.items()):
      for ax, split in zip(axes, ("train", "validation")):
        if run[split]:
          steps, values = zip(*run[split])
          ax.plot(steps, values, color=colours[i % len(colours)],
                  markerfacecolor="none", alpha=0.85,
                  markevery=max(1, len(steps) // 12), **style,
                  label=ARCHS[arch][0] if seed == min(by_seed) else None)
  for ax, title in zip(axes, ("training MLM accuracy",
                              "held-out MLM accuracy")):
    ax.set_title(title, fontsize=12)
    ax.set_xlabel("step", fontsize=11)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.tick_params(labelsize=10)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("masked_lm_accuracy", fontsize=11)
  # Above the panels, where it hides no curve.
  by_label = {}
  for ax in axes:
    for handle, label in zip(*ax.get_legend_handles_labels()):
      by_label.setdefault(label, handle)
  fig.legend(by_label.values(), by_label.keys(), loc="outside upper center",
             ncol=max(len(by_label), 1), fontsize=10, frameon=False)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return fig


def plot_attention(analyses: Dict[str, str], path: str
                   ) -> matplotlib.figure.Figure:
  """Per-head attention entropy and JSD of each architecture, side by side.

  Drawn from each analysis' `summary.json` (median and quartiles per head),
  one column per architecture, so the fonts are the figure's own.
  """
  summaries = {}
  for arch, out_dir in analyses.items():
    with tf.io.gfile.GFile(os.path.join(out_dir, "summary.json")) as f:
      summaries[ARCHS[arch][0]] = json.load(f)["models"][0]
  return plots.summary_figure(summaries, path)


def _pm(stat: Dict, scale: float = 100.0) -> str:
  """Median ± std over seeds; one seed has no spread to show."""
  if len(stat["values"]) < 2:
    return f"{scale * stat['median']:.2f} (1 seed)"
  return f"{scale * stat['median']:.2f} ± {scale * stat['std']:.2f}"


def format_results(plan: Plan, pretraining: Dict, glue: Dict) -> str:
  """`results.md`: the paper's Table 2 and Table 3 shapes."""
  o, s = plan.options, plan.scale
  encoder = plan.pretrain[0].config.task.model.encoder.get()
  steps = plan.pretrain[0].config.trainer.train_steps
  lines = [
      f"# Post-LN vs Pre-LN vs RealFormer, scale `{o.scale}`", "",
      f"Encoder: {encoder.num_layers} layers, hidden {encoder.hidden_size}, "
      f"{encoder.num_attention_heads} heads, feed-forward "
      f"{encoder.intermediate_size}; vocabulary {plan.data['vocab_size']} "
      f"({plan.data['source']}).",
      f"Pre-training: {steps} steps, batch {s.batch_size}, seq "
      f"{s.seq_length}, {o.seeds} seed(s) per architecture with identical "
      "data order and steps. Numbers: " + (
          "median ± std over seeds." if o.seeds > 1 else
          "one seed per architecture, so no spread (\"1 seed\"); "
          "`--seeds=3` or more gives median and std."), "",
      "## Pre-training (paper Table 2): held-out masked LM", "",
      "| Architecture | MLM accuracy (%) | MLM loss |",
      "|---|---|---|"]
  for arch in o.archs:
    if arch in pretraining:
      p = pretraining[arch]
      lines.append(f"| {ARCHS[arch][0]} | {_pm(p['masked_lm_accuracy'])} | "
                   f"{_pm(p['lm_example_loss'], 1.0)} |")
  lines.append("")
  if glue:
    tasks = sorted({t for summary in glue.values() for t in summary["tasks"]})
    header = ["Architecture"] + [
        f"{t} ({'/'.join(glue_data.get_task(t).metrics)})" for t in tasks]
    lines += ["## Fine-tuning (paper Table 3): GLUE dev, x100", "",
              f"Grid: epochs {list(s.glue_epochs)} x learning rates "
              f"{list(s.glue_learning_rates)}; best point by the median of "
              "the task's main metric over the pre-training seeds.", "",
              "| " + " | ".join(header + ["Overall"]) + " |",
              "|" + "---|" * (len(header) + 1)]
    for arch in o.archs:
      if arch not in glue:
        continue
      summary = glue[arch]
      cells = []
      for task in tasks:
        best = summary["tasks"][task]["best"]["metrics"]
        cells.append(" / ".join(_pm(best[m]) for m in
                                glue_data.get_task(task).metrics))
      lines.append(f"| {ARCHS[arch][0]} | " + " | ".join(cells) +
                   f" | {100 * summary['overall']:.2f} |")
    if o.scale == "large":
      cells = [" / ".join(
          f"{100 * PAPER_GLUE_LARGE_REALFORMER[t][m]:.2f}"
          for m in glue_data.get_task(t).metrics)
               if t in PAPER_GLUE_LARGE_REALFORMER else "" for t in tasks]
      lines.append("| RealFormer, paper (BERT-Large) | " + " | ".join(cells)
                   + " | |")
    lines.append("")
  for task, why in plan.skipped_tasks.items():
    lines.append(f"- {task} not fine-tuned: {why}.")
  lines += [
      "", f"Curves: `{CURVES_PNG}`; attention entropy and JSD of seed 0: "
      f"`{ATTENTION_PNG}` (per architecture: `analysis/<arch>/`).",
      "", "The paper's numbers are BERT-sized models pre-trained for 1M steps "
      "on Wikipedia + BooksCorpus; at a smaller scale the ordering of the "
      "architectures need not be the paper's."]
  return "\n".join(lines) + "\n"


def write_results(plan: Plan, pretrain_results: Dict[str, List[Dict]],
                  glue_results: Dict[str, Dict[str, List[Dict]]],
                  analyses: Dict[str, str]) -> Dict:
  """Writes results.json, results.md, curves.png and attention.png."""
  o = plan.options
  pretraining = summarize_pretraining(pretrain_results)
  glue = {arch: sweep.summarize(by_task)
          for arch, by_task in glue_results.items()}
  curves = {arch: {r["seed"]: read_curves(pretrain_dir(o.output_dir, arch,
                                                       r["seed"]))
                   for r in runs}
            for arch, runs in pretrain_results.items()}
  results = {"scale": o.scale, "archs": list(o.archs), "seeds": o.seeds,
             "data": {k: str(v) for k, v in plan.data.items()},
             "pretraining": pretraining,
             "pretraining_runs": pretrain_results,
             "glue": glue, "curves": curves, "analysis": analyses}
  utils.write_json_atomically(os.path.join(o.output_dir, RESULTS_JSON),
                              results)
  text = format_results(plan, pretraining, glue)
  with tf.io.gfile.GFile(os.path.join(o.output_dir, RESULTS_MD), "w") as f:
    f.write(text)
  plot_curves(curves, os.path.join(o.output_dir, CURVES_PNG))
  plot_attention(analyses, os.path.join(o.output_dir, ATTENTION_PNG))
  print(text, flush=True)
  return results


FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("output_dir", None, "Where every run and result goes.")
  flags.DEFINE_enum("scale", "tiny", list(SCALES), "Model size and budget.")
  flags.DEFINE_list("archs", list(DEFAULT_ARCHS),
                    f"Architectures, some of {', '.join(ARCHS)}.")
  flags.DEFINE_integer("seeds", 3, "Pre-training seeds per architecture.")
  flags.DEFINE_list("corpus", [], "BERT-format text files (one sentence per "
                    "line, blank line between documents) to pre-train on; "
                    "default: WikiText-2 from the shared data dir, else the "
                    "quickstart's stdlib corpus.")
  flags.DEFINE_string("train_data", "", "Pre-training TFRecords (glob), "
                      "instead of --corpus.")
  flags.DEFINE_string("validation_data", "", "Held-out pre-training "
                      "TFRecords (glob), with --train_data.")
  flags.DEFINE_string("vocab_file", "", "The vocabulary of --train_data.")
  flags.DEFINE_list("glue_tasks", list(DEFAULT_GLUE_TASKS),
                    "GLUE tasks to fine-tune on (those present in --glue_dir).")
  flags.DEFINE_string("glue_dir", None, "GLUE TSVs, one directory per task; "
                      "default: <data dir>/glue.")
  flags.DEFINE_integer("train_steps", None, "Pre-training steps (default: the "
                       "scale's).")
  flags.DEFINE_multi_string("config_file", None, "More YAML for every "
                            "pre-training run (e.g. a runtime file).")
  flags.DEFINE_string("params_override", "", "Overrides for every "
                      "pre-training run.")
  flags.DEFINE_bool("dry_run", False, "Print the plan and the estimated time "
                    "(builds the data, trains nothing).")


def options_from_flags() -> Options:
  glue_dir = FLAGS.glue_dir
  if glue_dir is None:
    glue_dir = os.path.join(pretraining_data.default_data_dir(), "glue")
  return Options(output_dir=FLAGS.output_dir, scale=FLAGS.scale,
                 archs=tuple(FLAGS.archs), seeds=FLAGS.seeds,
                 corpus=tuple(FLAGS.corpus), train_data=FLAGS.train_data,
                 validation_data=FLAGS.validation_data,
                 vocab_file=FLAGS.vocab_file,
                 glue_tasks=tuple(FLAGS.glue_tasks), glue_dir=glue_dir,
                 train_steps=FLAGS.train_steps,
                 config_files=tuple(FLAGS.config_file or ()),
                 params_override=FLAGS.params_override)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  try:
    plan = make_plan(options_from_flags())
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  if FLAGS.dry_run:
    glue_dir = convert_glue(plan)
    print(describe(plan, _finetune_steps(plan, glue_dir)))
    return
  execute(plan)


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["output_dir"])
  app.run(main)
