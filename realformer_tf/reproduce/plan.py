"""The reproduction's plan, for both faces and without TensorFlow: options,
sizes, and every run in execution order (each architecture and seed's
pre-training, then its fine-tuning runs: task x learning rate). `make_plan`
reads the inputs' existence only and writes nothing: the plan that runs is the
one `--dry_run` prints. A face (`load_face`) supplies its data, steps, checks.
"""

import dataclasses
import importlib
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import glue_tasks
from realformer_tf.data import schedule

# Face name -> its module. The only dynamic import: `--face=keras3` must never
# import the tf_keras face (TensorFlow, Model Garden) on a machine without it.
FACES = {"tf_keras": "realformer_tf.reproduce.tf_keras_face",
         "keras3": "realformer_tf.reproduce.keras3_face"}


@dataclasses.dataclass(frozen=True)
class Arch:
  """One architecture: its label, tf_keras models file, learning-rate
  multiplier and `RealFormerBackbone` arguments."""
  label: str
  models_yaml: str
  lr_multiplier: float
  backbone: Dict[str, object]


_POST_LN = dict(residual_attention="none", normalize_first=False)
_REALFORMER = dict(residual_attention="sum", normalize_first=False)
# The paper's "RealFormer, lr 2e-4" row is "realformer_2xlr".
ARCHS = {
    "post_ln": Arch("Post-LN", "arch_post_ln.yaml", 1.0, _POST_LN),
    "pre_ln": Arch("Pre-LN", "arch_pre_ln.yaml", 1.0,
                   dict(residual_attention="none", normalize_first=True)),
    "realformer": Arch("RealFormer", "arch_realformer.yaml", 1.0, _REALFORMER),
    "realformer_2xlr": Arch("RealFormer (2x lr)", "arch_realformer.yaml", 2.0,
                            _REALFORMER),
}
DEFAULT_ARCHS = ("post_ln", "pre_ln", "realformer")
DEFAULT_GLUE_TASKS = ("mrpc", "stsb", "cola")
# SQuAD v1.1, fine-tuned where --squad_dir holds both files.
SQUAD = "squad"
SQUAD_FILES = (("train", "train-v1.1.json"), ("dev", "dev-v1.1.json"))
DTYPE_POLICIES = ("auto", "float32", "mixed_bfloat16", "mixed_float16")

WRITER = "realformer_tf.reproduce"  # The module to run again.
LOCK_FILE = ".lock"
RESULT_FILE = "result.json"  # In every run's directory.
RESULTS_JSON = "results.json"  # The report's manifest (one output set).
RESULTS_MD = "results.md"
CURVES_PNG = "curves.png"
ATTENTION_PNG = "attention.png"
REPORT = (RESULTS_JSON, RESULTS_MD, CURVES_PNG, ATTENTION_PNG)
# What a reproduction writes in --output_dir (`check_output_dir` refuses
# anything else).
OUTPUT_ENTRIES = (LOCK_FILE, *REPORT, "data", "glue_data", "pretrain",
                  "finetune", "analysis")


