"""Runs one Python block of a Markdown page as written, in this process.

`python -m tests.helpers.doc_blocks PAGE INDEX REPLACEMENTS_JSON OUT_DIR`
(from the repository root, with `KERAS_BACKEND` set) runs block `INDEX` of
`PAGE` with its paths replaced (`[[old, new], ...]`), checks that each
`print(...)  # <expected>` line printed `<expected>`, in order, and writes
the block's NumPy-convertible top-level values named in `KEEP` to
`OUT_DIR/values.npz` for the test to compare (a `history` from `fit` as
its per-epoch `loss`). Keras reads `KERAS_BACKEND` once, at import: each
backend needs a process of its own.
"""

import contextlib
import io
import json
import os
import re
import sys

import numpy as np

# What a test may compare after a block ran (those the block defines).
KEEP = ("logits", "expected", "features")


def python_blocks(text):
  """The bodies of the page's ```python blocks, in order."""
  return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def run(block, replacements=()):
  """Runs a block (paths replaced); checks its claimed prints, in order.

  Returns:
    The block's namespace.
  """
  for old, new in replacements:
    block = block.replace(old, new)
  namespace, out = {}, io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(block, "<doc block>", "exec"), namespace)  # pylint: disable=exec-used
  claimed = re.findall(r"^print\(.*\)\s*#\s*(.*)$", block, flags=re.M)
  printed = iter(out.getvalue().splitlines())
  for line in claimed:  # Keras' progress lines may come in between.
    assert any(got == line for got in printed), (line, out.getvalue())
  return namespace


def _numpy(value):
  """NumPy of a tensor of any backend (or a dict of them)."""
  if isinstance(value, dict):
    return {k: _numpy(v) for k, v in value.items()}
  return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def main(page, index, replacements, out_dir):
  with open(page, encoding="utf-8") as f:
    block = python_blocks(f.read())[int(index)]
  namespace = run(block, json.loads(replacements))
  if "classifier" in namespace and "features" in namespace:
    # The fine-tuned model's own logits, for the served ones to match.
    namespace["expected"] = namespace["classifier"](
        _numpy(namespace["features"]))
  values = {}
  if "history" in namespace:  # What `fit` returned: the loss curve.
    values["loss"] = np.asarray(namespace["history"].history["loss"])
  for name in KEEP:
    if name not in namespace:
      continue
    value = _numpy(namespace[name])
    if isinstance(value, dict):
      values.update({f"{name}.{k}": v for k, v in value.items()})
    else:
      values[name] = value
  np.savez(os.path.join(out_dir, "values.npz"), **values)


if __name__ == "__main__":
  main(*sys.argv[1:])
