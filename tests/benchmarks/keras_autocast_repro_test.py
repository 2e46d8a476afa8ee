"""benchmarks/keras_autocast_repro.py, as benchmarks/README.md runs it: Keras
reads an embedding table in bfloat16 at a functional model's top level; ours
stays float32. JAX, in a process of its own (the suite runs TensorFlow)."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_keras_embedding_table_is_bfloat16_and_ours_is_not():
  out = subprocess.run(
      [sys.executable, os.path.join(ROOT, "benchmarks",
                                    "keras_autocast_repro.py")],
      env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
      capture_output=True, text=True, check=True, cwd=ROOT).stdout
  keras_count, ours = map(int, re.search(
      r"Embedding's table in bfloat16 (\d+) times; realformer_tf's (\d+) "
      r"times", out).groups())
  # If the first fails, Keras fixed its autocast: update benchmarks/README.md.
  assert keras_count > 0, out
  assert ours == 0, out