@dataclasses.dataclass(frozen=True)
class Size:
  """Model, data shape and budget of one `--size`, for both faces.

  Warm-up: 10% of the steps, at most `max_warmup`; `evals`: held-out
  evaluations; `checkpoint_steps`, `steps_per_execution`: the keras3 face's
  defaults; `size_yaml`, `recipe_yaml`: the tf_keras face's model and recipe
  files; `cpu`: sized for a CPU (its numbers are no findings).
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
  glue_epochs: Sequence[float]
  glue_learning_rates: Sequence[float]
  checkpoint_steps: int
  steps_per_execution: int = 100
  max_positions: int = 512
  max_warmup: int = 10000
  glue_seq_length: int = 128
  squad_seq_length: int = 384  # BERT's; stride a third, question a sixth.
  glue_batch_size: int = schedule.PAPER_BATCH_SIZE
  dropout: float = 0.1
  eval_sequences: int = 8192
  analysis_examples: int = 8192
  paper: Optional[str] = None  # The paper's size these numbers compare to.
  size_yaml: Optional[str] = None
  recipe_yaml: Optional[str] = None
  cpu: bool = False


_PAPER_RECIPE = Size(
    num_layers=12, hidden_dim=768, num_heads=12, intermediate_dim=3072,
    seq_length=512, batch_size=512, max_predictions=80, train_steps=1000000,
    learning_rate=1e-4, vocab_size=30522, evals=10, checkpoint_steps=10000,
    glue_epochs=(2, 3, 4),  # The paper's GLUE grid.
    glue_learning_rates=(6e-6, 8e-6, 1e-5, 2e-5, 3e-5, 4e-5, 5e-5),
    paper="base", size_yaml="bert_base.yaml", recipe_yaml="pretrain_paper.yaml")

SIZES = {
    # A CPU in seconds a run: the CI test.
    "tiny": Size(num_layers=2, hidden_dim=32, num_heads=2, intermediate_dim=64,
                 seq_length=32, batch_size=8, max_predictions=5, train_steps=24,
                 learning_rate=1e-3, vocab_size=1000, evals=4,
                 checkpoint_steps=12, steps_per_execution=3, max_positions=64,
                 glue_seq_length=32, squad_seq_length=48, glue_epochs=(3,),
                 glue_learning_rates=(1e-4,), eval_sequences=64,
                 analysis_examples=16, cpu=True),
    # Minutes a run on 2 CPU cores, deep enough (4 layers) for the running
    # score sum to matter: 3 archs x 3 seeds in about an hour.
    "mini": Size(num_layers=4, hidden_dim=64, num_heads=2, intermediate_dim=256,
                 seq_length=64, batch_size=32, max_predictions=10,
                 train_steps=1000, learning_rate=1e-3, vocab_size=8000,
                 evals=5, checkpoint_steps=200, max_positions=128,
                 max_warmup=100, glue_seq_length=64, squad_seq_length=128,
                 glue_epochs=(3,),
                 glue_learning_rates=(1e-4,), analysis_examples=512, cpu=True),
    # BERT-Small (the paper's Table 1) at seq 128, batch 128: one GPU.
    "small": Size(num_layers=4, hidden_dim=512, num_heads=8,
                  intermediate_dim=2048, seq_length=128, batch_size=128,
                  max_predictions=20, train_steps=2000, learning_rate=5e-4,
                  vocab_size=30522, evals=10, checkpoint_steps=500,
                  glue_epochs=(3,), glue_learning_rates=(2e-5, 5e-5),
                  paper="small", size_yaml="bert_small.yaml"),
    # The paper's recipe (seq 512, batch 512, 1M steps) and GLUE grid.
    "base": _PAPER_RECIPE,
    "large": dataclasses.replace(
        _PAPER_RECIPE, num_layers=24, hidden_dim=1024, num_heads=16,
        intermediate_dim=4096, paper="large", size_yaml="bert_large.yaml"),
}


@dataclasses.dataclass
class Options:
  """What the command line asks for (see `__main__.define_flags`)."""
  output_dir: str
  face: str = "keras3"
  size: str = "tiny"
  archs: Sequence[str] = DEFAULT_ARCHS
  seeds: int = 3
  corpus: Sequence[str] = ()
  glue_tasks: Sequence[str] = DEFAULT_GLUE_TASKS
  glue_dir: str = ""
  squad_dir: str = ""
  train_steps: Optional[int] = None
  # The tf_keras face's.
  train_data: str = ""
  validation_data: str = ""
  vocab_file: str = ""
  config_files: Sequence[str] = ()
  params_override: str = ""
  # The Keras 3 face's.
  checkpoint_steps: Optional[int] = None
  steps_per_execution: Optional[int] = None
  dtype_policy: str = "auto"


@dataclasses.dataclass(frozen=True)
class PretrainRun:
  """One (architecture, seed) pre-training run."""
  arch: str
  seed: int
  run_dir: str
  train_steps: int

  def details(self) -> str:
    return f"pre-train {self.arch} seed {self.seed}, {self.train_steps} steps"


@dataclasses.dataclass(frozen=True)
class FinetuneRun:
  """One fine-tuning run, face-neutral: a GLUE task at one grid point,
  initialised from the pre-training run in `pretrained` (its run_dir)."""
  task: str
  arch: str
  seed: int
  learning_rate: float
  epochs: float
  train_steps: int
  batch_size: int
  max_seq_length: int
  pretrained: str
  run_dir: str

  def details(self) -> str:
    return (f"fine-tune {self.arch} seed {self.seed} on {self.task}, "
            f"{self.epochs:g} epochs, lr {self.learning_rate:g}, "
            f"{self.train_steps} steps")


@dataclasses.dataclass
class Plan:
  """Every run of a reproduction. `glue_sizes`: {task: train examples};
  `squad_size`: SQuAD's training questions (0: not fine-tuned);
  `finetune`: {pre-training run_dir: its fine-tuning runs}; `data`: what the
  face's data is or will be (dict: source, vocab_size, its own keys)."""
  options: Options
  size: Size
  face: object  # The face module (`load_face`).
  data: Dict[str, object]
  train_steps: int
  checkpoint_steps: int
  steps_per_execution: int
  glue_sizes: Dict[str, int]
  squad_size: int
  skipped_tasks: Dict[str, str]
  pretrain: List[PretrainRun]
  finetune: Dict[str, List[FinetuneRun]]

  @property
  def labels(self) -> Dict[str, str]:
    return {a: ARCHS[a].label for a in self.options.archs}

  @property
  def all_runs(self) -> list:
    """Each pre-training run, then the fine-tuning runs it initialises."""
    return [r for p in self.pretrain for r in [p] + self.finetune[p.run_dir]]

  def eval_steps(self) -> List[int]:
    """Steps after which the held-out set is evaluated (the last included)."""
    every = max(self.train_steps // self.size.evals, 1)
    return sorted({*range(every, self.train_steps + 1, every),
                   self.train_steps})

  def boundaries(self) -> List[int]:
    """Steps where a run stops its device loop: evaluations, checkpoints."""
    return sorted({*self.eval_steps(), *range(
        self.checkpoint_steps, self.train_steps + 1, self.checkpoint_steps)})

  def config_of(self, run) -> Dict:
    """What a run's result and checkpoint must have been made with to be
    reused: face, size, the run's spec and the face's own settings."""
    spec = {k: v for k, v in dataclasses.asdict(run).items()
            if k not in ("run_dir", "pretrained")}
    return dict(face=self.options.face, size=self.options.size, **spec,
                **self.face.run_config(self))


def warmup_steps(size: Size, train_steps: int) -> int:
  """10% of the steps, at least 1, at most `size.max_warmup`."""
  return max(1, min(size.max_warmup, train_steps // 10))


def load_face(name: str):
  check_choice("face", name, FACES)
  return importlib.import_module(FACES[name])  # See FACES.


def check_choice(flag: str, value, choices) -> None:
  """Raises a ValueError naming `--flag` unless `value` is in `choices`."""
  if value not in choices:
    raise ValueError(f"--{flag}={value!r}: use one of {', '.join(choices)}.")


def check_positive(flag: str, value) -> None:
  """Raises a ValueError naming `--flag` unless `value` is None or a
  positive int (not a bool)."""
  if value is not None and (type(value) is not int or value < 1):
    raise ValueError(f"--{flag} must be a positive integer, got {value!r}.")


def check_options(options: Options, face) -> Size:
  """Raises a ValueError naming the flag of any bad option, then the
  face's checks (its flags, its output files: `face.check_options`)."""
  if not options.output_dir:
    raise ValueError("--output_dir is required.")
  check_choice("size", options.size, SIZES)
  unknown = [a for a in options.archs if a not in ARCHS]
  if unknown or not options.archs:
    raise ValueError(f"--archs: unknown {unknown or 'empty list'}; use some "
                     f"of {', '.join(ARCHS)}.")
  if len(set(options.archs)) != len(options.archs):
    raise ValueError(f"--archs={','.join(options.archs)} repeats a name.")
  if options.seeds is None:  # `check_positive` lets None pass.
    raise ValueError("--seeds must be a positive integer, got None.")
  for name in ("seeds", "train_steps", "checkpoint_steps",
               "steps_per_execution"):
    check_positive(name, getattr(options, name))
  check_choice("dtype_policy", options.dtype_policy, DTYPE_POLICIES)
  for task in options.glue_tasks:
    glue_tasks.get_task(task)  # Names the unknown task.
  check_output_dir(options.output_dir, face.OPS)
  face.check_options(options)
  return SIZES[options.size]


def check_output_dir(output_dir: str, ops: writes.FileOps) -> None:
  """Refuses (ValueError) an --output_dir holding what a reproduction does
  not write (a train.py run, a user's folder; our leftovers of our names
  pass), and a file at the report's paths that its manifest of ours does
  not list (`ownership.check_ours`)."""
  if not ops.exists(output_dir):
    return
  if not ops.isdir(output_dir):
    raise ValueError(f"--output_dir={output_dir!r} is a file, not a "
                     "directory.")
  names = sorted(entry.rstrip("/") for entry in ops.listdir(output_dir))
  foreign = [n for n in names if writes.target_of(n) not in OUTPUT_ENTRIES]
  if not foreign:
    ownership.check_ours([os.path.join(output_dir, n) for n in REPORT],
                         os.path.join(output_dir, RESULTS_JSON), ops)
    return
  run = [name for name in names if name in ownership.RUN_FILES]
  shown = ", ".join(foreign[:8]) + (", ..." if len(foreign) > 8 else "")
  raise ValueError(
      f"--output_dir={output_dir!r} holds {shown}, which a reproduction does "
      "not write" + (f" (a train.py run: it holds {', '.join(run)})" if run
                     else "") +
      f"; a reproduction writes {', '.join(sorted(OUTPUT_ENTRIES))} there, "
      "so nothing was written. Pass a new or empty --output_dir, or one a "
      "reproduction wrote.")


def glue_sizes(options: Options, exists=os.path.exists, open_file=open,
               read_train=None) -> Tuple[Dict[str, int], Dict[str, str]]:
  """({task: train examples} of the tasks whose TSVs are all in --glue_dir,
  {task: why it is skipped}); `exists`, `open_file`: the face's files;
  `read_train(spec)`: the face's train examples of a task, if it keeps them."""
  sizes, skipped = {}, {}
  for task in options.glue_tasks:
    spec = glue_tasks.get_task(task)
    folder = os.path.join(options.glue_dir or "", spec.dir_name)
    missing = [n for _, n in spec.split_files
               if not exists(os.path.join(folder, n))]
    if not options.glue_dir or missing:
      skipped[spec.name] = (
          f"{os.path.join(options.glue_dir or '<no --glue_dir>', spec.dir_name)}"
          f" lacks {', '.join(missing) or 'the task'}")
      continue
    train = os.path.join(folder, dict(spec.split_files)["train"])
    sizes[spec.name] = len(read_train(spec) if read_train else
                           glue_tasks.read_tsv_examples(spec, train, exists,
                                                        open_file))
  return sizes, skipped


def squad_files(options: Options, exists=os.path.exists
                ) -> Tuple[Dict[str, str], str]:
  """({split: path} of the SQuAD v1.1 files in --squad_dir, ""), or ({},
  why not)."""
  paths = {split: os.path.join(options.squad_dir or "", name)
           for split, name in SQUAD_FILES}
  missing = [n for (_, n), p in zip(SQUAD_FILES, paths.values())
             if not exists(p)]
  if options.squad_dir and not missing:
    return paths, ""
  return {}, (f"{options.squad_dir or '<no --squad_dir>'} lacks "
              f"{', '.join(missing)}")


def squad_lengths(size: Size) -> Tuple[int, int, int]:
  """(sequence, doc stride, question) lengths: BERT's 384 / 128 / 64."""
  return size.squad_seq_length, size.squad_seq_length // 3, (
      size.squad_seq_length // 6)


def run_dir(output_dir: str, arch: str, seed: int) -> str:
  return os.path.join(output_dir, "pretrain", arch, f"seed{seed}")


def finetune_runs(options: Options, size: Size, run: PretrainRun, task: str,
                  train_size: int) -> List[FinetuneRun]:
  """The grid of one task from one pre-training run: epochs x learning
  rates, the pre-training seed (so a median over seeds is one over
  pre-training runs). SQuAD's epochs count questions (BERT's run_squad)."""
  root = os.path.join(options.output_dir, "finetune", run.arch,
                      f"seed{run.seed}", task)
  return [FinetuneRun(
      task=task, arch=run.arch, seed=run.seed, learning_rate=lr, epochs=e,
      train_steps=schedule.train_steps(train_size, e, size.glue_batch_size),
      batch_size=size.glue_batch_size,
      max_seq_length=(squad_lengths(size)[0] if task == SQUAD else
                      size.glue_seq_length),
      pretrained=run.run_dir,
      run_dir=os.path.join(root, f"ep{e:g}_lr{lr:g}", f"seed{run.seed}"))
          for e in size.glue_epochs for lr in size.glue_learning_rates]


def analyse_seed0(plan: Plan, done: Callable, analyse_one: Callable
                  ) -> Dict[str, str]:
  """Seed 0 of each architecture, once: {arch: its analysis dir}; the face's
  `done(run, out_dir)` and `analyse_one(run, out_dir)`."""
  found = {}
  for run in (r for r in plan.pretrain if r.seed == 0):
    out_dir = os.path.join(plan.options.output_dir, "analysis", run.arch)
    finished = done(run, out_dir)
    print(f"attention analysis of {run.arch} seed 0: " + (
        "done" if finished else f"{plan.size.analysis_examples} examples"),
          flush=True)
    if not finished:
      analyse_one(run, out_dir)
    found[run.arch] = out_dir
  return found


def make_plan(options: Options, face, data: Optional[Dict] = None) -> Plan:
  """Checks the options and lists every run; writes nothing. `data`: the
  face's built data (`face.prepare_data`); None: `face.expected_data`."""
  size = check_options(options, face)
  steps = options.train_steps or size.train_steps
  glue_sizes, skipped = face.glue_sizes(options, size)
  squad_size, why = face.squad_size(options, size)
  if why:
    skipped[SQUAD] = why
  pretrain = [PretrainRun(arch, seed, run_dir(options.output_dir, arch, seed),
                          steps)
              for seed in range(options.seeds) for arch in options.archs]
  return Plan(
      options=options, size=size, face=face,
      data=data or face.expected_data(options, size), train_steps=steps,
      checkpoint_steps=min(options.checkpoint_steps or size.checkpoint_steps,
                           steps),
      steps_per_execution=(options.steps_per_execution or
                           size.steps_per_execution),
      glue_sizes=glue_sizes, squad_size=squad_size, skipped_tasks=skipped,
      pretrain=pretrain,
      finetune={run.run_dir: [
          r for task, n in {**glue_sizes, SQUAD: squad_size}.items() if n
          for r in finetune_runs(options, size, run, task, n)]
                for run in pretrain})
