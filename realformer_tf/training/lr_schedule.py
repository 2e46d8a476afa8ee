"""The learning-rate schedule follows `trainer.train_steps` set on its own.

Every experiment and YAML of ours sets `train_steps` with the schedule's decay
length (and warm-up). Changing only `trainer.train_steps` would keep the old
schedule: SQuAD's restriction `decay_steps == trainer.train_steps` fails in
Model Garden's `validate`, the others decay over the old length. Model
Garden's parser applies overrides blindly, so `follow_train_steps` moves
`decay_steps` to the new length and scales the warm-up alike, unless the same
or a later source set them: explicit values always win.
"""

from typing import Any, Dict, Mapping, Sequence, Tuple

from absl import logging

from official.core import config_definitions as cfg

TRAIN_STEPS_KEY = "trainer.train_steps"

# Dotted config key -> (position of the last source that set it, its name).
ExplicitKeys = Dict[str, Tuple[int, str]]


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


def follow_train_steps(params: cfg.ExperimentConfig,
                       explicit: ExplicitKeys) -> None:
  """Fits decay length and warm-up (in the unlocked `params`) to a
  `trainer.train_steps` that `explicit` (`explicit_keys`) says was set."""
  if TRAIN_STEPS_KEY not in explicit:
    return
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
    return
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
  logging.info(
      "%s=%d (from %s): the learning-rate schedule follows it: %s. Set these "
      "keys explicitly to choose other values.", TRAIN_STEPS_KEY, train_steps,
      source, "; ".join(changes))
