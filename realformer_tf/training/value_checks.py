"""Config values no run can mean, refused before anything is read or written.

Model Garden's configs are typed, not ranged: `check_values` checks every
number against `_RULES` and the rules between keys, naming every bad key.
"""

import dataclasses
import math
import numbers
import re
import typing
from typing import Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from official.core import config_definitions as cfg
from official.modeling import hyperparams
from realformer_tf.configs import registry
from realformer_tf.training import run_plan

# `runtime.mixed_precision_dtype` values `set_mixed_precision_policy` accepts.
MIXED_PRECISION_DTYPES = ("float32", "float16", "bfloat16")


def _leaves(config: hyperparams.Config, prefix: str
           ) -> Iterator[Tuple[str, object, Optional[type]]]:
  """(dotted key, value, declared type) of each leaf (a one-of's chosen
  branch only, list items as `key[i]`)."""
  for field in dataclasses.fields(config):
    value, key = getattr(config, field.name, None), prefix + field.name
    expected = field.type
    if typing.get_origin(expected) is typing.Union:  # Optional[int] etc.
      args = [a for a in typing.get_args(expected) if a is not type(None)]
      expected = args[0] if len(args) == 1 else None
    if isinstance(value, hyperparams.OneOfConfig):
      if value.type:
        yield from _leaves(value.get(), f"{key}.{value.type}.")
    elif isinstance(value, hyperparams.Config) and expected not in (
        int, float, bool, str):
      yield from _leaves(value, key + ".")
    elif isinstance(value, (list, tuple)):
      for i, item in enumerate(value):
        if isinstance(item, hyperparams.Config):
          yield from _leaves(item, f"{key}[{i}].")
        else:
          yield f"{key}[{i}]", item, None
    else:
      yield key, value, expected


def _number(value) -> bool:
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_POSITIVE = (lambda v: v > 0, "positive")
_NON_NEGATIVE = (lambda v: v >= 0, ">= 0")

# (pattern searched in the dotted key, (test, what it must be), note); a
# float is tested as the float32 the model computes with (1e-50 is 0).
_RULES = tuple((re.compile(pattern), rule, note) for pattern, rule, note in (
    (r"^trainer\.train_steps$", _POSITIVE, " to train"),
    (r"^trainer\.validation_steps$", (lambda v: v == -1 or v > 0,
                                      "positive, or -1"),
     " for the whole validation set"),
    (r"^trainer\.checkpoint_interval$", _NON_NEGATIVE, " (0: no checkpoints)"),
    (r"^trainer\.validation_interval$", _NON_NEGATIVE,
     " (0: evaluate at the end only)"),
    (r"^trainer\.max_to_keep$", _NON_NEGATIVE, " (0: keep all)"),
    (r"^trainer\.recovery_max_trials$", _NON_NEGATIVE, " (0: no roll-back)"),
    (r"\.(initial_)?learning_rate$", _POSITIVE,
     " (a negative rate trains as gradient ascent, zero not at all)"),
    (r"(warmup_steps|recovery_begin_steps|learning_rate|^runtime\.num_gpus|"
     r"weight_decay(_rate)?|epsilon(_?\d)?|clip(norm|value)|clip_norm|"
     r"initializer_range|inner_dim|_count|_timeout|_idx|\.values\[\d+\])$",
     _NON_NEGATIVE, ""),
    (r"(prefetch_buffer_size|cycle_length)$", (lambda v: v >= -1, ">= -1"),
     " (-1: tf.data.AUTOTUNE)"),
    (r"(dropout(_rate)?|label_smoothing|_prob|beta_[12])$",
     (lambda v: 0 <= v < 1, "in [0, 1)"), ""),
    (r"(alpha|linear_decay_fraction|momentum)$",
     (lambda v: 0 <= v <= 1, "in [0, 1]"), ""),
    (r"(_size|_steps|_length|_interval|_per_seq|_per_loop|_width|\.num_\w+|"
     r"\.max_\w+|\.decay_rate|doc_stride|loss_upper_bound)$", _POSITIVE, ""),
))


