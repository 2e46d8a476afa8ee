"""GLUE fine-tuning on the Keras 3 face (realformer_tf.reproduce.keras3_glue),
run as on a GPU machine: JAX, TensorFlow unimportable. The in-process test
re-runs this file so; the fine-tunes run only there (they need JAX)."""
import functools
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from realformer_tf import keras3 as realformer_keras3
from realformer_tf.reproduce import keras3_glue
from tests.helpers import keras3_encoders
from tests.helpers import no_tensorflow
from tests.helpers import shared_data

SEQ_LENGTH = 32
on_jax = pytest.mark.skipif(keras.config.backend() != "jax",
                            reason="fine-tunes on JAX (the re-run)")


@pytest.mark.skipif(no_tensorflow.active(), reason="the re-run itself")
def test_passes_on_jax_without_tensorflow(tmp_path):
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
       os.path.abspath(__file__)],
      cwd=no_tensorflow.REPO_ROOT,
      # Compiling is most of a tiny run: XLA's backend optimisations off,
      # and a repeated fine-tune's programs read from JAX's compile cache.
      env=no_tensorflow.env(dict(
          os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
          XLA_FLAGS="--xla_backend_optimization_level=0",
          JAX_COMPILATION_CACHE_DIR=str(tmp_path),
          JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")),
      capture_output=True, text=True, timeout=600, check=False)
  tail = (result.stdout + result.stderr)[-4000:]
  assert result.returncode == 0, tail
  assert "3 passed, 1 skipped" in result.stdout, tail


def _mrpc():
  """The MRPC fixture packed at `SEQ_LENGTH`, and the fixture vocabulary."""
  with open(os.path.join(shared_data.FIXTURE_DIR, "vocab.txt"),
            encoding="utf-8") as f:
    vocab = f.read().split()
  splits = keras3_glue.packed(os.path.join(shared_data.FIXTURE_DIR, "glue"),
                              "mrpc", SEQ_LENGTH, tuple(vocab))
  return splits, len(vocab)


@functools.lru_cache(maxsize=None)
def _backbone(vocab_size):
  """One tiny backbone for every test (fine-tuning leaves it unchanged)."""
  keras.utils.set_random_seed(0)
  return realformer_keras3.RealFormerBackbone(**dict(
      keras3_encoders.TINY, vocabulary_size=vocab_size,
      max_sequence_length=SEQ_LENGTH, dropout=0.1))


@on_jax
def test_mrpc_learns_repeats_and_leaves_the_backbone():
  assert no_tensorflow.active()
  splits, vocab_size = _mrpc()
  backbone = _backbone(vocab_size)
  before = [np.array(v) for v in backbone.weights]
  run = lambda: keras3_glue.finetune(
      backbone, splits["train"], {"dev": splits["dev"]}, task="mrpc",
      learning_rate=5e-3, train_steps=60, batch_size=8, seed=1)
  first, second = run(), run()
  assert set(first) == {"f1", "accuracy", "majority_class_f1",
                        "majority_class_accuracy", "seconds", "train_steps",
                        "train_loss_first", "train_loss_last"}
  assert first["train_loss_last"] < first["train_loss_first"]
  assert 0 <= first["accuracy"] <= 1 and first["train_steps"] == 60
  first.pop("seconds"), second.pop("seconds")
  assert first == second
  for value, variable in zip(before, backbone.weights):
    np.testing.assert_array_equal(value, np.array(variable))
  assert not [m for m in sys.modules if sys.modules[m] is not None and
              m.split(".")[0] in ("tensorflow", "tf_keras", "official")]


@on_jax
def test_stsb_regresses_scores():
  splits, vocab_size = _mrpc()
  for split in splits.values():  # MRPC's pairs with scores in [0, 5].
    split["labels"] = np.linspace(0, 5, len(split["labels"]),
                                  dtype=np.float32)
  # A dev split named as MNLI's: its metrics carry the name.
  result = keras3_glue.finetune(
      _backbone(vocab_size), splits["train"],
      {"dev_matched": splits["dev"]}, task="stsb", learning_rate=5e-3,
      train_steps=60, batch_size=8, seed=0)
  assert {"pearson_matched", "spearman_matched"} <= set(result)
  assert result["train_loss_last"] < result["train_loss_first"]


def test_schedule_is_model_gardens():
  schedule = keras3_glue.PaperSchedule(1e-3, train_steps=100, warmup_steps=10)
  rates = [float(schedule(step)) for step in (0, 5, 10, 55, 100, 120)]
  np.testing.assert_allclose(rates, [0, 0.45e-3, 0.9e-3, 0.45e-3, 0, 0],
                             atol=1e-9)
