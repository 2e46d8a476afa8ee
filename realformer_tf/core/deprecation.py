"""Deprecated aliases of moved names: one PEP 562 `__getattr__` rule.

    _MOVED = {"old_name": "realformer_tf.new.module"}
    __getattr__ = deprecation.moved_names(__name__, _MOVED)

The new module is imported on first use, so an alias may point above its
module in the layer order (tests/package_layout_test.py reads `_MOVED`).
"""
import importlib
import warnings

REMOVED_IN = "0.2"


def moved_names(module: str, moved: dict):
  """A module `__getattr__` serving `moved` ({name: new module}), warning."""

  def __getattr__(name):
    if name in moved:
      warnings.warn(
          f"{module}.{name} is deprecated: use {moved[name]}.{name} (this "
          f"alias goes in realformer_tf {REMOVED_IN}).", DeprecationWarning,
          stacklevel=2)
      return getattr(importlib.import_module(moved[name]), name)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")

  return __getattr__
