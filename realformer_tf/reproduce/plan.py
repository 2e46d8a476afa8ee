"""The reproduction's plan: scales, options, every run with its config.

`make_plan` lists every run in execution order, each pre-training run then
its GLUE grid, and writes nothing: with the data `run.prepare` built, it is
the plan that runs; without, the one `--dry_run` prints.
"""

import dataclasses
import os
from typing import ClassVar, Dict, List, Optional, Sequence

import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from realformer_tf import utils
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import glue as glue_data
from realformer_tf.data import glue_tasks
from realformer_tf.data import pretraining_data
from realformer_tf.data import wikitext
from realformer_tf.reproduce import tables
from realformer_tf.training import runs
from realformer_tf.training import sweep

# official_configs/experiments and official_configs/models.
_EXPERIMENTS_DIR = os.path.dirname(finetuning.GLUE_YAML_DIR)
_MODELS_DIR = os.path.join(os.path.dirname(_EXPERIMENTS_DIR), "models")

# What a reproduction writes in --output_dir (`check_options` refuses others).
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
CURVES_PNG = "curves.png"
ATTENTION_PNG = "attention.png"
# The report: results.json, the manifest of the others (one output set).
REPORT = (RESULTS_JSON, RESULTS_MD, CURVES_PNG, ATTENTION_PNG)
OUTPUT_ENTRIES = (*REPORT, "data", "glue_data", "pretrain", "finetune",
                  "analysis")
# Architecture -> (label, models file, learning-rate multiplier); the paper's
# "RealFormer, lr 2e-4" row is "realformer_2xlr".
ARCHS = {
    "post_ln": (tables.ARCH_LABELS["post_ln"], "arch_post_ln.yaml", 1.0),
    "pre_ln": (tables.ARCH_LABELS["pre_ln"], "arch_pre_ln.yaml", 1.0),
    "realformer": (tables.ARCH_LABELS["realformer"], "arch_realformer.yaml",
                   1.0),
    "realformer_2xlr": ("RealFormer (2x lr)", "arch_realformer.yaml", 2.0),
}
DEFAULT_ARCHS = ("post_ln", "pre_ln", "realformer")
DEFAULT_GLUE_TASKS = ("mrpc", "stsb", "cola")


@dataclasses.dataclass(frozen=True)
class Scale:
  """Model size and budget of one `--scale`.

  `size_yaml` (None: `encoder` only), then `recipe_yaml`, then `encoder`
  overrides; `cpu_cost`: what `--dry_run`'s estimate counts (tiny only).
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
  cpu_cost: Optional["CpuCost"] = None


@dataclasses.dataclass(frozen=True)
class CpuCost:
  """Measured seconds of a reproduction's parts on 2 loaded CPU cores: the
  data, each run's start and steps, the attention analysis of each
  architecture; `FREE_MACHINE_SPEEDUP` gives the estimate's low end."""
  data: float = 110.0
  pretrain_start: float = 55.0
  pretrain_step: float = 0.32
  finetune_start: float = 90.0
  finetune_step: float = 0.18
  analysis: float = 75.0


FREE_MACHINE_SPEEDUP = 3.5


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
        analysis_examples=512, cpu_cost=CpuCost()),
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
  """What the command line asks for (see `__main__.define_flags`)."""
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


@dataclasses.dataclass(kw_only=True)
class PretrainRun(runs.RunSpec):
  """One (architecture, seed) pre-training run."""
  arch: str

  RESULT_FILE: ClassVar[str] = "pretrain_result.json"
  MODE: ClassVar[str] = "train_and_eval"  # The eval curve: `Scale.evals`.

  def details(self) -> str:
    return f"pre-train {self.arch} seed {self.seed}, {self.train_steps} steps"

  def make_result(self, output: Dict, seconds: float) -> Dict:
    return {"arch": self.arch, "seed": self.seed,
            "train_steps": self.train_steps,
            "global_step": output.get("global_step"), "seconds": seconds,
            "eval_logs": output["eval_logs"]}


@dataclasses.dataclass
class Plan:
  """Every run of a reproduction. `data`: dict(train_file, eval_file,
  vocab_file, vocab_size, source); `glue_sizes`: {task: train examples};
  `finetune`: {pre-training model_dir: its fine-tuning runs}."""
  options: Options
  scale: Scale
  data: Dict[str, object]
  glue_sizes: Dict[str, int]
  pretrain: List[PretrainRun]
  finetune: Dict[str, List[sweep.GlueRun]]
  skipped_tasks: Dict[str, str]

  @property
  def all_runs(self) -> List[runs.RunSpec]:
    """Each pre-training run, then the fine-tuning runs it initialises."""
    return [r for p in self.pretrain for r in [p] + self.finetune[p.model_dir]]


def check_options(options: Options) -> Scale:
  """Raises a ValueError naming the flag for any bad option."""
  if not options.output_dir:
    raise ValueError("--output_dir is required.")
  if tf.io.gfile.exists(options.output_dir):
    tables.check_output_dir(
        options.output_dir, tf.io.gfile.listdir(options.output_dir)
        if tf.io.gfile.isdir(options.output_dir) else None, OUTPUT_ENTRIES,
        REPORT, utils.GFILE_OPS)
  tables.check_choice("scale", options.scale, SCALES)
  tables.check_archs(options.archs, ARCHS)
  if options.seeds is None:  # `check_positive` lets None pass.
    raise ValueError("--seeds must be a positive integer, got None.")
  tables.check_positive("seeds", options.seeds)
  tables.check_positive("train_steps", options.train_steps)
  for task in options.glue_tasks:
    glue_tasks.get_task(task)  # Names the unknown task.
  records = [options.train_data, options.validation_data]
  if any(records) and not all(records):
    raise ValueError("--train_data and --validation_data go together.")
  if all(records):
    if options.corpus:
      raise ValueError("Give --corpus or --train_data, not both.")
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
    spec = glue_tasks.get_task(task)
    missing = [name for _, name in spec.split_files
               if not tf.io.gfile.exists(
                   os.path.join(glue_dir or "", spec.dir_name, name))]
    status[spec.name] = (
        None if glue_dir and not missing else
        f"{os.path.join(glue_dir or '<no --glue_dir>', spec.dir_name)} lacks "
        f"{', '.join(missing) or 'the task'}")
  return status


