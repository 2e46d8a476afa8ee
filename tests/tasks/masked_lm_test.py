"""Tests for realformer_tf/tasks/masked_lm.py: float16 training scales the loss.

One train step of a tiny RealFormer under the `mixed_float16` policy with
Model Garden's `LossScaleOptimizer` (as the GPU runtime YAML configures it)
must give the float32 step's gradients, up to float16 rounding.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from official.core import exp_factory
from official.core import task_factory
from official.modeling import performance
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.tasks import masked_lm
from tests.helpers import train_runs as utils


def _params():
  params = exp_factory.get_exp_config("realformer/pretraining")
  overrides = utils.tiny_overrides("dummy", "dummy", dropout=0.0)
  params.override({"task": {"model": overrides["task"]["model"]}})
  return params


def _batch(tmp_path):
  path = utils.write_pretraining_records(str(tmp_path / "b.tfrecord"), 8)
  params = _params()
  data = params.task.train_data.replace(
      input_path=path, seq_length=utils.TINY_SEQ_LENGTH,
      max_predictions_per_seq=utils.TINY_MAX_PREDICTIONS,
      global_batch_size=8, shuffle_buffer_size=1)
  task = task_factory.get_task(params.task)
  return next(iter(task.build_inputs(data)))


def _gradients(policy, batch, weights, loss_scale):
  """Gradients `train_step` hands to the optimizer's inner apply."""
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    params = _params()
    task = task_factory.get_task(params.task)
    assert isinstance(task, masked_lm.MaskedLMTask)
    model = task.build_model()
    model(batch)
    model.set_weights(weights)
    optimizer = tf_keras.optimizers.SGD(0.0)
    if loss_scale:
      optimizer = performance.configure_optimizer(
          optimizer, use_float16=True, loss_scale="dynamic")
    seen = {}
    apply = optimizer.apply_gradients

    def spy(grads_and_vars, *args, **kwargs):
      seen["grads"] = [g.numpy() for g, _ in grads_and_vars]
      seen["names"] = [v.name for _, v in grads_and_vars]
      return apply(grads_and_vars, *args, **kwargs)

    optimizer.apply_gradients = spy
    if loss_scale:
      get_scaled_loss = optimizer.get_scaled_loss

      def scaled_spy(loss):
        seen["scaled_losses"] = seen.get("scaled_losses", 0) + 1
        return get_scaled_loss(loss)

      optimizer.get_scaled_loss = scaled_spy
    metrics = task.build_metrics(training=True)
    # The learning rate is 0, so the weights stay put. A dynamic scale starts
    # at 2**15 and halves (skipping the step) while the scaled gradients
    # overflow float16: repeat the step until it is applied.
    for step in range(1, 13):
      logs = task.train_step(batch, model, optimizer, metrics=metrics)
      if all(np.all(np.isfinite(g)) for g in seen["grads"]):
        break
    # The encoder's pooler gets no gradient (the NSP head has its own) and
    # is left out of the update; everything else is in it.
    trained = {v.name for v in model.trainable_variables} - {
        v.name for v in model.trainable_variables
        if "/pooler_transform/" in v.name}
    assert set(seen["names"]) == trained, sorted(
        set(seen["names"]) ^ trained)
    if loss_scale:
      # Model Garden's MaskedLMTask never scales: no call, scale untouched.
      assert seen.get("scaled_losses") == step
    scale = float(optimizer.loss_scale) if loss_scale else 1.0
    return seen["grads"], float(logs[task.loss]), scale
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")


def test_float16_step_gradients_equal_float32(tmp_path):
  batch = _batch(tmp_path)
  tf_keras.utils.set_random_seed(0)
  task = task_factory.get_task(_params().task)
  reference = task.build_model()
  reference(batch)
  weights = reference.get_weights()
  g32, loss32, _ = _gradients("float32", batch, weights, loss_scale=False)
  g16, loss16, scale = _gradients("mixed_float16", batch, weights,
                                  loss_scale=True)
  # The first scaled step overflowed float16 and was skipped: the dynamic
  # scale (2**15 at the start) came down.
  assert scale < 2**15
  np.testing.assert_allclose(loss16, loss32, rtol=1e-2)
  assert [g.shape for g in g16] == [g.shape for g in g32]
  flat32 = np.concatenate([g.ravel() for g in g32])
  flat16 = np.concatenate([g.ravel() for g in g16])
  assert np.all(np.isfinite(flat16))
  err = np.linalg.norm(flat16 - flat32) / np.linalg.norm(flat32)
  assert err < 1e-2, err


