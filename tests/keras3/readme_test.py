"""The README's "Keras 3" section runs as written.

Its layer example runs as it is; each `print(...)  # <expected>` must print
`<expected>`, in order, and the result is checked against the NumPy
reference too. docs/keras3.md's examples: tests/keras3/docs_test.py (each on
TensorFlow and JAX, in processes of their own).
"""

import os

import numpy as np

from realformer_tf.keras3 import encoder_block
from tests.helpers import doc_blocks
from tests.helpers import numpy_reference
from tests.helpers import keras3_layer_checks as layer_checks

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SECTION = "## Keras 3 (TensorFlow, JAX, PyTorch)"


def _read(page):
  with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
    return f.read()


def _readme_blocks():
  """The Python blocks of the README's Keras 3 section."""
  section = _read("README.md").split(SECTION)[1]
  return doc_blocks.python_blocks(section[:section.index("\n## ")])


def test_the_section_has_its_example():
  assert len(_readme_blocks()) == 1


def test_layer_example_matches_the_numpy_reference():
  block, = _readme_blocks()
  assert "(2, 16, 64) (2, 4, 16, 16)" in block
  np.random.seed(0)
  namespace = doc_blocks.run(block)
  np.random.seed(0)                    # the example's own random input again
  x = np.random.rand(2, 16, 64)
  mask = np.ones((2, 16, 16), np.int32)
  blocks = [layer for layer in namespace["model"].layers
            if isinstance(layer, encoder_block.RealFormerEncoderBlock)]
  assert len(blocks) == 3
  x, scores = numpy_reference.block_stack(x, blocks, mask, "sum",
                                         activation=numpy_reference.gelu_erf)
  np.testing.assert_allclose(layer_checks.numpy(namespace["out"]), x,
                             atol=1e-4)
  np.testing.assert_allclose(layer_checks.numpy(namespace["scores"]), scores,
                             atol=1e-4)