def _value_error(key: str, value, ranged: bool) -> Optional[str]:
  """A float must be finite in float32; a `ranged` number obeys `_RULES`."""
  if isinstance(value, float) and not abs(value) <= _FLOAT32_MAX:  # NaN too.
    return f"{key}={value!r} must be a finite number" + (
        f" in float32 (at most {_FLOAT32_MAX:.3g})" if math.isfinite(value)
        else "")
  for pattern, (test, bound), note in _RULES if ranged else ():
    if pattern.search(key):
      tested = float(np.float32(value)) if isinstance(value, float) else value
      if test(tested):
        return None
      shown = f"{value:g}" if isinstance(value, float) else str(value)
      if test(value):
        shown += f" (float32: {tested:g})"
      return f"{key}={shown} must be {bound}{note}"
  return None


def _other_errors(params: cfg.ExperimentConfig,
                  trains: bool) -> Iterator[str]:
  """The runtime's non-numeric keys, a training run's rules between keys."""
  dtype, scale = params.runtime.mixed_precision_dtype, params.runtime.loss_scale
  if dtype and dtype not in MIXED_PRECISION_DTYPES:
    yield (f"runtime.mixed_precision_dtype={dtype!r} is not one of "
           f"{', '.join(MIXED_PRECISION_DTYPES)} (float16 and bfloat16 give "
           "Keras's mixed_float16 / mixed_bfloat16 policies)")
  if scale is not None and scale != "dynamic" and not (
      _number(scale) and scale > 0):
    yield (f"runtime.loss_scale={scale!r} must be 'dynamic' or a positive "
           "number")
  if not trains:
    return
  trainer = params.trainer
  if (trainer.summary_interval and trainer.steps_per_loop > 0 and
      trainer.summary_interval % trainer.steps_per_loop):
    yield (f"trainer.summary_interval={trainer.summary_interval} must be a "
           f"multiple of trainer.steps_per_loop={trainer.steps_per_loop}")
  lr_config = trainer.optimizer_config.learning_rate
  lr, key = lr_config.get(), (
      f"trainer.optimizer_config.learning_rate.{lr_config.type}")
  if lr_config.type == "polynomial" and lr.decay_steps is None:
    yield (f"{key}.decay_steps is not set (usually = trainer.train_steps="
           f"{trainer.train_steps})")
  initial = getattr(lr, "initial_learning_rate", None)
  end = getattr(lr, "end_learning_rate", None)
  if _number(end) and _number(initial) and initial > 0 and end > initial:
    yield (f"{key}.end_learning_rate={end:g} must be in [0, "
           f"initial_learning_rate={initial:g}]")
  warmup = trainer.optimizer_config.warmup
  steps = getattr(warmup.get(), "warmup_steps", None) if warmup.type else None
  if _number(steps) and steps > trainer.train_steps > 0:
    yield (f"trainer.optimizer_config.warmup.{warmup.type}.warmup_steps="
           f"{steps} is longer than the run (trainer.train_steps="
           f"{trainer.train_steps}): the rate would never reach its peak")


def _value_errors(params: cfg.ExperimentConfig, trains: bool,
                  evaluates: bool, data_keys: List[str]) -> Iterator[str]:
  """`check_values`' problems."""
  unread = tuple(f"task.{name}." for name in params.task.as_dict()
                 if isinstance(getattr(params.task, name), cfg.DataConfig) and
                 f"task.{name}" not in data_keys)
  for key, value, _ in _leaves(params, ""):
    error = _number(value) and _value_error(
        key, value, not key.startswith(unread) and (
            evaluates if key == "trainer.validation_steps" else
            trains or not key.startswith("trainer.")))
    if error:
      yield error
  yield from _other_errors(params, trains)


