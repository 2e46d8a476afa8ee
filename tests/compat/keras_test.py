"""Upstream Keras 3 defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once Keras fixes it: then
the workaround named in its docstring can go.
"""

import os
import sys
import textwrap

import keras
import numpy as np

from tests.helpers import no_tensorflow
from tests.helpers import watchdog


def test_functional_model_takes_an_unknown_keyword_silently():
  """`core.arguments.refuse_unknown` (keras3 backbones and tasks): a typo
  such as `droput=0.3` trained with the default dropout (keras-core#447)."""
  inputs = keras.Input((3,))
  model = keras.Model(inputs, keras.layers.Dense(2)(inputs), droput=0.3)
  assert not hasattr(model, "droput"), (
      "upstream refuses unknown keywords: delete refuse_unknown's calls")


def test_embedding_autocast_false_still_autocasts_the_table():
  """`compat.keras.EmbeddingsNotAutocast`: under a mixed policy the
  table of an `Embedding` with `autocast=False` is still read in the compute
  dtype when the layer runs outside another layer's autocast scope."""
  seen = {}

  class Probe(keras.layers.Embedding):

    def call(self, inputs):
      seen["dtype"] = keras.backend.standardize_dtype(self.embeddings.dtype)
      return super().call(inputs)

  policy = keras.config.dtype_policy()
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    layer = Probe(8, 4)
    layer.autocast = False
    layer(np.array([[1, 2]]))
  finally:
    keras.config.set_dtype_policy(policy)
  assert layer.embeddings.dtype == "float32"
  assert seen["dtype"] == "bfloat16", (
      "upstream fixed autocast=False: delete compat.keras.EmbeddingsNotAutocast")


# A `predict` whose step fails while tracing, on JAX (TensorFlow blocked, so
# `predict` batches NumPy arrays with Keras' own iterator).
_PREDICT_FAILS = textwrap.dedent("""
    import keras
    import numpy as np

    class Fails(keras.layers.Layer):
      def compute_output_shape(self, input_shape):
        return input_shape

      def call(self, x):
        raise ValueError("traced")

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2),
                              Fails()])
    try:
      model.predict(np.ones((2, 3)), verbose=0)
    except ValueError:
      pass
    print([v._value is None for v in model.variables])
""")


def test_a_failed_jax_predict_leaves_the_variables_detached():
  """`compat.keras.keeping_variables`: Keras' JAX trainer detaches them for
  the loop and reattaches them only after it."""
  env = no_tensorflow.env(dict(os.environ, KERAS_BACKEND="jax",
                              JAX_PLATFORMS="cpu"))
  result = watchdog.run([sys.executable, "-c", _PREDICT_FAILS],
                        cwd=no_tensorflow.REPO_ROOT, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == "[True, True]", (
      "upstream fixed the detached variables: delete "
      f"compat.keras.keeping_variables ({result.stdout[-500:]})")
