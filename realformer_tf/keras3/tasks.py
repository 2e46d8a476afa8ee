"""What our keras-hub tasks add to keras-hub's: checks, export, preset names.

`@realformer_task` copies `RealFormerTask`'s members into each task class: it
refuses a preprocessor larger than the backbone, exports a named signature at
the preprocessor's lengths, records our class names in a preset, fuses
`steps_per_execution` on JAX, and saves and exports whole or not at all.
"""

import functools
import inspect
import json
import os

import keras
import keras_hub
from keras_hub.src.utils import preset_utils

from realformer_tf.compat import keras as compat_keras
from realformer_tf.core import arguments
from realformer_tf.keras3 import fused_steps
from realformer_tf.keras3 import input_checks
from realformer_tf.keras3 import saving

# keras-hub's `Task.__init__` keywords besides a task's own (any other is
# dropped silently by `Functional.__init__`).
_TASK_KEYWORDS = ("compile", "name", "trainable")

# Inputs whose second dimension is the preprocessor's `mask_selection_length`
# (`BertMaskedLM`), not its `sequence_length`.
_MASK_INPUTS = ("mask_positions",)


def _vocabulary_size(tokenizer):
  """The tokenizer's number of ids, or None while it has no vocabulary (then
  keras-hub's `vocabulary_size()` raises)."""
  if tokenizer is None or getattr(tokenizer, "vocabulary", True) is None:
    return None
  return tokenizer.vocabulary_size()


def check_preprocessor(backbone, preprocessor):
  """Raises a ValueError naming both sizes if `preprocessor` (None: nothing
  to check) makes more ids or a longer sequence than `backbone` takes."""
  if preprocessor is None or backbone is None:
    return
  vocabulary = _vocabulary_size(getattr(preprocessor, "tokenizer", None))
  rows = backbone.vocabulary_size
  if vocabulary is not None and vocabulary > rows:
    raise ValueError(
        f"The preprocessor's tokenizer has {vocabulary} tokens but the "
        f"backbone's token embedding has {rows} rows (vocabulary_size="
        f"{rows}): ids {rows} and up have no embedding (NaN on JAX, an "
        "InvalidArgumentError on TensorFlow). Use the vocabulary the "
        "backbone was trained with (a train.py run's data/vocab.txt), or a "
        f"backbone with vocabulary_size >= {vocabulary}.")
  length = getattr(preprocessor, "sequence_length", None)
  positions = backbone.max_sequence_length
  if length is not None and length > positions:
    raise ValueError(
        f"The preprocessor's sequence_length is {length} but the backbone "
        f"has {positions} positions (max_sequence_length={positions}). Use "
        f"sequence_length <= {positions}.")


def add_preset_sequence_length(preprocessor_cls, loader, kwargs):
  """Defaults `sequence_length` (in `kwargs`, in place) to the preset
  backbone's positions if fewer: keras-hub builds a preprocessor a preset
  lacks from its tokenizer only, and the class default (512) would exceed a
  small model's positions. `loader`: keras-hub's preset loader."""
  if "sequence_length" in kwargs:
    return
  config = getattr(loader, "config", None) or {}
  positions = config.get("config", {}).get("max_sequence_length")
  default = inspect.signature(preprocessor_cls.__init__).parameters[
      "sequence_length"].default
  if positions is not None and positions < default:
    kwargs["sequence_length"] = positions


class PresetSequenceLength:
  """Preprocessor mixin: `add_preset_sequence_length` when keras-hub builds
  the preprocessor from a preset. List it before the keras-hub base class."""

  @classmethod
  def _add_missing_kwargs(cls, loader, kwargs):
    kwargs = super()._add_missing_kwargs(loader, kwargs)
    add_preset_sequence_length(cls, loader, kwargs)
    return kwargs


def preset_task_names(backbone):
  """The task classes built on `backbone`'s class, for `metadata.json`."""
  return sorted({cls.__name__
                 for cls in preset_utils.list_subclasses(keras_hub.models.Task)
                 if cls.backbone_cls is type(backbone)})


def write_preset_task_names(preset_dir, backbone):
  """Rewrites `metadata.json`'s `tasks` in `preset_dir` as our classes (on
  `saving.save_preset`'s temp directory, before it is swapped in)."""
  path = os.path.join(preset_dir, preset_utils.METADATA_FILE)
  with open(path, encoding="utf-8") as f:
    metadata = json.load(f)
  # keras-hub's saver lists `task.__base__.__name__`: `BertMaskedLM` for ours.
  metadata["tasks"] = preset_task_names(backbone)
  # As keras-hub writes it (`_save_metadata`): indent 4.
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps(metadata, indent=4))


# Not a base class: listed first it is the preset's task name (`__base__`),
# listed last a `Task` diamond ("a __bases__ item causes an inheritance cycle").
def realformer_task(cls):
  """Class decorator: puts `RealFormerTask`'s members on `cls`, a keras-hub
  `Task` subclass; a TypeError if a class between them defines one (it
  would be skipped: the members call `Task`'s by name)."""
  members = [name for name in vars(RealFormerTask)
             if not name.startswith("__")]
  for klass in cls.__mro__[1:cls.__mro__.index(keras_hub.models.Task)]:
    clash = sorted(set(members) & set(vars(klass)))
    if clash:
      raise TypeError(f"{klass.__name__} defines {clash}, which "
                      f"@realformer_task would skip on {cls.__name__}.")
  for name in members:
    setattr(cls, name, vars(RealFormerTask)[name])
  _refuse_unknown_keywords(cls)
  return cls


