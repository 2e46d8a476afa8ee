"""A stopped and resumed pre-training run trains on the uninterrupted run's
batches: the same loss at every step (issue 37: Model Garden does not
checkpoint the input iterator, so a resumed run read its records from the
start again; `resumable_pretraining`, `Trainer.__init__`).

Dropout is off: tf_keras' dropout draws from TensorFlow's stateful random
ops, whose state is not in the checkpoint, so with dropout the losses after
a resume differ by its noise (docs/pretraining_at_scale.md).
"""

import logging

import numpy as np
import tensorflow as tf

from realformer_tf.reproduce import tf_keras_face
from tests.helpers import train_runs

STEPS = 8


def _losses(model_dir):
  return dict(tf_keras_face.read_curves(str(model_dir),
                                       "training_loss")["train"])


def _config(tmp_path):
  run = train_runs.make_tiny_run(
      tmp_path, num_train=24, train_steps=STEPS, steps_per_loop=1,
      checkpoint_interval=1, batch_size=4, dropout=0.0, sgd=True,
      learning_rate=0.05)
  return run["config_file"]


_DATA = ("task.train_data.seed=11,task.train_data.shuffle_buffer_size=8,"
         "trainer.validation_interval=100")


def test_a_resumed_run_trains_on_the_uninterrupted_runs_batches(tmp_path):
  config = _config(tmp_path)
  # 24 records, 4 a step: the files repeat after step 6, inside both halves.
  train_runs.run_in_process(tmp_path / "whole", [config],
                            params_override=_DATA)
  whole = _losses(tmp_path / "whole")
  assert sorted(whole) == list(range(1, STEPS + 1)), whole

  stopped = tmp_path / "stopped"
  train_runs.run_in_process(stopped, [config],
                            params_override=_DATA + ",trainer.train_steps=3")
  train_runs.run_in_process(stopped, [config], params_override=_DATA)
  resumed = _losses(stopped)
  assert sorted(resumed) == list(range(1, STEPS + 1)), resumed
  np.testing.assert_allclose([resumed[s] for s in range(1, STEPS + 1)],
                             [whole[s] for s in range(1, STEPS + 1)],
                             rtol=1e-6, atol=0)
  # The test can fail: the batches differ from step to step.
  assert len({round(whole[s], 6) for s in range(1, STEPS + 1)}) == STEPS


def test_a_resume_with_another_batch_size_skips_the_records_trained_on(
    tmp_path, caplog):
  """3 steps of 4 records, then resumed with batches of 2 to step 5: the
  input skips the 12 records trained on (not 3 batches of 2), and the
  checkpoint counts 12 + 2 * 2 of them (`resumable_pretraining` tests that
  skipping them continues the stream)."""
  config = _config(tmp_path)
  run = tmp_path / "run"
  train_runs.run_in_process(run, [config],
                            params_override=_DATA + ",trainer.train_steps=3")
  assert _records(run) == (3, 12)
  # On absl's logger: an earlier test in this worker may have set its level.
  with caplog.at_level(logging.INFO, logger="absl"):
    train_runs.run_in_process(
        run, [config], params_override=_DATA + ",trainer.train_steps=5,"
        "task.train_data.global_batch_size=2")
  assert _records(run) == (5, 16)
  assert ("Resuming the input after the 12 records the stopped run trained "
          "on: the first 12 records of this input pipeline are skipped"
          in caplog.text), caplog.text


def _records(model_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(model_dir)))
  return (int(reader.get_tensor("global_step/.ATTRIBUTES/VARIABLE_VALUE")),
          int(reader.get_tensor("input_records/.ATTRIBUTES/VARIABLE_VALUE")))
