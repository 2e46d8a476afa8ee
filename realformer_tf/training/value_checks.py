"""Config values no run can mean, refused before anything is read or written.

Model Garden's configs are typed, not ranged: `initial_learning_rate=-0.001`
trains as gradient ascent to rc 0, a dropout rate of 1.5 or a warm-up longer
than the run train without a word, `global_batch_size=0` or a negative
`max_to_keep` (which makes TensorFlow's `CheckpointManager` delete every
checkpoint, the newest too) fail late or never; Orbit checks `steps_per_loop`
and `summary_interval` (`orbit/controller.py:186`) and Model Garden's
`set_mixed_precision_policy` the dtype ("Unexpected dtype", no list:
`official/modeling/performance.py:44`), but only once `params.yaml` and the
quickstart data are written. `check_values` names every such key and value
at once.

Ranges are the ones the libraries give their arguments (Keras optimizers:
betas in [0, 1), momentum in [0, 1]; `tf.keras` dropout: rate in [0, 1)) or
that follow from what a key means (a warm-up ends within the run).

Also here, the value rules of a run plan (`plan_rules.values`):
values of the wrong type (`validate_field_types`, at parse time), the
encoder config's own `validate`, sequence lengths against the position
table, the GPUs asked for and the batches' split over the replicas.
"""

import dataclasses
import math
import numbers
import re
import typing
from typing import Iterator, List, Optional, Tuple

import tensorflow as tf

from official.core import config_definitions as cfg
from official.modeling import hyperparams
from realformer_tf.configs import registry
from realformer_tf.training import run_plan

# `runtime.mixed_precision_dtype` values Model Garden's
# `performance.set_mixed_precision_policy` accepts (float16 and bfloat16 set
# the mixed_float16 / mixed_bfloat16 Keras policies); unset means float32.
MIXED_PRECISION_DTYPES = ("float32", "float16", "bfloat16")
_OPTIMIZER_KEY = "trainer.optimizer_config"


def _leaves(config, prefix: str) -> Iterator[Tuple[str, object]]:
  """(dotted key, value) of every leaf of `config`; a one-of config only
  through its chosen branch, list items as `key[i]`."""
  if isinstance(config, hyperparams.OneOfConfig):
    if config.type:
      yield from _leaves(config.get(), f"{prefix}{config.type}.")
    return
  for name in config.as_dict():
    value, key = getattr(config, name), prefix + name
    if isinstance(value, hyperparams.Config):
      yield from _leaves(value, key + ".")
    elif isinstance(value, (list, tuple)) and any(
        isinstance(item, hyperparams.Config) for item in value):
      for i, item in enumerate(value):
        if isinstance(item, hyperparams.Config):
          yield from _leaves(item, f"{key}[{i}].")
    else:
      yield key, value


def _number(value) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _schedule_errors(trainer: cfg.TrainerConfig) -> Iterator[str]:
  """Steps, intervals and checkpoint keeping of a training run."""
  if trainer.train_steps <= 0:
    yield (f"trainer.train_steps={trainer.train_steps} must be positive to "
           "train")
  if trainer.steps_per_loop <= 0:
    yield f"trainer.steps_per_loop={trainer.steps_per_loop} must be positive"
  if trainer.summary_interval is not None and trainer.summary_interval <= 0:
    yield (f"trainer.summary_interval={trainer.summary_interval} must be "
           "positive")
  elif (trainer.summary_interval and trainer.steps_per_loop > 0 and
        trainer.summary_interval % trainer.steps_per_loop):
    yield (f"trainer.summary_interval={trainer.summary_interval} must be a "
           f"multiple of trainer.steps_per_loop={trainer.steps_per_loop}")
  for key, what in (("checkpoint_interval", "0: no checkpoints"),
                    ("validation_interval", "0: evaluate at the end only"),
                    ("max_to_keep", "0: keep all"),
                    ("recovery_max_trials", "0: no roll-back")):
    value = getattr(trainer, key)
    if value is not None and value < 0:
      yield f"trainer.{key}={value} must be >= 0 ({what})"
  if trainer.loss_upper_bound <= 0:
    yield (f"trainer.loss_upper_bound={trainer.loss_upper_bound:g} must be "
           "positive")


