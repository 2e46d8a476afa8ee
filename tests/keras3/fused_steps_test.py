"""`fused_steps`: N steps in one dispatch give Keras' unfused `fit` (JAX).

The reference is Keras' own JAX loop at the same `steps_per_execution`
(each step its own dispatch) and at N = 1: the same losses at the steps
the callbacks see, the same dropout seed states and weights, the same
number of steps, with one program call per N steps.
"""

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import fused_steps
from realformer_tf.keras3 import masked_lm
from realformer_tf.keras3 import text_classifier

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax",
    reason="JAX's train function (runs in the JAX re-run of tests/keras3)")

SEQ, BATCH = 8, 4


def _data(batches, extra=0):
  rng = np.random.default_rng(0)
  n = batches * BATCH + extra
  x = {"token_ids": rng.integers(1, 50, (n, SEQ)).astype("int32"),
       "segment_ids": np.zeros((n, SEQ), "int32"),
       "padding_mask": (np.arange(SEQ)[None] < rng.integers(
           3, SEQ + 1, (n, 1))).astype("int32")}
  return x, rng.integers(0, 3, (n,)).astype("int32")


def _classifier(steps_per_execution, fused=True, dropout=0.1):
  """A seeded tiny classifier, dropout on (the seed states must thread);
  `fused=False` keeps Keras' own train function."""
  keras.utils.set_random_seed(0)
  backbone = backbone_lib.RealFormerBackbone(
      vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
      intermediate_dim=32, dropout=dropout, max_sequence_length=SEQ)
  model = text_classifier.RealFormerTextClassifier(
      backbone, num_classes=3, dropout=dropout)
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True),
                metrics=["sparse_categorical_accuracy"],
                steps_per_execution=steps_per_execution)
  if not fused:
    # Keras' own: the class's method skipped.
    model.make_train_function = lambda force=False: (
        keras_train_function(model, force))
  return model


def keras_train_function(model, force):
  if model.train_function is None or force:
    keras.Model.make_train_function(model, force=force)


def keras_test_function(model, force):
  if model.test_function is None or force:
    keras.Model.make_test_function(model, force=force)


class _Record(keras.callbacks.Callback):

  def __init__(self):
    super().__init__()
    self.batches, self.losses = [], []

  def on_train_batch_end(self, batch, logs=None):
    self.batches.append(batch)
    self.losses.append(float(logs["loss"]))


def _fit(model, x, y, **kwargs):
  record = _Record()
  history = model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0,
                      callbacks=[record], **kwargs)
  return record, history


def _seed_states(model):
  return [np.asarray(v.value) for v in model.non_trainable_variables
          if "seed_generator" in v.path]


def _assert_same_model(fused, reference):
  for a, b in zip(fused.trainable_variables, reference.trainable_variables):
    np.testing.assert_allclose(np.asarray(a.value), np.asarray(b.value),
                               rtol=1e-5, atol=1e-6, err_msg=a.path)
  seeds = _seed_states(fused)
  assert seeds, "the model has dropout seed generators"
  for a, b in zip(seeds, _seed_states(reference)):
    np.testing.assert_array_equal(a, b)
  assert (int(fused.optimizer.iterations.value)
          == int(reference.optimizer.iterations.value))


