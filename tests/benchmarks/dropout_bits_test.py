"""`benchmarks/dropout_bits.py` runs on JAX/CPU and times both dropouts."""

import json
import sys

import pytest

from tests.helpers import jax_subprocess

pytest.importorskip("jax")


def test_times_keras_and_hashed_dropout():
  out = jax_subprocess.run([sys.executable, "benchmarks/dropout_bits.py",
                            "--shape=2,64,32", "--rounds=3"])
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert sorted(result["ms"]) == ["HashedDropout", "keras Dropout"]
  assert all(ms > 0 for ms in result["ms"].values()), result
  assert result["ratio"] == pytest.approx(
      result["ms"]["HashedDropout"] / result["ms"]["keras Dropout"])
  assert "HashedDropout / keras Dropout:" in out.stdout