def _learning_rate_errors(trainer: cfg.TrainerConfig) -> Iterator[str]:
  """The chosen learning-rate schedule and warm-up."""
  lr_config = trainer.optimizer_config.learning_rate
  lr, key = lr_config.get(), f"{_OPTIMIZER_KEY}.learning_rate.{lr_config.type}"
  initial = getattr(lr, "initial_learning_rate", None)
  if lr_config.type == "polynomial" and lr.decay_steps is None:
    yield (f"{key}.decay_steps is not set (usually = trainer.train_steps="
           f"{trainer.train_steps})")
  for name in ("initial_learning_rate", "learning_rate"):
    value = getattr(lr, name, None)
    if _number(value) and value <= 0:
      yield (f"{key}.{name}={value:g} must be positive (a negative rate "
             "trains as gradient ascent, zero not at all)")
  values = getattr(lr, "values", None)
  if values and (any(v < 0 for v in values) or not any(v > 0 for v in values)):
    yield f"{key}.values={list(values)} must be >= 0, and not all 0"
  end = getattr(lr, "end_learning_rate", None)
  if _number(end) and (end < 0 or (_number(initial) and end > initial)):
    yield (f"{key}.end_learning_rate={end:g} must be in [0, "
           f"initial_learning_rate={initial:g}]" if _number(initial) else
           f"{key}.end_learning_rate={end:g} must be >= 0")
  for name in ("decay_steps", "total_decay_steps", "decay_rate"):
    value = getattr(lr, name, None)
    if _number(value) and value <= 0:
      yield f"{key}.{name}={value:g} must be positive"
  for name in ("alpha", "linear_decay_fraction"):
    value = getattr(lr, name, None)
    if _number(value) and not 0 <= value <= 1:
      yield f"{key}.{name}={value:g} must be in [0, 1]"
  warmup_config = trainer.optimizer_config.warmup
  if not warmup_config.type:
    return
  warmup = warmup_config.get()
  key = f"{_OPTIMIZER_KEY}.warmup.{warmup_config.type}"
  steps = getattr(warmup, "warmup_steps", None)
  if _number(steps) and steps < 0:
    yield f"{key}.warmup_steps={steps} must be >= 0"
  elif _number(steps) and steps > trainer.train_steps > 0:
    yield (f"{key}.warmup_steps={steps} is longer than the run "
           f"(trainer.train_steps={trainer.train_steps}): the rate would "
           "never reach its peak")
  start = getattr(warmup, "warmup_learning_rate", None)
  if _number(start) and start < 0:
    yield f"{key}.warmup_learning_rate={start:g} must be >= 0"


# Optimizer fields (any optimizer) -> (lowest, highest, highest included).
_OPTIMIZER_RANGES = (
    (re.compile(r"weight_decay(_rate)?$"), 0.0, None, True),
    (re.compile(r"beta_[12]$"), 0.0, 1.0, False),
    (re.compile(r"momentum$"), 0.0, 1.0, True),
    (re.compile(r"epsilon$"), 0.0, None, True),
    (re.compile(r"(clipnorm|clipvalue|global_clipnorm|gradient_clip_norm)$"),
     0.0, None, True),
)
# Model fields (encoder, decoder, heads) holding a drop or smoothing rate.
_RATE = re.compile(r"(dropout(_rate)?|label_smoothing)$")


def _range_error(key: str, value, low, high, high_included) -> List[str]:
  if not _number(value):
    return []
  if value < low or (high is not None and (
      value > high or (value == high and not high_included))):
    bound = (f">= {low:g}" if high is None else
             f"in [{low:g}, {high:g}{']' if high_included else ')'}")
    return [f"{key}={value:g} must be {bound}"]
  return []


def _optimizer_errors(trainer: cfg.TrainerConfig) -> Iterator[str]:
  optimizer = trainer.optimizer_config.optimizer
  for key, value in _leaves(optimizer, f"{_OPTIMIZER_KEY}.optimizer."):
    for pattern, low, high, high_included in _OPTIMIZER_RANGES:
      if pattern.search(key.rsplit(".", 1)[-1]):
        yield from _range_error(key, value, low, high, high_included)


