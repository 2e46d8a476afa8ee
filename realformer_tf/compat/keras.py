"""Keras 3 workarounds (tests/compat/keras_test.py); imports no TensorFlow."""


class EmbeddingsNotAutocast:
  """Mixin: `embeddings` never autocast (Keras' `autocast = False` is not)."""

  def add_weight(self, *args, **kwargs):
    if kwargs.get("name") == "embeddings":
      kwargs["autocast"] = False
    return super().add_weight(*args, **kwargs)


def keeping_variables(model, run):
  """`run()`, whose failure Keras' JAX trainer leaves variables detached of."""
  saved = [(v, v._value) for v in model.variables]  # pylint: disable=protected-access
  try:
    return run()
  except Exception:
    for v, value in saved:
      if getattr(v, "_value", value) is None:
        v._value = value  # pylint: disable=protected-access
    raise