def runtime_errors(params: cfg.ExperimentConfig) -> List[str]:
  """The problems of `params.runtime`'s values (checked before the plan)."""
  return [error for error in _value_errors(params, False, False, [])
          if error.startswith("runtime.")]


def _refusal(what: str, errors: List[str]) -> ValueError:
  """One error for every problem found, one a line."""
  return ValueError(f"Config values {what}: " + ";\n  ".join(errors) + ".")


def check_values(params: cfg.ExperimentConfig, trains: bool,
                 evaluates: bool, data_keys: List[str]) -> None:
  """Raises ValueError naming every out-of-range key of `params`: the
  trainer's if the mode `trains`, its `validation_steps` if it `evaluates`,
  the data configs of `data_keys`."""
  errors = list(_value_errors(params, trains, evaluates, data_keys))
  if errors:
    raise _refusal("out of range", errors)


def _type_error(key: str, value, expected: Optional[type]) -> Optional[str]:
  article = "an" if expected is int else "a"
  if isinstance(value, hyperparams.Config):  # e.g. `train_steps.x=1`
    return (f"{key} must be {article} {expected.__name__}, not the mapping "
            f"{value.as_dict()}")
  if value is not None and expected in (int, float, bool) and (
      # A bool is an int to isinstance; an int is a fine float.
      isinstance(value, bool) != (expected is bool) or not isinstance(
          value, (int, float) if expected is float else expected)):
    return (f"{key}={value!r} must be {article} {expected.__name__}, not "
            f"{type(value).__name__}")
  return None


def validate_field_types(params: cfg.ExperimentConfig) -> None:
  """Every int, float and bool field of `params` holds a value of that type
  (`Config.override` stores values unconverted)."""
  errors = [e for e in (_type_error(*leaf) for leaf in _leaves(params, ""))
            if e]
  if errors:
    raise _refusal("of the wrong type", errors)


def validate_model(params: cfg.ExperimentConfig) -> None:
  """Runs the encoder config's own `validate` now; errors name its key."""
  encoder_key, encoder = registry.task_encoder(params)
  if encoder is None:
    return
  try:
    encoder.validate()
  except ValueError as e:
    raise ValueError(f"{encoder_key}: {e}") from None


def _length_errors(key: str, data, encoder_key: Optional[str],
                   encoder) -> Iterator[str]:
  seq_length = getattr(data, "seq_length", None)
  if not _number(seq_length) or seq_length < 1:
    return  # `_RULES`: positive.
  max_positions = getattr(encoder, "max_position_embeddings", None)
  if max_positions is not None and seq_length > max_positions:
    yield (f"{key}.seq_length={seq_length} exceeds "
           f"{encoder_key}.max_position_embeddings={max_positions}: shorten "
           "the sequences or enlarge the position table")
  max_predictions = getattr(data, "max_predictions_per_seq", None)
  if max_predictions is not None and max_predictions > seq_length:
    yield (f"{key}.max_predictions_per_seq={max_predictions} exceeds "
           f"{key}.seq_length={seq_length}")


def validate_config(params: cfg.ExperimentConfig, mode: str) -> None:
  """The checks of `params` for `mode` that read no file: values and
  sequence lengths in one error, then the GPUs."""
  data_configs = run_plan.data_configs(params, mode)
  errors = list(_value_errors(params, mode in run_plan.TRAIN_MODES,
                              mode in run_plan.EVAL_MODES,
                              [key for key, _ in data_configs]))
  encoder_key, encoder = registry.task_encoder(params)
  for key, data in data_configs:
    errors += _length_errors(key, data, encoder_key, encoder)
  if errors:
    raise _refusal("out of range", errors)
  validate_runtime(params)


def validate_batch_sizes(params: cfg.ExperimentConfig, mode: str,
                         num_replicas: int) -> None:
  """Each global batch must split evenly over the replicas."""
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
