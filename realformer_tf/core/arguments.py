"""Constructor arguments: the checks both faces share, and their names.

Each face writes its signatures out in its host library's names
(docs/names.md); `check` holds a value of either face's names to one rule,
`refuse_unknown` names the closest valid keyword of a typo.
"""

import difflib
import inspect
from typing import Any, Dict, Iterable, Optional, Tuple

from realformer_tf.core import options


def positive_float(name, value):
  if not options.float_or_nan(value) > 0:
    raise ValueError(f"{name} must be a positive number, got {value!r}.")
  return float(value)


def keyword_names(*classes) -> Tuple[str, ...]:
  """The named keywords of the classes' constructors (`self` left out)."""
  return tuple(dict.fromkeys(
      name for cls in classes
      for name, p in inspect.signature(cls.__init__).parameters.items()
      if name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                       p.KEYWORD_ONLY)))


def refuse_unknown(owner: str, kwargs: Dict[str, Any], base: Iterable[str],
                   own: Iterable[str] = (),
                   renamed: Optional[Dict[str, Any]] = None):
  """Raises TypeError for a keyword in `kwargs` that is not in `base`, as
  Keras' functional models take unknown keywords silently.

  The message names `owner`, the keyword and the closest valid name of
  `own` and `base`: its `renamed` one (the other face's name -> a valid
  name or a tuple, the first valid one counts), else `difflib`'s, else all.
  """
  base = list(base)
  unknown = [name for name in kwargs if name not in base]
  if not unknown:
    return
  valid = list(dict.fromkeys(list(own) + base))
  other = (renamed or {}).get(unknown[0], ())
  close = [n for n in ((other,) if isinstance(other, str) else other)
           if n in valid][:1] or difflib.get_close_matches(unknown[0], valid,
                                                           n=1)
  hint = (f"did you mean {close[0]!r}?" if close else
          f"it takes {', '.join(valid)}.")
  raise TypeError(f"{owner} got an unexpected keyword argument "
                  f"{unknown[0]!r}: {hint}")


def option(validate):
  """A check of `validate(value)`, whose message gets the owner's name."""
  def check(name, value):
    try:
      return validate(value)
    except ValueError as e:
      raise ValueError(f"{name.split(':')[0]}: {e}") from None
  return check


# Model Garden's names (the tf_keras face's, docs/names.md) -> keras-hub's.
MODEL_GARDEN_NAMES = {
    "num_attention_heads": "num_heads", "inner_dim": "intermediate_dim",
    "intermediate_size": "intermediate_dim", "inner_activation": "activation",
    "intermediate_activation": "activation", "output_dropout": "dropout",
    "dropout_rate": "dropout",
    # A backbone's one `dropout` is both of Model Garden's rates.
    "attention_dropout": "dropout",
    "attention_dropout_rate": ("attention_dropout", "dropout"),
    "norm_first": "normalize_first", "norm_epsilon": "layer_norm_epsilon",
    "vocab_size": "vocabulary_size", "hidden_size": "hidden_dim",
    "type_vocab_size": "num_segments"}

_POSITIVE = ("num_heads", "intermediate_dim", "vocabulary_size", "num_layers",
             "hidden_dim", "max_sequence_length", "num_segments")
# The checks of the Keras 3 face's arguments, by their (keras-hub's) names.
KERAS_HUB_CHECKS = dict(
    {name: options.check_positive_int for name in _POSITIVE},
    dropout=options.check_rate, attention_dropout=options.check_rate,
    intermediate_dropout=options.check_rate,
    layer_norm_epsilon=positive_float,
    residual_attention=option(options.validate_residual_attention),
    score_dtype=option(options.validate_score_dtype),
    attention_implementation=option(options.validate_attention_implementation),
    layer_index=lambda name, value: options.check_layer_index(value))


def check(owner: str, **values):
  """Raises a ValueError naming `owner`, the argument and its value for a
  value (None too) its `KERAS_HUB_CHECKS` entry refuses; a Model Garden name
  is checked as its keras-hub name."""
  for name, value in values.items():
    hub_name = MODEL_GARDEN_NAMES.get(name, name)
    hub_name = hub_name if isinstance(hub_name, str) else hub_name[0]
    KERAS_HUB_CHECKS[hub_name](f"{owner}: {name}", value)

