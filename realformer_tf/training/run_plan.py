"""A run's plan: every fact a train.py run depends on, read once, frozen.

`derive` reads what a run reads (`plan_facts`) and applies every derivation of
the config in one place, on a copy; `plan_rules` turns the facts into one
refusal listing every problem.
"""

import dataclasses
import os
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple)

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import run_resume
from realformer_tf.configs import experiments
from realformer_tf.configs import registry
from realformer_tf.core import ownership
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import translation as translation_data
from realformer_tf.tasks import question_answering
from realformer_tf.training import plan_facts

# train.py's modes (Model Garden's `train_lib` names).
TRAIN_MODES = ("train", "train_and_eval", "train_and_post_eval")
EVAL_MODES = ("eval", "train_and_eval", "continuous_eval",
              "train_and_post_eval")
MODES = TRAIN_MODES + ("eval", "continuous_eval")
TRAIN_STEPS_KEY = "trainer.train_steps"
INIT_KEY = plan_facts.INIT_KEY
# Dotted config key -> (position of the last source that set it, its name).
ExplicitKeys = Dict[str, Tuple[int, str]]
# Encoder fields that define a checkpoint's variables or its function.
ARCHITECTURE_FIELDS = (
    "vocab_size", "hidden_size", "num_layers", "num_attention_heads",
    "hidden_activation", "intermediate_size", "max_position_embeddings",
    "type_vocab_size", "embedding_size", "residual_attention", "norm_first",
    "final_layer_norm", "norm_epsilon")
# train.py's other files in --model_dir: the final evaluation's {"step",
# "metrics"}, and what a scan of records without our manifest proved.
FINAL_EVAL_FILE = "final_eval.json"
DATA_SCAN_FILE = "data_scan.json"
# params.yaml's first line (a comment): our proof of writing it.
PARAMS_HEADER = "# realformer_tf train.py run configuration\n"


def data_configs(params: cfg.ExperimentConfig, mode: str):
  """The (key, DataConfig) pairs `mode` reads, as a list."""
  return [(f"task.{name}", getattr(params.task, name))
          for name, which in (("train_data", TRAIN_MODES),
                              ("validation_data", EVAL_MODES)) if mode in which]


def dotted_items(nested: Mapping[str, Any], prefix: str = "") -> dict:
  """{dotted path: value} of the leaves of a nested dict."""
  return dict(item for key, value in nested.items()
              for item in (dotted_items(value, f"{prefix}{key}.").items()
                           if isinstance(value, Mapping) and value
                           else [(f"{prefix}{key}", value)]))


def explicit_keys(sources: Sequence[Tuple[str, Mapping[str, Any]]]
                 ) -> ExplicitKeys:
  """Which source set each key last, from `(source name, overrides)`s."""
  return {key: (index, name) for index, (name, overrides) in enumerate(sources)
          for key in dotted_items(overrides)}


def quickstart_data_dir(model_dir: str) -> str:
  """Where the quickstart builds its own data for the run in `model_dir`."""
  return os.path.join(model_dir, experiments.QUICKSTART_DATA_SUBDIR)


@dataclasses.dataclass(frozen=True)
class Quickstart:
  """The quickstart data a run needs (`key`), built into `data_dir` unless
  `cached`; `recorded`: the key of the data there, if readable."""
  data_dir: str
  key: dict
  input_files: Optional[Tuple[str, ...]]
  cached: bool
  manifest_path: str
  recorded: Optional[dict]


@dataclasses.dataclass(frozen=True)
class RunPlan:
  """What a run reads and resumes, and its derived config (`params`)."""
  params: cfg.ExperimentConfig
  mode: str
  model_dir: str
  num_replicas: int
  splits: Tuple[plan_facts.Split, ...]
  vocabs: Tuple[plan_facts.Vocab, ...]
  init: Optional[plan_facts.InitRun]
  resume: Optional[str]
  previous: Optional[cfg.ExperimentConfig]
  quickstart: Optional[Quickstart]
  derived: Tuple[str, ...]
  problems: Tuple[Exception, ...]
  foreign: Tuple[str, ...] = ()  # `foreign_outputs`.

  @property
  def trains(self) -> bool:
    return self.mode in TRAIN_MODES

  @property
  def builds(self) -> bool:
    """Whether the quickstart's data is still to be built (under the lock)."""
    return self.quickstart is not None and not self.quickstart.cached


