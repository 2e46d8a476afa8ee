"""The package's shape: imports go down the layer order, modules stay small.

The layer order is the README's Layout block, bottom first. A module may
import its own package and any package below it, never one above; imports of
our own modules sit at module level (no function-level imports), so the
order can be read off the top of each file.
"""
import ast
import os

import pytest

PACKAGE_ROOT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "realformer_tf")

# Bottom first. `utils` and the package's own `__init__` are below everything.
LAYER_ORDER = ("core", "utils", "layers", "networks", "data", "tasks", "configs",
               "checkpoints", "training", "serving", "analysis", "reproduce",
               "keras3")
MAX_MODULE_LINES = 450


def _modules():
  for root, _, files in os.walk(PACKAGE_ROOT):
    for name in sorted(files):
      if name.endswith(".py"):
        yield os.path.relpath(os.path.join(root, name), PACKAGE_ROOT)


def _layer(relative_module: str) -> str:
  """`layers/x.py` -> "layers"; `utils.py` -> "utils"."""
  return relative_module.split(os.sep)[0].split("/")[0].removesuffix(".py")


def _own_imports(tree: ast.Module):
  """(node, imported layer) for each import of a realformer_tf module."""
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and (
        node.module == "realformer_tf" or
        node.module.startswith("realformer_tf.")):
      parts = node.module.split(".")[1:]
      if parts:
        yield node, parts[0]
      else:  # from realformer_tf import X
        for alias in node.names:
          yield node, alias.name
    elif isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith("realformer_tf."):
          yield node, alias.name.split(".")[1]


def test_every_package_is_in_the_layer_order():
  found = {_layer(module) for module in _modules()} - {"__init__"}
  assert found <= set(LAYER_ORDER), sorted(found - set(LAYER_ORDER))


@pytest.mark.parametrize("module", sorted(_modules()))
def test_imports_go_down_the_layer_order(module):
  path = os.path.join(PACKAGE_ROOT, module)
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  own = _layer(module)
  top_level = set(map(id, tree.body))
  for node, imported in _own_imports(tree):
    assert id(node) in top_level, (
        f"{module}:{node.lineno} imports realformer_tf inside a function")
    if own not in LAYER_ORDER or imported not in LAYER_ORDER:
      continue
    assert LAYER_ORDER.index(imported) <= LAYER_ORDER.index(own), (
        f"{module}:{node.lineno} ({own}) imports {imported}, which is above "
        f"it in the layer order {LAYER_ORDER}")


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_is_past_the_size_limit(module):
  with open(os.path.join(PACKAGE_ROOT, module), encoding="utf-8") as f:
    lines = sum(1 for _ in f)
  assert lines <= MAX_MODULE_LINES, f"{module} has {lines} lines"
