"""An exported SavedModel that names the input whose length it cannot take.

`keras.Model.export` signatures take the exported lengths only, and
TensorFlow does not check a served tensor's static shape, so another length
would fail deep in the graph.
"""

# Keras' lazy TensorFlow module: no TensorFlow import unless an export runs.
from keras.src.utils.module_utils import tensorflow as tf

# Keras' endpoint (`DEFAULT_ENDPOINT_NAME`), an attribute of the SavedModel.
_ENDPOINT = "serve"


def _checked(function, specs):
  """`function` (a signature taking keywords) behind shape assertions."""

  def checked(inputs):
    checks = []
    for name, spec in sorted(specs.items()):
      for axis, size in enumerate(spec.shape):
        if size is None:
          continue
        checks.append(tf.debugging.assert_equal(
            tf.shape(inputs[name])[axis], size,
            message=(f"Input `{name}`, axis {axis}: served with another "
                     f"length (x) than the exported {size} (y); this "
                     f"SavedModel takes shape {spec.shape.as_list()}: pad "
                     "or cut to it, or export again at the length you "
                     "serve")))
    with tf.control_dependencies(checks):
      return function(**{name: tf.identity(inputs[name]) for name in specs})

  signature = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
               for name, spec in specs.items()}
  return tf.function(checked, input_signature=[signature], autograph=False)


def add_length_checks(source: str, directory: str) -> None:
  """Writes the SavedModel at `source` into `directory` with its inputs'
  static shapes checked by every signature, each then calling Keras' own
  function unchanged (same outputs and names, `serve` too). `source` may lie
  inside `directory` (it is read whole first)."""
  loaded = tf.saved_model.load(source)
  module = tf.Module()
  module.unchecked = loaded  # Its variables and assets.
  signatures = {}
  for key, function in loaded.signatures.items():
    checked = _checked(function, function.structured_input_signature[1])
    signatures[key] = checked.get_concrete_function()
    if key == _ENDPOINT:
      module.serve = checked
  # jax2tf's functions carry custom gradients whose captures TensorFlow
  # cannot save again (`_trace_gradient_functions`); serving needs none.
  tf.saved_model.save(module, directory, signatures=signatures,
                      options=tf.saved_model.SaveOptions(
                          experimental_custom_gradients=False))
