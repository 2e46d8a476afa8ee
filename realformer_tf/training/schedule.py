"""The learning-rate schedule follows `trainer.train_steps` set on its own.

Every registered experiment (and every YAML of ours) sets `train_steps`
together with the schedule's decay length (and warm-up). A user who changes
only `trainer.train_steps` (`--params_override=trainer.train_steps=20`) would
otherwise get a schedule for the old length: SQuAD's config restriction
`decay_steps == trainer.train_steps` fails in Model Garden's `validate`, and
the other experiments keep decaying over the old length (the rate never
reaches 0, or reaches it early and trains at rate 0).

`follow_train_steps` moves `decay_steps` to the new `train_steps` and scales
the warm-up by the same factor (same warm-up proportion), unless the same or
a later source (config file or `--params_override`) set them: explicit values
always win. Model Garden has no such rule (its parser applies overrides
blindly), hence this module.
"""

from typing import Any, Dict, Mapping, Sequence, Tuple

from absl import logging

from official.core import config_definitions as cfg

TRAIN_STEPS_KEY = "trainer.train_steps"

# Dotted config key -> (position of the last source that set it, its name).
ExplicitKeys = Dict[str, Tuple[int, str]]


def dotted_keys(overrides: Mapping[str, Any], prefix: str = "") -> list:
  """The dotted paths of the leaves of a nested override dict."""
  keys = []
  for key, value in overrides.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping) and value:
      keys.extend(dotted_keys(value, path + "."))
    else:
      keys.append(path)
  return keys


def explicit_keys(sources: Sequence[Tuple[str, Mapping[str, Any]]]
                 ) -> ExplicitKeys:
  """Which source set each key last, from `(source name, overrides)` in order."""
  result = {}
  for index, (name, overrides) in enumerate(sources):
    for key in dotted_keys(overrides):
      result[key] = (index, name)
  return result


def _set_after(explicit: ExplicitKeys, key: str, index: int) -> bool:
  return key in explicit and explicit[key][0] >= index


def follow_train_steps(params: cfg.ExperimentConfig,
                       explicit: ExplicitKeys) -> None:
  """Fits decay length and warm-up to an explicitly set `trainer.train_steps`.

  Args:
    params: The parsed config, not locked; changed in place.
    explicit: `explicit_keys` of the config files and overrides.
  """
  if TRAIN_STEPS_KEY not in explicit:
    return
  index, source = explicit[TRAIN_STEPS_KEY]
  train_steps = params.trainer.train_steps
  optimizer = params.trainer.optimizer_config
  lr_type = optimizer.learning_rate.type
  lr = optimizer.learning_rate.get() if lr_type else None
  decay_key = f"trainer.optimizer_config.learning_rate.{lr_type}.decay_steps"
  old_decay = getattr(lr, "decay_steps", None)
  if (not isinstance(train_steps, int) or isinstance(train_steps, bool) or
      train_steps <= 0 or not isinstance(old_decay, int) or
      old_decay == train_steps or _set_after(explicit, decay_key, index)):
    return
  lr.decay_steps = train_steps
  changes = [f"{decay_key}: {old_decay} -> {train_steps}"]
  warmup_type = optimizer.warmup.type
  warmup = optimizer.warmup.get() if warmup_type else None
  warmup_key = f"trainer.optimizer_config.warmup.{warmup_type}.warmup_steps"
  old_warmup = getattr(warmup, "warmup_steps", None)
  if (isinstance(old_warmup, int) and old_warmup > 0 and old_decay > 0 and
      not _set_after(explicit, warmup_key, index)):
    warmup.warmup_steps = int(round(old_warmup * train_steps / old_decay))
    changes.append(f"{warmup_key}: {old_warmup} -> {warmup.warmup_steps} "
                   f"(same {old_warmup / old_decay:.0%} of the run)")
  logging.info(
      "%s=%d (from %s): the learning-rate schedule follows it: %s. Set these "
      "keys explicitly to choose other values.", TRAIN_STEPS_KEY, train_steps,
      source, "; ".join(changes))
