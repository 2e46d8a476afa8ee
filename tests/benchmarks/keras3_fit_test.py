"""`benchmarks/keras3_fit.make_step_timer`: seconds per step, whatever N.

Keras calls the batch callbacks once per execution of `steps_per_execution`
steps, with the execution's first and last step indices; the timer is driven
here as Keras drives it, on a scripted clock, so its figures are exact. (A
real `fit` with steps_per_execution: tests/benchmarks/suite_keras_test.py.)
"""

import os
import sys

import pytest

pytest.importorskip("keras")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import keras3_fit  # pylint: disable=g-import-not-at-top,wrong-import-position


class _Clock:
  """`time` with a `perf_counter` that returns the scripted readings."""

  def __init__(self, readings):
    self._readings = list(readings)

  def perf_counter(self):
    return self._readings.pop(0)

  @property
  def unread(self):
    return self._readings


def _drive(timer, steps, per_execution):
  """Calls the timer as keras/src/backend/jax/trainer.py's `fit` does."""
  timer.set_model(None)
  timer.set_params(dict(steps=steps))
  for begin in range(0, steps, per_execution):
    timer.on_train_batch_begin(begin)
    timer.on_train_batch_end(begin + per_execution - 1, {})


@pytest.mark.parametrize("per_execution", [1, 4])
def test_waited_times_are_seconds_per_step_of_each_execution(
    monkeypatch, per_execution):
  # Three executions taking 2, 4 and 8 s (begin, end readings).
  clock = _Clock([10, 12, 20, 24, 30, 38])
  monkeypatch.setattr(keras3_fit, "time", clock)
  timer = keras3_fit.make_step_timer(every_step=True)
  _drive(timer, 3 * per_execution, per_execution)
  assert timer.times == [2 / per_execution, 4 / per_execution,
                         8 / per_execution]
  assert not clock.unread


@pytest.mark.parametrize("per_execution", [1, 4])
def test_pipelined_time_is_per_step_over_whole_executions(
    monkeypatch, per_execution):
  # Read at the end of the first execution (t=1) and of the last (t=9):
  # the executions between and the last one, 3 of them, ran in 8 s.
  clock = _Clock([1, 9])
  monkeypatch.setattr(keras3_fit, "time", clock)
  timer = keras3_fit.make_step_timer(every_step=False)
  _drive(timer, 4 * per_execution, per_execution)
  assert timer.pipelined == 8 / (3 * per_execution)
  assert not clock.unread


def _layer_classes(model):
  return {type(layer).__name__ for layer in model._flatten_layers()}  # pylint: disable=protected-access


def _tiny(arch, **build):
  return keras3_fit.build_mlm_model(
      arch, layers=1, hidden=8, heads=2, inner=16, seq=8,
      policy="float32", **build)


def test_bert_is_keras_hubs_own_and_ours_is_ours():
  # The peer is keras-hub's BertBackbone as a user builds it: Keras' dropout
  # and embeddings, none of ours.
  from realformer_tf.keras3 import embeddings  # pylint: disable=g-import-not-at-top
  bert = _tiny("bert")
  assert "HashedDropout" not in _layer_classes(bert)
  assert "Dropout" in _layer_classes(bert)
  assert not any(isinstance(layer, (embeddings.Embedding,
                                    embeddings.ReversibleEmbedding))
                 for layer in bert._flatten_layers())  # pylint: disable=protected-access
  assert "HashedDropout" in _layer_classes(_tiny("realformer"))
