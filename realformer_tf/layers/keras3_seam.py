"""The error at the seam between Keras 3 (`tf.keras`, `keras`) and tf_keras.

Our layers are tf_keras ones, as Model Garden's; a Keras 3 tensor or variable
failed deep inside `EinsumDense`. `reject_keras3_arguments` says so first.
"""

# tf_keras class name -> its Keras 3 counterpart in realformer_tf.keras3.
KERAS3_COUNTERPARTS = {
    "ResidualMultiHeadAttention": "ResidualMultiHeadAttention",
    "RealFormerEncoderBlock": "RealFormerEncoderBlock",
    "RealFormerDecoderBlock": "RealFormerDecoderBlock",
    "RealFormerEncoder": "RealFormerBackbone",
}


def _leaves(value, path):
  """(path, leaf) pairs of nested lists, tuples and dicts."""
  if isinstance(value, (list, tuple)):
    for i, item in enumerate(value):
      yield from _leaves(item, f"{path}[{i}]")
  elif isinstance(value, dict):
    for key, item in value.items():
      yield from _leaves(item, f"{path}[{key!r}]")
  else:
    yield path, value


def reject_keras3_arguments(layer, args, kwargs) -> None:
  """Raises TypeError when a Keras 3 tensor or variable reaches `layer`'s
  call (`args`, `kwargs`)."""
  named = [(f"argument {i}", arg) for i, arg in enumerate(args)]
  named += list(kwargs.items())
  for name, value in named:
    for path, leaf in _leaves(value, name):
      # By the type's module: no need to import Keras 3 to tell.
      if type(leaf).__module__.split(".", 1)[0] != "keras":
        continue
      cls = type(layer).__name__
      counterpart = KERAS3_COUNTERPARTS.get(cls)
      instead = (f"use realformer_tf.keras3.{counterpart} with Keras 3"
                 if counterpart else
                 f"realformer_tf.keras3 has no {cls}")
      raise TypeError(
          f"{layer.name} ({cls}): got a Keras 3 {type(leaf).__name__} (from "
          f"tf.keras / keras) as {path}: {leaf!r}. This is the tf_keras layer "
          f"(realformer_tf.layers / realformer_tf.networks, Keras 2); "
          f"{instead}, or build the inputs with tf_keras.Input.")


class RejectsKeras3:
  """Layer mixin: `reject_keras3_arguments` before every call. List it
  before the tf_keras base class."""

  def __call__(self, *args, **kwargs):
    reject_keras3_arguments(self, args, kwargs)
    return super().__call__(*args, **kwargs)
