"""The README's "Keras 3" section and docs/keras3.md run as written.

The README section's layer example and the two examples of docs/keras3.md
(fine-tune, export and serve; a causal LM) run as they are, except for paths: the pre-training run
(command 1's `/tmp/realformer_quickstart`, minutes of training) is replaced
by a tiny run of the same layout (a `weights.save_run` directory plus
`data/vocab.txt`), and `/tmp/rf_*` outputs go to the test's temporary
directory. Each `print(...)  # <expected>` must print `<expected>`, in order;
the layer example is checked against the NumPy reference too.
"""

import contextlib
import io
import os
import re
import shutil

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import weights
from tests.helpers import numpy_reference
from tests.helpers import shared_data
from tests.helpers import keras3_encoders as encoder_test_utils
from tests.helpers import keras3_layer_checks as layer_checks

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SECTION = "## Keras 3 (TensorFlow, JAX, PyTorch)"
QUICKSTART_DIR = "/tmp/realformer_quickstart"
TF_BACKEND_ONLY = pytest.mark.skipif(
    keras.config.backend() != "tensorflow" or layer_checks.in_backend_rerun(),
    reason="writes a TF SavedModel and reads TF checkpoints (TensorFlow "
    "backend); the generate example runs on TensorFlow in the main suite")


def _read(page):
  with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
    return f.read()


def _python_blocks(text):
  return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _readme_blocks():
  """The Python blocks of the README's Keras 3 section."""
  section = _read("README.md").split(SECTION)[1]
  return _python_blocks(section[:section.index("\n## ")])


def _docs_blocks():
  """The Python blocks of docs/keras3.md."""
  return _python_blocks(_read(os.path.join("docs", "keras3.md")))


def _run(block, replacements=()):
  """Runs a block (paths replaced); checks its claimed prints, in order."""
  for old, new in replacements:
    block = block.replace(old, new)
  namespace, out = {}, io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(block, "README.md", "exec"), namespace)  # pylint: disable=exec-used
  claimed = re.findall(r"^print\(.*\)\s*#\s*(.*)$", block, flags=re.M)
  printed = iter(out.getvalue().splitlines())
  for line in claimed:  # Keras' progress lines may come in between.
    assert any(got == line for got in printed), (line, out.getvalue())
  return namespace


def test_the_section_and_page_have_their_examples():
  assert len(_readme_blocks()) == 1
  assert len(_docs_blocks()) == 2


def test_layer_example_matches_the_numpy_reference():
  block, = _readme_blocks()
  assert "(2, 16, 64) (2, 4, 16, 16)" in block
  np.random.seed(0)
  namespace = _run(block)
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


@pytest.fixture(name="tiny_run")
def fixture_tiny_run(tmp_path):
  """A tiny pre-training run in the quickstart's layout: what `load_run` and
  the examples read (its encoder checkpoint, config and vocabulary)."""
  vocab = os.path.join(shared_data.FIXTURE_DIR, "vocab.txt")
  with open(vocab, encoding="utf-8") as f:
    vocabulary_size = sum(1 for _ in f)
  backbone = backbone_lib.RealFormerBackbone(**dict(
      encoder_test_utils.TINY, vocabulary_size=vocabulary_size,
      max_sequence_length=32))
  run = os.path.join(tmp_path, "quickstart")
  weights.save_run(backbone, run)
  os.makedirs(os.path.join(run, "data"))
  shutil.copy(vocab, os.path.join(run, "data", "vocab.txt"))
  return run, backbone


@TF_BACKEND_ONLY
def test_fine_tune_export_serve_example(tiny_run, tmp_path):
  run, pretrained = tiny_run
  block = _docs_blocks()[0]
  namespace = _run(block, [(QUICKSTART_DIR, run),
                           ("/tmp/rf_", os.path.join(tmp_path, "rf_"))])
  # The run's weights were loaded (before fit moved them).
  assert namespace["backbone"].get_config()["num_layers"] == (
      pretrained.get_config()["num_layers"])
  # What it says it saved is there and loads.
  restored = keras.saving.load_model(os.path.join(tmp_path,
                                                  "rf_classifier.keras"))
  features = namespace["features"]
  np.testing.assert_allclose(
      layer_checks.numpy(restored(features)),
      layer_checks.numpy(namespace["classifier"](features)), atol=1e-6)
  np.testing.assert_allclose(
      np.asarray(namespace["logits"]),
      layer_checks.numpy(namespace["classifier"](features)), atol=1e-5)
  assert os.path.exists(os.path.join(tmp_path, "rf_from_keras3",
                                     "encoder.yaml"))


@TF_BACKEND_ONLY
def test_causal_lm_example_generates_text(tiny_run):
  run, _ = tiny_run
  namespace = _run(_docs_blocks()[1], [(QUICKSTART_DIR, run)])
  text = namespace["lm"].generate("the cat", max_length=12)
  assert isinstance(text, str) and text.startswith("the cat")