def _vocab_size(vocab_file: str) -> int:
  return sum(1 for line in pretraining_data.read_lines(vocab_file)
             if line.strip())


def corpus_files(options: Options) -> List[str]:
  """`--corpus`, else WikiText-2 from the data dir, else [] (stdlib corpus)."""
  return list(options.corpus) or wikitext.default_files()


def corpus_source(corpus: Sequence[str]) -> str:
  return ", ".join(corpus) if corpus else "the quickstart's stdlib corpus"


def expected_data(options: Options, scale: Scale) -> Dict[str, object]:
  """`run.prepare_data`'s result, unbuilt: the records given, or the paths
  `prepare_quickstart_data` writes under `OUT/data` (vocabulary size: the
  scale's target until it is learned)."""
  if options.train_data:
    return dict(train_file=options.train_data,
                eval_file=options.validation_data,
                vocab_file=options.vocab_file,
                vocab_size=_vocab_size(options.vocab_file),
                source=f"records {options.train_data}")
  corpus = corpus_files(options)
  data_dir = os.path.join(options.output_dir, "data")
  vocab_file = os.path.join(data_dir, "vocab.txt")
  built = tf.io.gfile.exists(vocab_file)
  return dict(train_file=os.path.join(data_dir, "train.tfrecord"),
              eval_file=os.path.join(data_dir, "eval.tfrecord"),
              vocab_file=vocab_file,
              vocab_size=_vocab_size(vocab_file) if built else scale.vocab_size,
              source=corpus_source(corpus) + (
                  "" if built else "; vocabulary not learned yet"))


def glue_records_dir(output_dir: str) -> str:
  return os.path.join(output_dir, "glue_data")


def glue_train_size(options: Options, task: str) -> int:
  """Train examples: the converted records' meta data, else the TSV rows."""
  meta = glue_data.meta_data_path(glue_records_dir(options.output_dir), task)
  if tf.io.gfile.exists(meta):
    return glue_data.read_meta_data(meta)["train_data_size"]
  spec = glue_tasks.get_task(task)
  train_tsv = dict((split, name) for split, name in spec.split_files)["train"]
  return len(glue_tasks.read_tsv_examples(
      spec, os.path.join(options.glue_dir, spec.dir_name, train_tsv)))


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
  per_eval = max(steps // scale.evals, 1)
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
          "train_steps": steps, "validation_interval": per_eval,
          "validation_steps": -1, "checkpoint_interval": per_eval,
          "steps_per_loop": min(per_eval, 1000),
          "summary_interval": min(per_eval, 1000),
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


def finetune_runs(options: Options, scale: Scale, run: PretrainRun, task: str,
                  train_size: int) -> List[sweep.GlueRun]:
  """The sweep's grid for one task, initialised from one pre-training run.

  The fine-tuning seed is the pre-training seed, so the sweep's median over
  seeds is the median over pre-training runs.
  """
  config, _ = sweep.base_config(
      task, data_dir=glue_records_dir(options.output_dir))
  config.override({"task": {
      "init_checkpoint": run.model_dir,
      "model": {"encoder": run.config.task.model.encoder.as_dict()},
      "train_data": {"seq_length": scale.glue_seq_length},
      "validation_data": {"seq_length": scale.glue_seq_length},
  }}, is_strict=True)
  config.runtime.distribution_strategy = (
      run.config.runtime.distribution_strategy)
  root = os.path.join(options.output_dir, "finetune", run.arch,
                      f"seed{run.seed}")
  return sweep.plan_runs(task, root, scale.glue_epochs,
                         scale.glue_learning_rates, [run.seed], config,
                         train_size)


def pretrain_dir(output_dir: str, arch: str, seed: int) -> str:
  return os.path.join(output_dir, "pretrain", arch, f"seed{seed}")


def make_plan(options: Options, data: Optional[Dict[str, object]] = None
              ) -> Plan:
  """Checks the options and lists every run; reads, writes nothing.

  Args:
    options: The command line's options.
    data: The built data (`run.prepare_data`); None: `expected_data`.
  """
  scale = check_options(options)
  data = data or expected_data(options, scale)
  status = glue_tasks_present(options.glue_dir, options.glue_tasks)
  glue_sizes = {task: glue_train_size(options, task)
                for task, why in status.items() if why is None}
  pretrain = [
      PretrainRun(arch=arch, seed=seed,
                  model_dir=pretrain_dir(options.output_dir, arch, seed),
                  config=pretraining_config(options, scale, arch, seed, data))
      for seed in range(options.seeds) for arch in options.archs]
  finetune = {run.model_dir: [
      r for task, size in glue_sizes.items()
      for r in finetune_runs(options, scale, run, task, size)]
              for run in pretrain}
  return Plan(options=options, scale=scale, data=data, glue_sizes=glue_sizes,
              pretrain=pretrain, finetune=finetune,
              skipped_tasks={t: why for t, why in status.items() if why})
