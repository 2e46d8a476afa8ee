"""The README's Python examples run as written and do what they say.

Each `print(...)  # <expected>` line must print `<expected>`; the encoder
block example is checked against the NumPy reference, the encoder example's
output comment against the encoder's outputs. The examples are found by the
README section that holds each. Every relative link of the README, docs/ and
the other READMEs resolves to a file and heading.
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

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
# The tf_keras examples, by the section that holds each; the Keras 3
# section's are tests/keras3/readme_test's.
LAYERS_SECTION = "## Use the layers"
ENCODER_SECTION = "## The encoder"
DECODER_SECTION = "## Translation and decoders"
KERAS3_SECTION = "## Keras 3 (TensorFlow, JAX, PyTorch)"
# The Markdown pages whose relative links must resolve.
PAGES = ("README.md", "benchmarks/README.md", "tests/README.md",
         *sorted(os.path.join("docs", name) for name in os.listdir(
             os.path.join(REPO_ROOT, "docs")) if name.endswith(".md")))


def _read(page="README.md"):
  with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as f:
    return f.read()


def _section(text, heading):
  """The lines after the heading that starts with `heading`, up to the next
  heading of the same or a higher level (outside code blocks)."""
  level = len(heading) - len(heading.lstrip("#"))
  lines, section, in_code = text.splitlines(keepends=True), None, False
  for line in lines:
    in_code ^= line.startswith("```")
    is_heading = not in_code and re.match(r"#+ ", line)
    if section is None:
      if is_heading and line.startswith(heading):
        section = []
    elif is_heading and len(line) - len(line.lstrip("#")) <= level:
      break
    else:
      section.append(line)
  assert section is not None, f"no section {heading!r}"
  return "".join(section)


def _python_blocks(text):
  return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _section_block(heading):
  """The one Python example of a README section."""
  block, = _python_blocks(_section(_read(), heading))
  return block


def _run(block):
  """Runs a README block; returns its namespace and checks what it prints."""
  namespace, out = {}, io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(block, "README.md", "exec"), namespace)  # pylint: disable=exec-used
  claimed = re.findall(r"^print\(.*\)\s*#\s*(.*)$", block, flags=re.M)
  assert out.getvalue().splitlines() == claimed
  return namespace


def test_readme_has_python_examples():
  """Every Python block of the README is one of the examples tested here or
  in tests/keras3/readme_test.py."""
  text = _read()
  keras3 = _section(text, KERAS3_SECTION)
  assert len(_python_blocks(text.replace(keras3, ""))) == 3
  for heading in (LAYERS_SECTION, ENCODER_SECTION, DECODER_SECTION):
    assert _section_block(heading)


def test_docs_python_blocks_are_the_tested_ones():
  """Only docs/keras3.md has Python examples (tests/keras3/readme_test.py
  runs them); an example added elsewhere needs a test first."""
  with_blocks = {page: len(_python_blocks(_read(page))) for page in PAGES
                 if page != "README.md" and _python_blocks(_read(page))}
  assert with_blocks == {os.path.join("docs", "keras3.md"): 2}


def _anchor(heading):
  """GitHub's anchor for a Markdown heading."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_resolve():
  """Each relative link of README.md, docs/ and the other READMEs names a
  file of the repository and, after `#`, one of that page's headings."""
  checked = 0
  for page in PAGES:
    links = re.findall(r"\]\(([^)\s]+)\)", _read(page))
    for link in links:
      if re.match(r"[a-z]+://", link):
        continue
      path, _, anchor = link.partition("#")
      target = os.path.normpath(os.path.join(os.path.dirname(page), path)
                                if path else page)
      assert os.path.exists(os.path.join(REPO_ROOT, target)), (page, link)
      if anchor:
        headings = re.findall(r"^#+ (.*)$", _read(target), flags=re.M)
        assert anchor in [_anchor(h) for h in headings], (page, link)
      checked += 1
  assert checked > 20, checked


def test_functional_block_example_matches_numpy_reference():
  block = _section_block(LAYERS_SECTION)
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
  block = _section_block(ENCODER_SECTION)
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
  block = _section_block(DECODER_SECTION)
  assert "(2, 2, 4, 4) (2, 2, 4, 6)" in block
  _run(block)