@pytest.mark.parametrize("steps_per_execution", [3, 4])
def test_fused_fit_equals_keras_loop(steps_per_execution):
  # 12 batches: 4 or 3 whole executions, two epochs.
  x, y = _data(12)
  fused = _classifier(steps_per_execution)
  reference = _classifier(steps_per_execution, fused=False)
  one_step = _classifier(1, fused=False)
  fused_record, fused_history = _fit(fused, x, y, epochs=2)
  ref_record, ref_history = _fit(reference, x, y, epochs=2)
  one_record, _ = _fit(one_step, x, y, epochs=2)

  function = fused.train_function
  assert isinstance(function, fused_steps.FusedSteps)
  assert not isinstance(reference.train_function,
                        fused_steps.FusedSteps)
  executions = 2 * 12 // steps_per_execution
  assert (function.dispatches, function.single_steps) == (executions, 0)
  assert int(fused.optimizer.iterations.value) == 24
  # The callbacks see the executions' last steps, as in Keras' loop.
  assert fused_record.batches == ref_record.batches == 2 * list(
      range(steps_per_execution - 1, 12, steps_per_execution))
  np.testing.assert_allclose(fused_record.losses, ref_record.losses,
                             rtol=1e-5)
  # Keras' loss log is a running mean per epoch: N = 1 at those steps.
  at = [i for i, b in enumerate(one_record.batches)
        if (b + 1) % steps_per_execution == 0]
  np.testing.assert_allclose(fused_record.losses,
                             np.asarray(one_record.losses)[at], rtol=1e-5)
  for key, values in ref_history.history.items():
    np.testing.assert_allclose(fused_history.history[key], values,
                               rtol=1e-5, err_msg=key)
  _assert_same_model(fused, reference)
  _assert_same_model(fused, one_step)


def test_short_executions_and_partial_batches_run_step_by_step():
  # 10 whole batches and a partial one of 2: N = 4 gives two fused
  # executions, then batches 9-10 and the partial one step by step.
  x, y = _data(10, extra=2)
  fused = _classifier(4)
  reference = _classifier(4, fused=False)
  _fit(fused, x, y, epochs=1)
  _fit(reference, x, y, epochs=1)
  function = fused.train_function
  assert (function.dispatches, function.single_steps) == (2, 3)
  assert int(fused.optimizer.iterations.value) == 11
  _assert_same_model(fused, reference)


def test_steps_per_epoch_cuts_like_keras():
  # steps_per_epoch=6 with N = 4 over repeated data: Keras' loop takes whole
  # executions of 4 (8 steps an epoch); the fused function does the same.
  x, y = _data(8)
  fused = _classifier(4)
  reference = _classifier(4, fused=False)
  _fit(fused, x, y, epochs=2, steps_per_epoch=6)
  _fit(reference, x, y, epochs=2, steps_per_epoch=6)
  assert (int(fused.optimizer.iterations.value)
          == int(reference.optimizer.iterations.value))
  _assert_same_model(fused, reference)


def test_one_dispatch_per_execution_and_one_program():
  x, y = _data(8)
  model = _classifier(4)
  _fit(model, x, y, epochs=3)
  function = model.train_function
  assert function.dispatches == 6
  # One compiled program for the fused steps, none for single steps.
  assert function._fused._cache_size() == 1  # pylint: disable=protected-access
  assert function._one._cache_size() == 0  # pylint: disable=protected-access


def test_steps_per_execution_changed_after_compile():
  # Keras' loop reads N per call; so does the fused function (a new scan
  # length compiles anew).
  x, y = _data(8)
  fused = _classifier(4)
  reference = _classifier(4, fused=False)
  _fit(fused, x, y, epochs=1)
  _fit(reference, x, y, epochs=1)
  fused.steps_per_execution = reference.steps_per_execution = 2
  fused_record, _ = _fit(fused, x, y, epochs=1)
  ref_record, _ = _fit(reference, x, y, epochs=1)
  assert fused_record.batches == ref_record.batches == [1, 3, 5, 7]
  np.testing.assert_allclose(fused_record.losses, ref_record.losses,
                             rtol=1e-5)
  function = fused.train_function
  assert (function.dispatches, function.single_steps) == (2 + 4, 0)
  assert function._fused._cache_size() == 2  # pylint: disable=protected-access
  _assert_same_model(fused, reference)


