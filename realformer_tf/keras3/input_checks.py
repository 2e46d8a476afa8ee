"""What our Keras 3 models check of their inputs (keras-hub's check nothing).

`check_shapes` checks static shapes and dtypes always; `check_ids` and
`check_labels` values where they are concrete, never inside a traced
function; `check_preset` that a preset is local (nothing downloads here).
"""

import os

import keras
from keras import ops
import numpy as np

from realformer_tf.compat import keras as compat_keras

# The inputs holding ids, and the backbone attribute that bounds each.
_ID_LIMITS = (("token_ids", "vocabulary_size"), ("segment_ids", "num_segments"))


def id_limits(backbone):
  """`{input name: number of ids}` of the backbone's id inputs."""
  names = set(backbone.input) if isinstance(backbone.input, dict) else set()
  return {name: getattr(backbone, limit) for name, limit in _ID_LIMITS
          if name in names and hasattr(backbone, limit)}


def concrete(value):
  """`value` as a NumPy array if its values can be read now, else None (a
  traced value or a `KerasTensor`, whose conversion raises)."""
  if isinstance(value, keras.KerasTensor):
    return None
  if isinstance(value, np.ndarray):
    return value
  try:
    return np.asarray(ops.convert_to_numpy(value))
  except (TypeError, ValueError, NotImplementedError, AttributeError):
    return None


def _shape(value):
  """The static shape; None for an unknown dimension, or a symbolic one (JAX
  export's `batch`, which cannot be compared)."""
  shape = getattr(value, "shape", None)
  if shape is None:
    shape = np.shape(value)
  return tuple(int(d) if isinstance(d, (int, np.integer)) else None
               for d in shape)


def check_shapes(owner, inputs, max_sequence_length):
  """Raises ValueError naming `owner` for `{name: array or tensor}` inputs
  of a rank, shape or length the backbone cannot take."""
  shapes = {name: _shape(value) for name, value in inputs.items()}
  for name, shape in shapes.items():
    if len(shape) != 2:
      raise ValueError(f"{owner}: {name} must be [batch, sequence] (rank 2), "
                       f"got shape {shape}.")
  reference = "token_ids"
  for name, shape in shapes.items():
    want = shapes.get(reference)
    if want is None or name == reference:
      continue
    if any(a is not None and b is not None and a != b
           for a, b in zip(shape, want)):
      raise ValueError(
          f"{owner}: {name} has shape {shape} but {reference} has shape "
          f"{want}: every input must have {reference}'s shape (a mask is "
          "not broadcast over the batch or the sequence).")
  for name, (_, length) in sorted(shapes.items(),
                                 key=lambda item: item[0] != reference):
    if length is not None and length > max_sequence_length:
      raise ValueError(
          f"{owner}: {name} is {length} tokens long but the backbone has "
          f"{max_sequence_length} positions (max_sequence_length="
          f"{max_sequence_length}); pass at most {max_sequence_length} "
          "tokens (cut or split the sequence).")


def check_ids(owner, inputs, limits):
  """Raises ValueError for an id input of a float dtype, or a concrete id
  outside its `limits` (`id_limits`); traced values are not read (a device
  to host copy each step)."""
  for name, limit in limits.items():
    dtype = getattr(inputs.get(name), "dtype", None)
    if dtype is not None and "float" in str(dtype):
      raise ValueError(
          f"{owner}: {name} has dtype {keras.backend.standardize_dtype(dtype)}"
          ", but ids must be integers (Keras would truncate each value to an "
          f"id: 3.7 to 3); pass {name} as int32.")
    values = concrete(inputs.get(name)) if name in inputs else None
    if values is None or not values.size:
      continue
    bad = np.argwhere((values < 0) | (values >= limit))
    if len(bad):
      where = tuple(int(i) for i in bad[0])
      raise ValueError(
          f"{owner}: {name}[{', '.join(map(str, where))}] is "
          f"{values[where]}, outside [0, {limit}) (the backbone's "
          f"{dict(_ID_LIMITS)[name]}={limit}); {len(bad)} id(s) out of "
          "range. On JAX such an id would give NaN, silently.")


def check_labels(owner, labels, num_classes):
  """Raises ValueError for concrete class labels (one per example) that are
  not whole numbers in [0, num_classes); one-hot labels are not checked."""
  values = None if labels is None else concrete(labels)
  if values is None or not values.size or (
      values.ndim > 1 and values.shape[-1] != 1):
    return
  bad = np.argwhere((values < 0) | (values >= num_classes) |
                    (values != np.floor(values)))
  if len(bad):
    where = tuple(int(i) for i in bad[0])
    raise ValueError(
        f"{owner}: label[{', '.join(map(str, where))}] is {values[where]}, "
        f"not a class id in [0, {num_classes}) (num_classes={num_classes}); "
        f"{len(bad)} label(s) out of range.")


# keras-hub's model hubs, which `from_preset` would download from.
_HUBS = ("kaggle://", "hf://", "modelscope://")


def check_preset(preset):
  """Raises ValueError for a preset that is not a local directory or file
  (or one on a file system such as gs://): nothing here downloads."""
  if not isinstance(preset, str) or os.path.exists(preset) or (
      "://" in preset and not preset.startswith(_HUBS)):
    return
  if not preset.startswith(_HUBS) and (
      os.sep in preset or preset.startswith((".", "~"))):
    raise FileNotFoundError(f"{preset}: no such preset directory.")
  raise ValueError(
      f"{preset!r} is not a preset directory: our presets are folders "
      "written by `save_to_preset`, and nothing here downloads. A keras-hub "
      "BERT preset becomes a RealFormerBackbone with "
      "realformer_tf.checkpoints.keras3_weight_map.load_bert_backbone("
      f"keras_hub.models.BertBackbone.from_preset({preset!r})), which "
      "downloads it through keras-hub.")


def check_inputs(backbone, inputs):
  """Both checks, for a dict of inputs (anything else is left to Keras)."""
  if not isinstance(inputs, dict):
    return
  owner = type(backbone).__name__
  check_shapes(owner, inputs, backbone.max_sequence_length)
  check_ids(owner, inputs, id_limits(backbone))


class ChecksInputs:
  """Backbone mixin: `check_inputs` on every call and on the host data of
  `fit`, `evaluate`, `predict` and `*_on_batch` (a dataset is checked per
  traced batch, shapes only). List it before the Keras base."""

  # `Functional.call`'s signature: Keras reads it to pass `training`.
  def call(self, inputs, training=None, mask=None, **kwargs):
    check_inputs(self, inputs)
    return super().call(inputs, training=training, mask=mask, **kwargs)

  def fit(self, x=None, *args, **kwargs):
    check_inputs(self, x)
    return super().fit(x, *args, **kwargs)

  def evaluate(self, x=None, *args, **kwargs):
    check_inputs(self, x)
    return compat_keras.keeping_variables(
        self, lambda: super(ChecksInputs, self).evaluate(x, *args, **kwargs))

  def predict(self, x, *args, **kwargs):
    check_inputs(self, x)
    return compat_keras.keeping_variables(
        self, lambda: super(ChecksInputs, self).predict(x, *args, **kwargs))

  def train_on_batch(self, x, *args, **kwargs):
    check_inputs(self, x)
    return super().train_on_batch(x, *args, **kwargs)

  def test_on_batch(self, x, *args, **kwargs):
    check_inputs(self, x)
    return super().test_on_batch(x, *args, **kwargs)

  def predict_on_batch(self, x):
    check_inputs(self, x)
    return super().predict_on_batch(x)
