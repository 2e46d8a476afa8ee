"""The README's Python examples run as written and do what they say.

Each `print(...)  # <expected>` line must print `<expected>`; the encoder
block example is checked against the NumPy reference, the encoder example's
output comment against the encoder's outputs.
"""

import contextlib
import io
import os
import re

import numpy as np
import tensorflow as tf

from realformer_tf.layers import RealFormerEncoderBlock
from realformer_tf.networks import RealFormerEncoder
from tests.helpers import numpy_reference

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")


KERAS3_SECTION = "## Keras 3 (TensorFlow, JAX, PyTorch)"


def _python_blocks():
  """The tf_keras examples; the Keras 3 section's are tests/keras3/readme_test's."""
  with open(README, encoding="utf-8") as f:
    text = f.read()
  before, keras3 = text.split(KERAS3_SECTION)
  after = keras3[keras3.index("\n## "):]
  return re.findall(r"```python\n(.*?)```", before + after, flags=re.S)


def _run(block):
  """Runs a README block; returns its namespace and checks what it prints."""
  namespace, out = {}, io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(block, "README.md", "exec"), namespace)  # pylint: disable=exec-used
  claimed = re.findall(r"^print\(.*\)\s*#\s*(.*)$", block, flags=re.M)
  assert out.getvalue().splitlines() == claimed
  return namespace


def test_readme_has_python_examples():
  assert len(_python_blocks()) == 3


def test_functional_block_example_matches_numpy_reference():
  block = _python_blocks()[0]
  assert "(2, 16, 64) (2, 4, 16, 16)" in block
  np.random.seed(0)
  namespace = _run(block)
  np.random.seed(0)                    # the example's own random input again
  x = np.random.rand(2, 16, 64)
  mask = np.ones((2, 16, 16), np.int32)
  blocks = [layer for layer in namespace["model"].layers
            if isinstance(layer, RealFormerEncoderBlock)]
  assert len(blocks) == 3
  x, scores = numpy_reference.block_stack(x, blocks, mask, "sum",
                                         activation=numpy_reference.gelu_erf)
  np.testing.assert_allclose(namespace["out"], x, atol=1e-4)
  np.testing.assert_allclose(namespace["scores"], scores, atol=1e-4)


def test_encoder_example_has_the_outputs_it_lists():
  block = _python_blocks()[1]
  encoder = _run(block)["encoder"]
  comments = " ".join(re.findall(r"^#(.*)$", block, flags=re.M))
  listed = re.findall(r"\b(\w+_(?:outputs?|scores))\b", comments)
  # The same encoder at a tiny size, to call it.
  config = dict(encoder.get_config(), hidden_size=16, num_layers=2,
                num_attention_heads=2, inner_dim=32, vocab_size=10)
  ids = tf.constant([[2, 3, 0]])
  outputs = RealFormerEncoder.from_config(config)(dict(
      input_word_ids=ids, input_mask=tf.sign(ids),
      input_type_ids=tf.zeros_like(ids)))
  assert len(listed) == 5 and sorted(outputs) == sorted(listed)


def test_decoder_block_example_prints_its_shapes():
  block = _python_blocks()[2]
  assert "(2, 2, 4, 4) (2, 2, 4, 6)" in block
  _run(block)
