"""Test-wide setup: quiet TF logs, deterministic CPU runs, shared data path;
the `no_traceback_flag` fixture."""
import os

from absl.testing import flagsaver
import pytest

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


@pytest.fixture
def no_traceback_flag():
  """--traceback (`realformer_tf.cli`) unset for a test that runs a command
  in this process: absl parses only the flags a command line gives, so one
  test's --traceback would stay set for the next."""
  with flagsaver.flagsaver(traceback=False):
    yield