def _task_errors(params: cfg.ExperimentConfig,
                 data_keys: List[str]) -> Iterator[str]:
  model = getattr(params.task, "model", None)
  if isinstance(model, hyperparams.Config):
    for key, value in _leaves(model, "task.model."):
      if _RATE.search(key.rsplit(".", 1)[-1]):
        yield from _range_error(key, value, 0.0, 1.0, False)
  for key in data_keys:
    data = getattr(params.task, key.split(".", 1)[1])
    batch = getattr(data, "global_batch_size", None)
    if _number(batch) and batch <= 0:
      yield f"{key}.global_batch_size={batch} must be positive"
    predictions = getattr(data, "max_predictions_per_seq", None)
    if _number(predictions) and predictions < 1:
      yield f"{key}.max_predictions_per_seq={predictions} must be positive"
    buffer = getattr(data, "shuffle_buffer_size", None)
    if (getattr(data, "is_training", False) and _number(buffer) and
        buffer < 1):
      yield f"{key}.shuffle_buffer_size={buffer} must be positive"


def _runtime_errors(runtime: cfg.RuntimeConfig) -> Iterator[str]:
  dtype = runtime.mixed_precision_dtype
  if dtype and dtype not in MIXED_PRECISION_DTYPES:
    yield (f"runtime.mixed_precision_dtype={dtype!r} is not one of "
           f"{', '.join(MIXED_PRECISION_DTYPES)} (float16 and bfloat16 give "
           "Keras's mixed_float16 / mixed_bfloat16 policies)")
  scale = runtime.loss_scale
  if scale is not None and scale != "dynamic" and not (
      _number(scale) and scale > 0):
    yield (f"runtime.loss_scale={scale!r} must be 'dynamic' or a positive "
           "number")
  if runtime.num_gpus is not None and runtime.num_gpus < 0:
    yield f"runtime.num_gpus={runtime.num_gpus} must be >= 0"


def check_values(params: cfg.ExperimentConfig, trains: bool,
                 evaluates: bool, data_keys: List[str]) -> None:
  """Raises ValueError naming every out-of-range key and value of `params`.

  Args:
    params: The parsed (type-checked) experiment config.
    trains: Whether the mode trains (the trainer and optimizer keys apply).
    evaluates: Whether the mode evaluates.
    data_keys: The data configs the mode reads ("task.train_data", ...).
  """
  errors = []
  if trains:
    errors += _schedule_errors(params.trainer)
    errors += _learning_rate_errors(params.trainer)
    errors += _optimizer_errors(params.trainer)
  steps = params.trainer.validation_steps
  if evaluates and (steps == 0 or steps < -1):
    # Orbit refuses it only when the first evaluation starts.
    errors.append(f"trainer.validation_steps={steps} must be positive, or -1 "
                  "for the whole validation set")
  errors += _task_errors(params, data_keys)
  errors += _runtime_errors(params.runtime)
  if errors:
    raise ValueError("Config values out of range: " + "; ".join(errors) + ".")


def _type_errors(config: hyperparams.Config, prefix: str) -> Iterator[str]:
  for field in dataclasses.fields(config):
    value, key = getattr(config, field.name, None), prefix + field.name
    expected = field.type
    if typing.get_origin(expected) is typing.Union:  # Optional[int] etc.
      args = [a for a in typing.get_args(expected) if a is not type(None)]
      expected = args[0] if len(args) == 1 else None
    article = "an" if expected is int else "a"
    if isinstance(value, hyperparams.OneOfConfig):  # Its chosen branch only.
      key, value = f"{key}.{value.type}", value.get()
    if isinstance(value, hyperparams.Config):
      if expected in (int, float, bool, str):  # e.g. `train_steps.x=1`
        yield (f"{key} must be {article} {expected.__name__}, not the "
               f"mapping {value.as_dict()}")
      else:
        yield from _type_errors(value, key + ".")
    elif isinstance(value, (list, tuple)):
      for i, item in enumerate(value):
        if isinstance(item, hyperparams.Config):
          yield from _type_errors(item, f"{key}[{i}].")
    elif value is not None and expected in (int, float, bool) and (
        # A bool is an int to isinstance; an int is a fine float.
        isinstance(value, bool) != (expected is bool) or not isinstance(
            value, (int, float) if expected is float else expected)):
      yield (f"{key}={value!r} must be {article} {expected.__name__}, not "
             f"{type(value).__name__}")
    elif _number(value) and not math.isfinite(value):
      # Every range check compares, and `nan <= 0` is False: a NaN learning
      # rate passed them all and stopped the run at its first step.
      yield f"{key}={value!r} must be a finite number"