def _refuse_unknown_keywords(cls):
  """Wraps `cls.__init__` to refuse keywords nothing takes (`droput=0.3`),
  naming the closest valid one (`arguments.refuse_unknown`)."""
  init = cls.__init__
  own = arguments.keyword_names(cls)

  @functools.wraps(init)
  def checked_init(self, *args, **kwargs):
    arguments.refuse_unknown(
        cls.__name__, {k: v for k, v in kwargs.items() if k not in own},
        _TASK_KEYWORDS, own)
    init(self, *args, **kwargs)

  cls.__init__ = checked_init


class RealFormerTask:
  """The members `@realformer_task` copies (not a base class: see there)."""

  @property
  def preprocessor(self):
    """The task's preprocessor (`keras_hub.models.Task.preprocessor`)."""
    return getattr(self, "_preprocessor", None)

  @preprocessor.setter
  def preprocessor(self, value):
    # keras-hub's tasks set `self.backbone` first, then this (bert_*.py).
    check_preprocessor(self.backbone, value)
    self._preprocessor = value

  def preprocess_samples(self, x, y=None, sample_weight=None):
    # Again: presets and `load_model` set the vocabulary after the task is
    # built. Once per traced batch function, not per step.
    check_preprocessor(self.backbone, self.preprocessor)
    return keras_hub.models.Task.preprocess_samples(self, x, y=y,
                                            sample_weight=sample_weight)

  # The backbone's inputs are checked on the host before Keras traces;
  # `predict`/`evaluate` keep the variables if a traced batch fails
  # (`compat.keras`).
  def fit(self, x=None, *args, **kwargs):
    self._check_data(x, args[0] if args else kwargs.get("y"))
    return keras_hub.models.Task.fit(self, x, *args, **kwargs)

  def evaluate(self, x=None, *args, **kwargs):
    self._check_data(x, args[0] if args else kwargs.get("y"))
    return compat_keras.keeping_variables(
        self, lambda: keras_hub.models.Task.evaluate(self, x, *args, **kwargs))

  def predict(self, x, *args, **kwargs):
    self._check_data(x)
    return compat_keras.keeping_variables(
        self, lambda: keras_hub.models.Task.predict(self, x, *args, **kwargs))

  # On JAX with `steps_per_execution=N > 1`, N steps in one dispatch
  # (`fused_steps`: Keras' own loop dispatches each step).
  def make_train_function(self, force=False):
    self._make_fused_or_keras_function("train", force)

  def make_test_function(self, force=False):
    self._make_fused_or_keras_function("test", force)

  def _make_fused_or_keras_function(self, step, force):
    """Keras' `make_{step}_function`, then the fused form where it
    applies; `force=False` keeps a function already made, as Keras does."""
    name = f"{step}_function"
    if getattr(self, name) is not None and not force:
      return
    getattr(keras_hub.models.Task, f"make_{name}")(self, force=force)
    if fused_steps.applies(self):
      setattr(self, name, fused_steps.FusedSteps(self, step))

  def _check_data(self, x, y=None):
    if self.preprocessor is None and isinstance(x, dict):
      input_checks.check_inputs(
          self.backbone, {k: v for k, v in x.items() if k in self.backbone.input})
    loss = getattr(self, "loss", None)
    loss = loss if isinstance(loss, str) else getattr(loss, "name", "")
    if hasattr(self, "num_classes") and "sparse_categorical" in str(loss):
      input_checks.check_labels(type(self).__name__, y, self.num_classes)

  def serving_input_signature(self):
    """`export()`'s default `{input name: keras.InputSpec([None, length])}`:
    the preprocessor's lengths, else the backbone's `max_sequence_length`
    (and any number of mask positions)."""
    preprocessor = self.preprocessor
    length = getattr(preprocessor, "sequence_length", None)
    if length is None:
      length = self.backbone.max_sequence_length
    masks = getattr(preprocessor, "mask_selection_length", None)
    return {
        name: keras.InputSpec(
            shape=(None, masks if name in _MASK_INPUTS else length),
            dtype=tensor.dtype, name=name)
        for name, tensor in self.input.items()}

  def export(self, filepath, format="tf_saved_model",  # pylint: disable=redefined-builtin
             verbose=None, input_signature=None, **kwargs):
    """`keras.Model.export`, by default with `serving_input_signature()`
    (named inputs on every backend), written whole or not at all."""
    if input_signature is None:
      # Functional models take one positional argument, the dict of inputs
      # (keras/src/export/export_utils.py, `get_input_signature`).
      input_signature = [self.serving_input_signature()]
    return saving.WritesWhole.export(self, filepath, format=format,
                                     verbose=verbose,
                                     input_signature=input_signature,
                                     **kwargs)

  # `keras.Model.save`, a `.keras` file written whole or not at all; the
  # backbones' too (`saving.WritesWhole`).
  save = saving.WritesWhole.save

  @classmethod
  def from_preset(cls, preset, load_weights=True, **kwargs):
    """keras-hub's `Task.from_preset`; a preset directory that a killed
    save left set aside is named with its backup
    (`saving.check_not_set_aside`), not called an unknown preset."""
    saving.check_not_set_aside(preset)
    input_checks.check_preset(preset)
    return keras_hub.models.Task.from_preset.__func__(
        cls, preset, load_weights=load_weights, **kwargs)

  def save_to_preset(self, preset_dir, max_shard_size=10):
    """keras-hub's `Task.save_to_preset`, `metadata.json` naming our tasks,
    written whole or not at all (`saving.save_preset`)."""
    def write(directory):
      keras_hub.models.Task.save_to_preset(self, directory,
                                           max_shard_size=max_shard_size)
      write_preset_task_names(directory, self.backbone)
    saving.save_preset(preset_dir, write)
