"""Tiny trained model dirs and data for the attention-analysis tests.

Built here (not with train.py or the project's data code) exactly as Model
Garden's trainer lays them out: `params.yaml` from `serialize_config`, and a
`tf.train.Checkpoint(global_step, model, optimizer, **checkpoint_items)`
saved by a `tf.train.CheckpointManager`.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.core import exp_factory
from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import experiments

SEQ_LENGTH = 16
MAX_PREDICTIONS = 3
VOCAB_SIZE = 40
NUM_LAYERS = 2
NUM_HEADS = 4
# Unpadded lengths of the validation examples, in file order.
LENGTHS = (16, 5, 9, 12, 3, 16, 7, 10, 2, 14)


def write_pretraining_records(path, lengths=LENGTHS, seed=0):
  """BERT pre-training tf.Examples (Model Garden's v1 feature names)."""
  rng = np.random.default_rng(seed)

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  with tf.io.TFRecordWriter(str(path)) as writer:
    for n in lengths:
      ids = np.zeros([SEQ_LENGTH], np.int64)
      ids[:n] = rng.integers(5, VOCAB_SIZE, size=n)
      mask = (np.arange(SEQ_LENGTH) < n).astype(np.int64)
      segments = ((np.arange(SEQ_LENGTH) >= n // 2) & (mask == 1)).astype(
          np.int64)
      positions = np.array([1, 2, 3]) % max(n, 1)
      features = dict(
          input_ids=ints(ids), input_mask=ints(mask), segment_ids=ints(segments),
          masked_lm_positions=ints(positions),
          masked_lm_ids=ints(ids[positions]),
          masked_lm_weights=tf.train.Feature(
              float_list=tf.train.FloatList(value=[1.0] * MAX_PREDICTIONS)),
          next_sentence_labels=ints([n % 2]))
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=features)).SerializeToString())
  return str(path)


def make_model_dir(model_dir, validation_path, residual_attention="sum",
                   seed=0, train_steps=3):
  """A tiny RealFormer/BERT pre-training model dir, trained a few Adam steps."""
  tf_keras.utils.set_random_seed(seed)
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  encoder = params.task.model.encoder.any
  encoder.vocab_size = VOCAB_SIZE
  encoder.hidden_size = 32
  encoder.num_layers = NUM_LAYERS
  encoder.num_attention_heads = NUM_HEADS
  encoder.intermediate_size = 64
  encoder.max_position_embeddings = 32
  encoder.residual_attention = residual_attention
  # Larger weights than BERT's 0.02 give peaked, varied attention after a
  # few steps, so the plots and statistics are not all uniform.
  encoder.initializer_range = 0.5
  params.task.model.cls_heads[0].inner_dim = 32
  for data in (params.task.train_data, params.task.validation_data):
    data.input_path = validation_path
    data.seq_length = SEQ_LENGTH
    data.max_predictions_per_seq = MAX_PREDICTIONS
    data.global_batch_size = 4
  tf.io.gfile.makedirs(str(model_dir))
  train_utils.serialize_config(params, str(model_dir))

  task = task_factory.get_task(params.task, logging_dir=str(model_dir))
  model = task.build_model()
  optimizer = tf_keras.optimizers.Adam(1e-2)
  train_metrics = task.build_metrics(training=True)
  data = params.task.train_data.replace(is_training=False, drop_remainder=True)
  for batch in task.build_inputs(data).take(train_steps):
    task.train_step(batch, model, optimizer, metrics=train_metrics)
  global_step = tf.Variable(train_steps, dtype=tf.int64)
  checkpoint = tf.train.Checkpoint(global_step=global_step, model=model,
                                   optimizer=optimizer,
                                   **model.checkpoint_items)
  tf.train.CheckpointManager(checkpoint, str(model_dir), max_to_keep=1,
                             step_counter=global_step).save()
  return str(model_dir)


@pytest.fixture(scope="session")
def analysis_setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("analysis")
  records = write_pretraining_records(root / "valid.tfrecord")
  return dict(
      root=root,
      records=records,
      realformer=make_model_dir(root / "realformer", records, "sum", seed=0),
      bert=make_model_dir(root / "bert", records, "none", seed=1))