def _follow_train_steps(params: cfg.ExperimentConfig,
                        explicit: ExplicitKeys) -> Optional[str]:
  """Fits decay length and warm-up to an explicit `trainer.train_steps`
  unless the same or a later source set them; returns what changed."""
  if TRAIN_STEPS_KEY not in explicit:
    return None
  index, source = explicit[TRAIN_STEPS_KEY]
  set_since = {key for key, (i, _) in explicit.items() if i >= index}
  train_steps = params.trainer.train_steps
  optimizer = params.trainer.optimizer_config
  lr = optimizer.learning_rate.get()
  decay_key = ("trainer.optimizer_config.learning_rate."
               f"{optimizer.learning_rate.type}.decay_steps")
  old_decay = getattr(lr, "decay_steps", None)
  # train_steps is an int here (`value_checks.validate_field_types` ran first).
  if (train_steps <= 0 or not isinstance(old_decay, int) or
      old_decay == train_steps or decay_key in set_since):
    return None
  lr.decay_steps = train_steps
  changes = [f"{decay_key}: {old_decay} -> {train_steps}"]
  warmup = optimizer.warmup.get()
  warmup_key = ("trainer.optimizer_config.warmup."
                f"{optimizer.warmup.type}.warmup_steps")
  old_warmup = getattr(warmup, "warmup_steps", None)
  if (isinstance(old_warmup, int) and old_warmup > 0 and old_decay > 0 and
      warmup_key not in set_since):
    warmup.warmup_steps = int(round(old_warmup * train_steps / old_decay))
    changes.append(f"{warmup_key}: {old_warmup} -> {warmup.warmup_steps} "
                   f"(same {old_warmup / old_decay:.0%} of the run)")
  return (f"{TRAIN_STEPS_KEY}={train_steps} (from {source}): the "
          f"learning-rate schedule follows it: {'; '.join(changes)}. Set "
          "these keys explicitly to choose other values.")


def _inherit_encoder(params: cfg.ExperimentConfig, explicit: ExplicitKeys,
                     run: Optional[run_directory.Run]) -> Tuple[str, ...]:
  """Copies the init run's encoder architecture into `params` (a value the
  user set otherwise is an error naming both), and what follows from it (the
  pooler, the eval vocabulary); returns what changed."""
  ours = plan_facts.encoder_of(params)
  theirs = run and plan_facts.encoder_of(run.config)
  if ours is None or theirs is None:
    return ()
  init_checkpoint = params.task.init_checkpoint
  conflicts, taken = [], []
  for field in ARCHITECTURE_FIELDS:
    key = f"task.model.encoder.any.{field}"
    value, run_value = getattr(ours, field), getattr(theirs, field)
    if value == run_value:
      continue
    if key in explicit:
      conflicts.append(f"{key}={value!r} (set by {explicit[key][1]}) but the "
                       f"run has {field}={run_value!r}")
    else:
      setattr(ours, field, run_value)
      taken.append(f"{field}={run_value!r}")
  if conflicts:
    raise ValueError(
        f"{INIT_KEY}={init_checkpoint!r} is a run of {run.config.task.name} "
        "whose encoder differs from the one configured here (see "
        f"{run.params_path}):\n  " + "\n  ".join(conflicts) +
        "\nDrop these settings (the run's are used) or start from another "
        "checkpoint.")
  derived = [f"{INIT_KEY}={init_checkpoint} is a {run.config.task.name} run: "
             f"its encoder config ({run.params_path}) is used" +
             (f", changing {', '.join(taken)}" if taken else " (no change)")]
  # The run's NSP pooler restores into GLUE's only if as wide.
  heads = getattr(run.config.task.model, "cls_heads", [])
  nsp = {h.name: h.inner_dim for h in heads}.get("next_sentence")
  if getattr(params.task, "init_cls_pooler", False) and nsp != ours.hidden_size:
    why = ("was trained without a next-sentence head" if nsp is None else
           f"has a next-sentence pooler of width {nsp}, not the encoder's "
           f"hidden_size={ours.hidden_size}")
    if "task.init_cls_pooler" in explicit:
      raise ValueError(
          f"task.init_cls_pooler=true (set by "
          f"{explicit['task.init_cls_pooler'][1]}), but the run "
          f"{INIT_KEY}={init_checkpoint!r} {why}, so there is no "
          "pooler to restore.")
    params.task.init_cls_pooler = False
    derived.append(f"The run {run.directory} {why}: task.init_cls_pooler is "
                   "off (the classifier's pooler starts fresh)")
  eval_data = getattr(params.task, "validation_data", None)
  # Empty, or a placeholder path (the SQuAD YAMLs' /path/to/...): the run's.
  if (run.vocab_file and hasattr(eval_data, "vocab_file") and
      (not eval_data.vocab_file or
       not tf.io.gfile.exists(eval_data.vocab_file))):
    derived.append(f"task.validation_data.vocab_file={eval_data.vocab_file!r}"
                   f": using the run's vocabulary {run.vocab_file}")
    eval_data.vocab_file = run.vocab_file
  return tuple(derived)


