"""The smallest reproduction of the bfloat16 embedding gradient (issue 36).

`keras.layers.Embedding` sets `self.autocast = False`, yet under a mixed
policy its table is read, and its gradient scatter-added, in bfloat16 when
the layer is called at a functional model's top level (as `fit` calls it):
`Layer.__call__` (keras/src/layers/layer.py, lines 983-997 in Keras 3.15.1)
honours `autocast=False` only inside another layer's autocast scope.
Prints how often the lowered gradient holds the table in bfloat16 (> 0:
reproduced) and in float32 with `realformer_tf.keras3.embeddings.Embedding`.

  KERAS_BACKEND=jax python benchmarks/keras_autocast_repro.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bf16_tables(layer_class):
  """Occurrences of the [100, 8] table in bfloat16 in the lowered gradient."""
  import jax  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    ids = keras.Input((4,), dtype="int32")
    model = keras.Model(ids, layer_class(100, 8)(ids))
  finally:
    keras.config.set_dtype_policy("float32")

  def step(table):
    outputs, _ = model.stateless_call([table], [],
                                      jax.numpy.zeros((2, 4), "int32"))
    return outputs.sum()

  table = model.trainable_variables[0].value
  return jax.jit(jax.grad(step)).lower(table).as_text().count(
      "tensor<100x8xbf16>")


def main():
  import keras  # pylint: disable=g-import-not-at-top
  from realformer_tf.keras3 import embeddings  # pylint: disable=g-import-not-at-top
  print(f"keras {keras.__version__}: keras.layers.Embedding's table in "
        f"bfloat16 {bf16_tables(keras.layers.Embedding)} times; "
        f"realformer_tf's {bf16_tables(embeddings.Embedding)} times")


if __name__ == "__main__":
  main()
