"""Test-wide setup: quiet TF logs, deterministic CPU runs, shared data path."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def pytest_collection_modifyitems(config, items):
  """Deselects `tf.test.TestCase.test_session`, an inherited non-test.

  pytest collects it from every `tf.test.TestCase` subclass and skips it,
  which only inflates the skip count.
  """
  kept = [item for item in items if item.name != "test_session"]
  if len(kept) != len(items):
    config.hook.pytest_deselected(
        items=[item for item in items if item.name == "test_session"])
    items[:] = kept
