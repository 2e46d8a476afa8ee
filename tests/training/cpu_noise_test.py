"""Tests of realformer_tf.training.cpu_noise: INFO notices dropped on a
machine without a GPU driver, warnings and errors kept."""

import os
import subprocess
import sys

from realformer_tf.training import cpu_noise

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def test_quiet_only_without_a_driver_and_a_setting(tmp_path):
  absent = str(tmp_path / "no_driver")
  env = {}
  assert cpu_noise.quiet(env, driver=absent)
  assert env == {"TF_CPP_MIN_LOG_LEVEL": "1"}
  env = {"TF_CPP_MIN_LOG_LEVEL": "0"}  # Yours: kept.
  assert not cpu_noise.quiet(env, driver=absent)
  assert env == {"TF_CPP_MIN_LOG_LEVEL": "0"}
  driver = tmp_path / "version"
  driver.write_text("NVRM version: 580.159.04")
  env = {}
  assert not cpu_noise.quiet(env, driver=str(driver))
  assert env == {}


def test_level_1_drops_the_notices_and_keeps_warnings():
  """In a fresh TensorFlow process at the level `quiet` sets: the INFO
  notices are gone; a C++ warning still prints."""
  # A partly read cache: tf.data's C++ warning (cache_dataset_ops.cc).
  code = ("import tensorflow as tf\n"
          "for x in tf.data.Dataset.range(10).cache().take(1): pass\n")
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  cpu_noise.quiet(env, driver="/nonexistent")
  out = subprocess.run([sys.executable, "-c", code], env=env, cwd=_REPO,
                       capture_output=True, text=True, timeout=600)
  assert "cpu_feature_guard" not in out.stderr, out.stderr
  assert "oneDNN custom operations" not in out.stderr, out.stderr
  assert "Could not find cuda drivers" not in out.stderr, out.stderr
  assert "did not fully read the dataset being cached" in out.stderr, (
      out.stderr)
