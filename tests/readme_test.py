"""The README's Python examples run as written and print what they claim."""

import contextlib
import io
import os
import re

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")


def _python_blocks():
  with open(README, encoding="utf-8") as f:
    return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def test_readme_has_python_examples():
  assert len(_python_blocks()) >= 2


def test_functional_api_example_runs_and_prints_shapes():
  block = _python_blocks()[0]
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    exec(compile(block, "README.md", "exec"), {})  # pylint: disable=exec-used
  assert out.getvalue().strip() == "(2, 16, 64) (2, 4, 16, 16)"


def test_other_examples_run():
  for block in _python_blocks()[1:]:
    exec(compile(block, "README.md", "exec"), {})  # pylint: disable=exec-used
