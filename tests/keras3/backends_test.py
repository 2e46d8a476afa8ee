"""Re-runs every test in tests/keras3 under the other Keras backends.

The normal suite runs tests/keras3 in-process on the default backend
(TensorFlow); Keras reads `KERAS_BACKEND` once, at import, so each other
backend needs a process of its own: one `pytest` subprocess per backend,
with `REALFORMER_KERAS3_BACKEND_RERUN=1` so that tests which spawn their own
processes, and this module, do not run twice. JAX is a test dependency
(setup.py); PyTorch is optional: without it the torch case skips, and the
same run is `KERAS_BACKEND=torch python -m pytest tests/keras3`. The JAX
re-run has TensorFlow unimportable (`tests/helpers/no_tensorflow.py`): what
needs TensorFlow itself (tf.data, jax2tf export) skips there, naming it.
"""

import importlib
import importlib.util
import os
import pathlib
import subprocess
import sys

import keras
import pytest

from tests.helpers import keras3_layer_checks as layer_checks
from tests.helpers import no_tensorflow

_KERAS3_TESTS = pathlib.Path(__file__).resolve().parent
_REPO_ROOT = _KERAS3_TESTS.parent.parent


@pytest.mark.skipif(layer_checks.in_backend_rerun(),
                    reason="already inside a backend re-run")
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_keras3_tests_pass_under(backend):
  if backend == "torch" and importlib.util.find_spec("torch") is None:
    pytest.skip("PyTorch is not installed (optional: pip install "
                "torch==2.13.0, then KERAS_BACKEND=torch python -m pytest "
                "tests/keras3)")
  env = dict(os.environ, KERAS_BACKEND=backend,
             **{layer_checks.BACKEND_RERUN_ENV: "1"})
  if backend == "jax":  # The face and its tests need no TensorFlow (issue 47).
    env = no_tensorflow.env(env)
  # JAX compiles every op and step it meets; for these tiny shapes LLVM's
  # optimizations cost more than they save (JAX re-run: 44 s -> 24 s of CPU).
  env["XLA_FLAGS"] = " ".join(
      [env.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0"]).strip()
  env.pop("PYTEST_XDIST_WORKER", None)
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
       # No xdist in the docs/keras3.md environment (pytest only).
       *(["-n", "0"] if importlib.util.find_spec("xdist") else []), "-W", "ignore::DeprecationWarning", str(_KERAS3_TESTS)],
      cwd=_REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
  tail = (result.stdout + result.stderr)[-6000:]
  assert result.returncode == 0, (
      f"tests/keras3 under KERAS_BACKEND={backend} failed "
      f"(rc {result.returncode}):\n{tail}")
  assert " passed" in result.stdout and " failed" not in result.stdout, tail


@pytest.mark.skipif(not layer_checks.in_backend_rerun(),
                    reason="checks the backend of a re-run")
def test_rerun_uses_the_requested_backend():
  assert keras.config.backend() == os.environ["KERAS_BACKEND"]


@pytest.mark.skipif(not no_tensorflow.active(),
                    reason="checks the re-run without TensorFlow")
def test_the_face_and_the_keras3_reproduction_import_without_tensorflow():
  modules = ["realformer_tf.keras3", "realformer_tf.reproduce.run",
             "realformer_tf.reproduce.keras3_face",
             "realformer_tf.checkpoints.keras3_weight_map"]
  for module in modules:
    importlib.import_module(module)
  assert not [m for m in sys.modules if sys.modules[m] is not None and
              m.split(".")[0] in ("tensorflow", "tf_keras", "official")]