def _quickstart(params: cfg.ExperimentConfig, model_dir: str,
                input_files: Sequence[str]) -> Optional[Quickstart]:
  """The quickstart's data for `params` (None if it builds none), pointing
  `params` at it if built; ValueError for options it cannot build from."""
  task, name = params.task, experiments.QUICKSTART
  if task.name != name:
    if input_files:
      raise ValueError(
          f"--quickstart_input_files only applies to --experiment={name}, "
          f"not to task.name={task.name!r}.")
    return None
  paths = {"task.train_data.input_path": task.train_data.input_path,
           "task.validation_data.input_path": task.validation_data.input_path}
  if all(paths.values()) and not input_files:
    return None
  if any(paths.values()):
    raise ValueError(
        f"{name}: set both {' and '.join(paths)} (your own records, without "
        "--quickstart_input_files) or neither (records built in "
        f"model_dir/data); got {paths}.")
  for key in ("seq_length", "max_predictions_per_seq"):
    train_value, eval_value = (getattr(task.train_data, key),
                               getattr(task.validation_data, key))
    if train_value != eval_value:
      raise ValueError(
          f"{name} builds one set of records, but task.train_data.{key}="
          f"{train_value} != task.validation_data.{key}={eval_value}.")
  data_dir = quickstart_data_dir(model_dir)
  files = tuple(input_files) if input_files else None
  key = quickstart_corpus.data_key(
      data_dir, input_files=list(files) if files else None,
      vocab_size=task.model.encoder.get().vocab_size,
      max_seq_length=task.train_data.seq_length,
      max_predictions_per_seq=task.train_data.max_predictions_per_seq,
      dupe_factor=experiments.QUICKSTART_DUPE_FACTOR)
  manifest_path, recorded = quickstart_corpus.recorded_key(data_dir)
  data = quickstart_corpus.cached_data(data_dir, key)
  if data:
    point_at_quickstart_data(params, data)
  return Quickstart(data_dir=data_dir, key=key, input_files=files,
                    cached=bool(data), manifest_path=manifest_path,
                    recorded=recorded)


def foreign_params(model_dir: str) -> List[str]:
  """`model_dir`'s params.yaml if it is there and not ours (`PARAMS_HEADER`)."""
  path = run_directory.params_path(model_dir)
  ops = utils.GFILE_OPS
  return [path] if ops.exists(path) and not (ops.read(path) or "").startswith(
      PARAMS_HEADER) else []


def foreign_outputs(params: cfg.ExperimentConfig, mode: str,
                    model_dir: str) -> Tuple[str, ...]:
  """The files at paths a run of `mode` writes not proven ours."""
  ops, found = utils.GFILE_OPS, []
  if mode in TRAIN_MODES:
    found += foreign_params(model_dir)
    for name in (FINAL_EVAL_FILE, DATA_SCAN_FILE):
      path = os.path.join(model_dir, name)
      found += ownership.foreign([path], path, ops)
  predictions_dir = getattr(params.task, "predictions_dir", None)
  if mode in EVAL_MODES and predictions_dir is not None:
    manifest, targets = question_answering.outputs(
        predictions_dir or model_dir,
        params.task.validation_data.version_2_with_negative)
    found += ownership.foreign(targets, manifest, ops)
  return tuple(found)


def point_at_quickstart_data(params: cfg.ExperimentConfig, data) -> None:
  """Points `params` at `prepare_quickstart_data`'s result, vocab size too."""
  task = params.task
  task.train_data.input_path = data["train_file"]
  task.validation_data.input_path = data["eval_file"]
  task.vocab_file = data["vocab_file"]
  task.model.encoder.get().vocab_size = int(data["vocab_size"])


def _derive_config(params: cfg.ExperimentConfig, explicit: ExplicitKeys,
                   init_run: Optional[run_directory.Run]) -> list:
  """Applies the schedule and init run's encoder, checks Model Garden's
  restrictions; returns what changed."""
  derived = [_follow_train_steps(params, explicit),
             *_inherit_encoder(params, explicit, init_run)]
  try:
    params.validate()
  except KeyError as e:
    # Model Garden's restriction check raises KeyError.
    raise ValueError(
        f"{e.args[0] if e.args else e} Set them to agree (setting only "
        "trainer.train_steps moves the schedule with it).") from None
  return derived