def test_config_registers_the_task_in_tasks():
  """tasks/ registers the masked-LM task itself, as the other three tasks."""
  task = task_factory.get_task(masked_lm.RealFormerMaskedLMConfig())
  assert type(task) is masked_lm.MaskedLMTask  # pylint: disable=unidiomatic-typecheck
  assert masked_lm.RealFormerMaskedLMConfig().vocab_file == ""


def test_untrained_variables_are_said_once_in_words(monkeypatch):
  """The pooler's missing gradient: one info line naming it, not tf_keras'
  warning at every trace ("did you forget to provide a `loss` argument?");
  any other variable without a gradient is a warning."""
  said = []
  monkeypatch.setattr(masked_lm, "_REPORTED", set())
  monkeypatch.setattr(masked_lm.logging, "info",
                      lambda msg, *a: said.append(("info", msg % a)))
  monkeypatch.setattr(masked_lm.logging, "warning",
                      lambda msg, *a: said.append(("warning", msg % a)))
  pooler = ["encoder/pooler_transform/kernel:0",
            "encoder/pooler_transform/bias:0"]
  masked_lm.report_untrained(pooler)
  masked_lm.report_untrained(reversed(pooler))  # A second trace: silent.
  masked_lm.report_untrained(["next_sentence/pooler_dense/kernel:0"] + pooler)
  assert [level for level, _ in said] == ["info", "warning"], said
  assert ("encoder/pooler_transform/bias:0, "
          "encoder/pooler_transform/kernel:0") in said[0][1]
  assert "init_cls_pooler" in said[0][1]
  # The NSP head's own pooler must be trained: a warning, naming it.
  assert said[1][1].startswith(
      "No gradient reaches next_sentence/pooler_dense/kernel:0:")


def _records(dataset, count):
  """The first `count` examples' input ids, each as a tuple."""
  ids = []
  for batch in dataset.take(count):
    ids += [tuple(row) for row in batch["input_word_ids"].numpy()]
  return ids


def test_workers_read_disjoint_shards_reshuffled_every_epoch(tmp_path):
  """Two input pipelines (as two MultiWorkerMirroredStrategy workers) on a
  4-shard set with `seed` unset: each epoch they read disjoint halves of the
  shards, together all of them, and the halves change between epochs."""
  per_shard, shards, epochs = 3, 4, 4
  pattern = utils.write_pretraining_shards(str(tmp_path / "train"), shards,
                                           per_shard)
  params = _params()
  data = params.task.train_data.replace(
      input_path=pattern, seq_length=utils.TINY_SEQ_LENGTH,
      max_predictions_per_seq=utils.TINY_MAX_PREDICTIONS,
      global_batch_size=2, shuffle_buffer_size=1, cycle_length=1)
  assert data.seed is None
  task = task_factory.get_task(params.task)
  per_epoch = per_shard * shards // 2
  read = [_records(task.build_inputs(data, tf.distribute.InputContext(
      num_input_pipelines=2, input_pipeline_id=worker,
      num_replicas_in_sync=2)), per_epoch * epochs) for worker in (0, 1)]
  everything = set(_records(task.build_inputs(
      data.replace(is_training=False, global_batch_size=1)), 12))
  assert len(everything) == per_shard * shards
  halves = []
  for epoch in range(epochs):
    first, second = (set(ids[epoch * per_epoch:(epoch + 1) * per_epoch])
                     for ids in read)
    assert len(first) == len(second) == per_epoch
    assert not first & second and first | second == everything
    halves.append(frozenset(first))
  assert len(set(halves)) > 1, "the same shards every epoch"
