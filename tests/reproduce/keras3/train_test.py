"""The Keras 3 reproduction's models (one initialisation for all), its
optimizer schedule and its checkpoint file."""
import keras
import numpy as np
import pytest

from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import train

TINY = plan_lib.SIZES["tiny"]


def _values(model):
  return {v.path: np.asarray(v.value) for v in model.weights
          if "seed_generator" not in v.path}


def test_every_architecture_starts_from_the_same_weights():
  models = {arch: train.build_models(TINY, arch, 40, "float32", seed=0)
            for arch in plan_lib.ARCHS}
  post_ln = _values(models["post_ln"][0])
  for arch, (model, copied) in models.items():
    values = _values(model)
    assert copied["own"] == ([] if arch != "pre_ln" else
                             ["final_layer_norm/gamma",
                              "final_layer_norm/beta"])
    assert sorted(copied["shared"]) == sorted(post_ln)
    for path in copied["shared"]:
      np.testing.assert_array_equal(values[path], post_ln[path], path)
  # What is shared is this seed's draw, not a constant.
  other, _ = train.build_models(TINY, "realformer", 40, "float32", seed=1)
  for path in ("token_embedding/embeddings",
               "transformer_layer_0/self_attention/query/kernel",
               "mlm_head/intermediate_dense/kernel"):
    assert np.abs(_values(other)[path] - post_ln[path]).max() > 1e-3, path


def test_the_learning_rate_warms_up_then_decays_to_zero():
  lr = train.learning_rate(TINY, train_steps=100)
  rates = [float(lr(step)) for step in (0, 5, 10, 55, 100)]
  assert rates[0] == 0.0 and rates[1] == pytest.approx(TINY.learning_rate / 2)
  assert rates[2] == pytest.approx(TINY.learning_rate)
  assert rates[3] == pytest.approx(TINY.learning_rate / 2, rel=1e-3)
  assert rates[4] == pytest.approx(0.0, abs=1e-9)
  optimizer = train.make_optimizer(TINY, train_steps=100)
  assert optimizer.weight_decay == 0.01 and optimizer.global_clipnorm == 1.0


def test_a_checkpoint_round_trips_and_refuses_another_model(tmp_path):
  path = str(tmp_path / "checkpoint.npz")
  state = ([np.arange(6, dtype=np.float32).reshape(2, 3)],
           [np.array([7, 8], np.uint32)], [np.float32(3.0)])
  train.save_checkpoint(path, state, {"step": 4, "digest": "ab"})
  values, meta = train.load_checkpoint(path, state)
  assert meta == {"step": 4, "digest": "ab"}
  for loaded, saved in zip(values, state):
    for a, b in zip(loaded, saved):
      np.testing.assert_array_equal(np.asarray(a), b)
      assert np.asarray(a).dtype == np.asarray(b).dtype
  other = ([np.zeros((3, 3), np.float32)],) + state[1:]
  with pytest.raises(ValueError, match=r"value t0 is \(2, 3\), the model "
                     r"needs \(3, 3\)"):
    train.load_checkpoint(path, other)
  assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]


def test_auto_policy_is_float32_on_a_cpu():
  assert train.resolve_policy("auto") == "float32"
  assert train.resolve_policy("mixed_bfloat16") == "mixed_bfloat16"


@pytest.mark.skipif(keras.config.backend() == "jax", reason="JAX trains")
def test_another_backend_is_refused_by_name():
  with pytest.raises(ValueError, match="backend is 'tensorflow': set "
                     "KERAS_BACKEND=jax"):
    train.check_backend()