def validate_field_types(params: cfg.ExperimentConfig) -> None:
  """Every int, float and bool field of `params` holds a value of that type,
  every number a finite one (YAML's `.nan` and `.inf` are floats).

  Model Garden's `Config.override` stores what YAML or `--params_override`
  gives unconverted (`official/modeling/hyperparams/base_config.py:225`):
  `train_steps=1.5` makes Orbit loop at step 1 forever, `train_steps=abc` a
  `TypeError` deep in the trainer. The error names every mistyped key.
  """
  errors = list(_type_errors(params, ""))
  if errors:
    raise ValueError("Config values of the wrong type: " + "; ".join(errors) +
                     ".")


def validate_model(params: cfg.ExperimentConfig) -> None:
  """Runs the encoder config's own `validate` now, not at build time (Model
  Garden's parse checks only `restrictions`); errors name its key."""
  encoder_key, encoder = registry.task_encoder(params)
  if encoder is None:
    return
  try:
    encoder.validate()
  except ValueError as e:
    raise ValueError(f"{encoder_key}: {e}") from None


def _check_lengths(key: str, data, encoder_key: Optional[str],
                   encoder) -> None:
  seq_length = getattr(data, "seq_length", None)
  if seq_length is None:
    return
  if seq_length < 1:
    raise ValueError(f"{key}.seq_length={seq_length} must be positive.")
  max_positions = getattr(encoder, "max_position_embeddings", None)
  if max_positions is not None and seq_length > max_positions:
    raise ValueError(
        f"{key}.seq_length={seq_length} exceeds "
        f"{encoder_key}.max_position_embeddings={max_positions}: shorten the "
        "sequences or enlarge the position table.")
  max_predictions = getattr(data, "max_predictions_per_seq", None)
  if max_predictions is not None and max_predictions > seq_length:
    raise ValueError(
        f"{key}.max_predictions_per_seq={max_predictions} exceeds "
        f"{key}.seq_length={seq_length}.")


def validate_config(params: cfg.ExperimentConfig, mode: str) -> None:
  """The checks of `params`' values for `mode` that read no input file
  (`check_values`, then lengths and the visible GPUs)."""
  check_values(
      params, trains=mode in run_plan.TRAIN_MODES,
      evaluates=mode in run_plan.EVAL_MODES,
      data_keys=[key for key, _ in run_plan.data_configs(params, mode)])
  encoder_key, encoder = registry.task_encoder(params)
  for key, data in run_plan.data_configs(params, mode):
    _check_lengths(key, data, encoder_key, encoder)
  validate_runtime(params)


def validate_batch_sizes(params: cfg.ExperimentConfig, mode: str,
                         num_replicas: int) -> None:
  """Each global batch must split evenly over the replicas (positive:
  `check_values`)."""
  for key, data in run_plan.data_configs(params, mode):
    batch = data.global_batch_size
    if batch % num_replicas:
      raise ValueError(
          f"{key}.global_batch_size={batch} is not divisible by the "
          f"{num_replicas} replicas of runtime.distribution_strategy="
          f"{params.runtime.distribution_strategy!r}.")


def validate_runtime(params: cfg.ExperimentConfig) -> None:
  """`runtime.num_gpus` GPUs are visible, before a strategy is built on them."""
  runtime = params.runtime
  if (not runtime.num_gpus or
      runtime.distribution_strategy not in ("mirrored", "one_device")):
    return  # Nothing to check: no device listing at start-up.
  gpus = len(tf.config.list_physical_devices("GPU"))
  if runtime.num_gpus > gpus:
    raise ValueError(f"runtime.num_gpus={runtime.num_gpus} but {gpus} GPU(s) "
                     "are visible to TensorFlow.")
