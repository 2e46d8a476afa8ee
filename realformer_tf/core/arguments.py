"""Constructor arguments: the checks both faces share; the tf_keras specs.

An `Argument` has a name per face (Model Garden's, keras-hub's:
docs/names.md), a default, a check and Model Garden's other names; a `Spec`
binds a tf_keras layer's call and writes its config back (values under the
Model Garden name, `key`). The Keras 3 face writes its signatures out and
uses the checks by keras-hub name, `refuse_unknown` and `MODEL_GARDEN_NAMES`.
"""

import dataclasses
import difflib
import inspect
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from realformer_tf.core import options

TF_KERAS = "tf_keras"  # The one face these specs bind.
REQUIRED = inspect.Parameter.empty


def positive_int(name, value):
  return options.check_positive_int(name, value)


def rate(name, value):
  return options.check_rate(name, value)


def positive_float(name, value):
  if not options.float_or_nan(value) > 0:
    raise ValueError(f"{name} must be a positive number, got {value!r}.")
  return float(value)


def flag(name, value):
  del name  # Any truthy value.
  return bool(value)


@dataclasses.dataclass(frozen=True)
class Argument:
  """One constructor argument.

  Attributes:
    key: Its name inside (Model Garden's block's).
    keras3: Its Keras 3 name (docs/names.md), not bound here; None = `key`.
    default: `REQUIRED` or the default value.
    check: `(name, value) -> value`, normalizing; raises ValueError naming
      the argument and the value.
    kind: "initializer" or "activation": (de)serialized by the face.
    aliases: Model Garden's other names (BertEncoderV2's, the decoder's),
      taken as they are on the tf_keras face.
    tf_keras: Its tf_keras name where a Model Garden class names it
      otherwise (seq2seq's `intermediate_size`); None = `key`.
  """
  key: str
  keras3: Optional[str] = None
  default: Any = REQUIRED
  check: Optional[Callable[[str, Any], Any]] = None
  kind: str = ""
  aliases: Tuple[str, ...] = ()
  tf_keras: Optional[str] = None

  def name(self, face: str) -> str:
    del face  # TF_KERAS.
    return self.tf_keras or self.key