def derive(params: cfg.ExperimentConfig, mode: str, model_dir: str, *,
           explicit: Optional[ExplicitKeys] = None, num_replicas: int = 1,
           quickstart_input_files: Optional[Sequence[str]] = None,
           reader: Optional[plan_facts.Reader] = None) -> RunPlan:
  """The plan of running `params` (unlocked, left unchanged) as `mode` in
  `model_dir`; `reader`: a sweep's, to share its reads between runs.

  Raises ValueError only for an unknown `mode` or a `model_dir` no run can
  use; every other problem is in the plan, for `plan_rules.check`.
  """
  if mode not in MODES:
    raise ValueError(f"--mode={mode!r} is not supported by train.py; use one "
                     f"of {', '.join(MODES)}.")
  plan_facts.check_model_dir_path(model_dir)
  reader = reader or plan_facts.Reader()
  explicit = dict(explicit or {})
  params = params.replace()
  problems, derived = [], []

  def caught(read: Callable[[], Any]) -> Any:
    """`read()`, or None with its ValueError kept in `problems`."""
    try:
      return read()
    except ValueError as e:
      problems.append(e)
      return None

  # `continuous_eval` only waits for the checkpoints a training job lists.
  resume = caught(lambda: run_directory.newest_checkpoint(model_dir) if mode
                  == "continuous_eval" else run_resume.resume_checkpoint(
                      model_dir))
  foreign = foreign_outputs(params, mode, model_dir)
  # A user's params.yaml is refused (`plan_rules`), not read as a run's.
  previous = (None if run_directory.params_path(model_dir) in foreign else
              caught(lambda: reader.previous(model_dir)))
  init_value = getattr(params.task, "init_checkpoint", "") or ""
  init_run = caught(lambda: reader.run(init_value) if init_value else None)
  # Model Garden restores the init checkpoint only for a fresh training run.
  restores = mode in TRAIN_MODES and resume is None and not problems
  derived = caught(lambda: _derive_config(params, explicit, init_run))
  restores = restores and derived is not None
  quickstart = caught(lambda: _quickstart(params, model_dir,
                                          quickstart_input_files or ()))
  init = (reader.init_run(init_value, init_run, params, restores)
          if init_value else None)
  if init and init.prefix:
    # The prefix checked: what the task restores and params.yaml records.
    params.task.init_checkpoint = init.prefix
  splits, vocabs = (), ()
  if not (quickstart and not quickstart.cached):
    encoder_key, encoder = registry.task_encoder(params)
    vocab_key = f"{encoder_key}.vocab_size"
    vocab_size = getattr(encoder, "vocab_size", None)
    manifests = set()
    splits = tuple(reader.split(key, data, vocab_key, vocab_size, init,
                                manifests)
                   for key, data in data_configs(params, mode))
    found = [("task.vocab_file", getattr(params.task, "vocab_file", ""))]
    found += [(f"{key}.vocab_file", getattr(data, "vocab_file", ""))
              for key, data in data_configs(params, mode)]
    vocabs = tuple(reader.vocab(key, path, vocab_key, vocab_size)
                   for key, path in found if path)
    if hasattr(params.task, "sentencepiece_model_path"):  # Translation.
      caught(lambda: translation_data.check_sentencepiece_model(
          params.task.sentencepiece_model_path))
  derived = tuple(line for line in derived or () if line)
  for line in derived:
    logging.info("%s.", line)
  return RunPlan(
      params=params, mode=mode, model_dir=model_dir,
      num_replicas=num_replicas, splits=splits, vocabs=vocabs, init=init,
      resume=resume, previous=previous, quickstart=quickstart,
      derived=derived, problems=tuple(problems), foreign=foreign)


def describe(plan: RunPlan) -> str:
  """The plan as `train.py --dry_run` prints it."""
  lines = [f"Plan for --mode={plan.mode} --model_dir={plan.model_dir}:"]
  encoder_key, encoder = registry.task_encoder(plan.params)
  if encoder is not None and hasattr(encoder, "vocab_size"):
    lines.append(f"  model: {plan.params.task.name}, {encoder_key} "
                 f"(vocab_size={encoder.vocab_size})")
  for split in plan.splits:
    lines.append(f"  {split.key}: {len(split.files)} file(s) "
                 f"({split.input_path})")
    lines.extend(f"    {path}" for path in split.files)
  if plan.builds:
    lines.append(f"  quickstart data: to be built in "
                 f"{plan.quickstart.data_dir}")
  for vocab in plan.vocabs:
    size = len(vocab.tokens) if vocab.tokens else "unreadable"
    sha = f", sha256 {vocab.sha256[:12]}" if vocab.sha256 else ""
    lines.append(f"  {vocab.key}: {vocab.path} ({size} tokens{sha})")
  if plan.init:
    rows = (f", embedding {plan.init.embedding[1]} rows"
            if plan.init.embedding else "")
    vocab = plan.init.vocab
    if vocab and vocab.tokens:
      rows += f"; its run's vocabulary {vocab.path} ({len(vocab.tokens)})"
    lines.append(f"  init checkpoint: {plan.init.prefix or plan.init.value}"
                 f"{rows}")
  lines.append(f"  resumes: {plan.resume or 'nothing (a new run)'}")
  lines.extend(f"  derived: {line}" for line in plan.derived)
  return "\n".join(lines)
