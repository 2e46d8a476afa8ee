"""`keras.distribution.DataParallel` over 2 host devices on JAX gives the
one-device loss curve (issue 22, item 5), with each step dispatched or three
steps a dispatch (`fused_steps`)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import keras3_layer_checks as layer_checks

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.mark.skipif(layer_checks.in_backend_rerun(),
                    reason="spawns its own JAX process; runs once, in the "
                    "default-backend run")
def test_data_parallel_matches_one_device():
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             # -O0: LLVM optimizations cost more than they save here.
             XLA_FLAGS="--xla_force_host_platform_device_count=2 "
             "--xla_backend_optimization_level=0",
             TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run(
      [sys.executable, "-m", "tests.helpers.keras3_data_parallel_worker"], cwd=REPO,
      env=env, capture_output=True, text=True, timeout=600, check=False)
  assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
  curves = json.loads(result.stdout.strip().splitlines()[-1])
  assert curves["devices"] == [1, 2, 2]
  one, two = curves["one_device"], curves["data_parallel"]
  assert len(one) == len(two) == 6 + 1  # 6 steps, then evaluate's loss
  np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-6)
  # Fused: the callbacks see steps 3 and 6, from two dispatches; then the
  # fused evaluate.
  assert curves["fused_dispatches"] == 2
  np.testing.assert_allclose(curves["data_parallel_fused"],
                             [one[2], one[5], one[6]], rtol=1e-5, atol=1e-6)
  assert one[-1] < 0.9 * one[0], one  # It trained (1.10 -> 0.78 here).