class Spec:
  """Arguments of a layer, in order (positional binding follows it)."""

  def __init__(self, *arguments: Argument):
    self.arguments = arguments

  def __add__(self, other: "Spec") -> "Spec":
    return Spec(*self.arguments, *other.arguments)

  def replace(self, **defaults) -> "Spec":
    """This spec with other defaults, by key."""
    return Spec(*(dataclasses.replace(a, default=defaults[a.key])
                  if a.key in defaults else a for a in self.arguments))

  def only(self, *keys: str) -> "Spec":
    """These arguments, in this order."""
    by_key = {a.key: a for a in self.arguments}
    return Spec(*(by_key[key] for key in keys))

  def renamed(self, **tf_keras_names) -> "Spec":
    """This spec with other tf_keras names, by key."""
    return Spec(*(dataclasses.replace(a, tf_keras=tf_keras_names[a.key])
                  if a.key in tf_keras_names else a for a in self.arguments))

  def keys(self, face: str):
    return [a.key for a in self.on(face)]

  def on(self, face: str):
    del face  # TF_KERAS.
    return list(self.arguments)

  def signature(self, face: str) -> inspect.Signature:
    """The constructor's signature in `face`'s names, for `help()`."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        [inspect.Parameter(a.name(face), kind, default=a.default)
         for a in self.on(face)] +
        [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])

  def bind(self, face: str, owner: str, args: tuple, kwargs: Dict[str, Any],
           deserialize: Dict[str, Callable[[Any], Any]]):
    """`(values by key, the other kwargs)` of a constructor call.

    Model Garden's aliases are taken too. An argument whose default is not
    None is checked even when None is given (`score_dtype=None` is refused
    here, not deep inside Keras later).

    Args:
      face, owner, args, kwargs, deserialize: The face, the class name (for
        messages), the call's arguments, the (de)serializers of `kind`s.

    Raises:
      TypeError: A missing required argument, one given twice or too many
        positional ones.
      ValueError: A value its check refuses, naming argument and value.
    """
    arguments = self.on(face)
    if len(args) > len(arguments):
      raise TypeError(f"{owner} takes {len(arguments)} positional arguments, "
                      f"got {len(args)}.")
    kwargs = dict(kwargs)
    given = {a.key: value for a, value in zip(arguments, args)}
    for a in arguments:
      name = a.name(face)
      old = [n for n in dict.fromkeys((a.key, a.tf_keras or a.key) + a.aliases)
             if n != name and n in kwargs]
      for n in [name] + old:
        if n in kwargs:
          if a.key in given:
            raise TypeError(f"{owner} got {name!r} twice (as {n!r}).")
          given[a.key] = kwargs.pop(n)
    values = {}
    for a in arguments:
      value = given.get(a.key, a.default)
      if value is REQUIRED:
        raise TypeError(f"{owner} needs {a.name(face)}.")
      if a.kind and value is not None:
        value = deserialize[a.kind](value)
      if a.check is not None and (value is not None or
                                  a.default is not None):
        value = a.check(f"{owner}: {a.name(face)}", value)
      values[a.key] = value
    return values, kwargs

  def config(self, face: str, values: Dict[str, Any],
             serialize: Dict[str, Callable[[Any], Any]]) -> Dict[str, Any]:
    """`values` (by key) as a config in the face's names."""
    config = {}
    for a in self.on(face):
      value = values[a.key]
      if a.kind and value is not None:
        value = serialize[a.kind](value)
      config[a.name(face)] = value
    return config


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
  """Raises TypeError for a keyword in `kwargs` that is not in `base`.

  Keras' functional models (`Functional.__init__`) drop unknown keywords
  silently: `droput=0.3` trained with the default dropout.

  Args:
    owner: The class name, for the message.
    kwargs: The keywords left after the class' own arguments were taken.
    base: The keywords the base class takes.
    own: The class' own argument names, offered as the closest match too.
    renamed: Other names (the other face's: docs/names.md), each pointed to
      its valid name (of a tuple of names: the first valid one).

  Raises:
    TypeError: naming the unknown keyword and the closest valid name (its
      `renamed` one, else as `difflib` finds it), or the valid names when
      none is close.
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
    {name: positive_int for name in _POSITIVE},
    dropout=rate, attention_dropout=rate, intermediate_dropout=rate,
    layer_norm_epsilon=positive_float,
    residual_attention=option(options.validate_residual_attention),
    score_dtype=option(options.validate_score_dtype),
    attention_implementation=option(options.validate_attention_implementation),
    layer_index=lambda name, value: options.check_layer_index(value))


def check_keras_hub(owner: str, **values):
  """Raises a ValueError naming `owner`, the argument and its value for a
  value (None too) its `KERAS_HUB_CHECKS` entry refuses."""
  for name, value in values.items():
    KERAS_HUB_CHECKS[name](f"{owner}: {name}", value)


# The blocks' arguments, both faces (the networks and backbones pass them).
BLOCK = Spec(
    Argument("num_attention_heads", "num_heads", check=positive_int),
    Argument("inner_dim", "intermediate_dim", check=positive_int,
             aliases=("intermediate_size",)),
    Argument("inner_activation", "activation", "gelu", kind="activation",
             aliases=("intermediate_activation", "activation")),
    Argument("output_dropout", "dropout", 0.0, rate,
             aliases=("dropout_rate",)),
    Argument("attention_dropout", None, 0.0, rate,
             aliases=("attention_dropout_rate",)),
    Argument("norm_first", "normalize_first", False, flag),
    Argument("norm_epsilon", "layer_norm_epsilon", 1e-12, positive_float),
    Argument("kernel_initializer", None, "glorot_uniform",
             kind="initializer"),
    Argument("residual_attention", None, "sum",
             option(options.validate_residual_attention)),
    Argument("layer_index", None, 0,
             lambda name, value: options.check_layer_index(value)),
    Argument("score_dtype", None, "auto",
             option(options.validate_score_dtype)),
    # Model Garden's recompute_grad is TensorFlow's; the kernel is JAX's.
    Argument("recompute", None, False, flag))

DECODER_BLOCK = BLOCK.replace(inner_activation="relu") + Spec(
    Argument("use_bias", None, True, flag),
    Argument("intermediate_dropout", None, 0.0, rate),
    Argument("attention_initializer", None, None, kind="initializer"),
    Argument("self_residual", None, True, flag),
    Argument("cross_residual", None, True, flag),
    Argument("cross_attention", None, True, flag))

# A stack's: Model Garden's (BertEncoderV2) and keras-hub's (BertBackbone).
STACK = Spec(
    Argument("vocab_size", "vocabulary_size", check=positive_int),
    Argument("hidden_size", "hidden_dim", check=positive_int),
    Argument("num_layers", None, check=positive_int),
    Argument("max_sequence_length", None, 512, positive_int),
    Argument("type_vocab_size", "num_segments", 16, positive_int),
    Argument("final_layer_norm", None, None))

# The attention layers' own arguments (the rest are Keras').
ATTENTION = BLOCK.only("residual_attention", "layer_index", "score_dtype",
                       "recompute")