def test_fused_evaluate_and_validation_equal_keras():
  # evaluate with N = 4 (3 executions) and fit's validation: the same
  # metrics as Keras' loop, one dispatch per execution.
  x, y = _data(12)
  fused = _classifier(4)
  reference = _classifier(4, fused=False)
  reference.make_test_function = lambda force=False: (
      keras_test_function(reference, force))
  _, fused_history = _fit(fused, x, y, epochs=2, validation_data=(x, y))
  _, ref_history = _fit(reference, x, y, epochs=2, validation_data=(x, y))
  for key in ("val_loss", "val_sparse_categorical_accuracy"):
    np.testing.assert_allclose(fused_history.history[key],
                               ref_history.history[key], rtol=1e-5,
                               err_msg=key)
  test = fused.test_function
  assert isinstance(test, fused_steps.FusedSteps)
  assert not isinstance(reference.test_function, fused_steps.FusedSteps)
  assert (test.dispatches, test.single_steps) == (2 * 3, 0)
  fused_eval = fused.evaluate(x, y, batch_size=BATCH, return_dict=True,
                              verbose=0)
  ref_eval = reference.evaluate(x, y, batch_size=BATCH, return_dict=True,
                                verbose=0)
  assert fused_eval.keys() == ref_eval.keys()
  for key, value in ref_eval.items():
    np.testing.assert_allclose(fused_eval[key], value, rtol=1e-5,
                               err_msg=key)
  assert test.dispatches == 2 * 3 + 3
  with pytest.raises(ValueError, match="step='predict'"):
    fused_steps.FusedSteps(fused, "predict")


def test_applies_only_where_it_should():
  model = _classifier(1)
  assert not fused_steps.applies(model)
  with pytest.raises(ValueError, match="steps_per_execution=1"):
    fused_steps.FusedSteps(model)
  model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                steps_per_execution=4, run_eagerly=True)
  assert not fused_steps.applies(model)
  x, y = _data(4)
  _fit(model, x, y, epochs=1)
  assert not isinstance(model.train_function,
                        fused_steps.FusedSteps)
  model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                steps_per_execution=4)
  assert fused_steps.applies(model)


def test_any_keras_model_after_compile():
  inputs = keras.Input((3,))
  model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
  model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse",
                steps_per_execution=2)
  reference = keras.models.clone_model(model)
  reference.set_weights(model.get_weights())
  reference.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse",
                    steps_per_execution=2)
  model.train_function = fused_steps.FusedSteps(model)
  rng = np.random.default_rng(1)
  x, y = rng.normal(size=(16, 3)), rng.normal(size=(16, 1))
  model.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
  reference.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
  assert model.train_function.dispatches == 4
  for a, b in zip(model.get_weights(), reference.get_weights()):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def _masked_lm_batches():
  """Masked-LM inputs, labels and sample weights (the masked slots) of 32
  random sequences, in 4 batches."""
  rng = np.random.default_rng(2)
  ids = rng.integers(4, 50, (32, SEQ)).astype("int32")
  positions = np.sort(np.stack([rng.choice(SEQ, 3, replace=False)
                                for _ in range(32)]), axis=1).astype("int32")
  x = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
       "padding_mask": np.ones_like(ids), "mask_positions": positions}
  labels = np.take_along_axis(ids, positions, axis=1)
  weights = (rng.random((32, 3)) < 0.8).astype("float32")
  return x, labels, weights


def _masked_lm_fit(fused, x, y, sample_weight):
  """A tiny masked LM (dropout on) fit with sample weights, 2 steps a
  dispatch or Keras' loop."""
  keras.utils.set_random_seed(0)
  backbone = backbone_lib.RealFormerBackbone(
      vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
      intermediate_dim=32, dropout=0.1, max_sequence_length=SEQ)
  model = masked_lm.RealFormerMaskedLM(backbone)
  model.compile(optimizer=keras.optimizers.Adam(3e-3), weighted_metrics=[],
                steps_per_execution=2)
  if not fused:
    model.make_train_function = lambda force=False: (
        keras_train_function(model, force))
  history = model.fit(x, y, sample_weight=sample_weight, batch_size=8,
                      epochs=2, shuffle=False, verbose=0)
  return model, history.history["loss"]


def test_masked_lm_with_sample_weights():
  x, y, sample_weight = _masked_lm_batches()
  fused, fused_losses = _masked_lm_fit(True, x, y, sample_weight)
  reference, losses = _masked_lm_fit(False, x, y, sample_weight)
  assert fused.train_function.dispatches == 4  # 2 epochs of 4 batches
  np.testing.assert_allclose(fused_losses, losses, rtol=1e-5)
  _assert_same_model(fused, reference)
