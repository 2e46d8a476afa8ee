"""tf_keras workarounds (tests/compat/tf_keras_test.py)."""


def set_untracked(layer, name: str, value) -> None:
  """Tracked dicts of Inputs break `Model.save()` (tensorflow#63548)."""
  object.__setattr__(layer, name, value)


def build_attention(layer, input_shape) -> None:
  """SavedModel loads new weights in a lazily built MHA (tensorflow#56757)."""
  layer._build_from_signature(  # pylint: disable=protected-access
      query=input_shape, value=input_shape)
