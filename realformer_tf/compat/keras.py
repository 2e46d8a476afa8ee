"""Keras 3 workarounds; tests/compat/keras_test.py fails once each defect goes.

No TensorFlow here: the Keras 3 face imports this module.
"""


class EmbeddingsNotAutocast:
  """Mixin: the `embeddings` variable is read in its own dtype; Keras'
  `autocast = False` on the layer does not do it."""

  def add_weight(self, *args, **kwargs):
    if kwargs.get("name") == "embeddings":
      kwargs["autocast"] = False
    return super().add_weight(*args, **kwargs)


def keeping_variables(model, run):
  """`run()`; if it raises, the model's variables keep their values: Keras'
  JAX trainer detaches them during `predict`/`evaluate` and restores them
  only after the loop. Not for `fit`."""
  saved = [(v, v._value) for v in model.variables]  # pylint: disable=protected-access
  try:
    return run()
  except Exception:
    for v, value in saved:
      if getattr(v, "_value", value) is None:
        v._value = value  # pylint: disable=protected-access
    raise
