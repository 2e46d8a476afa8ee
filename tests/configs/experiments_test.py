"""Tests for realformer_tf/configs/experiments.py: the pre-training
experiments (the paper recipe's TPU input pipeline, the seeded quickstart)."""

import os

import tensorflow as tf

from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.training import train_lib
from tests.helpers import train_runs as utils

CONFIGS = os.path.join(utils.REPO_ROOT, "official_configs")


def test_input_pipeline_is_tpu_ready(tmp_path):
  """Paper recipe on TPU: static shapes, per-replica batches, drop_remainder."""
  records = utils.write_pretraining_records(
      str(tmp_path / "train.tfrecord"), 4, seq_length=512,
      max_predictions=80)
  params = train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=experiments.PRETRAINING,
      config_file=[os.path.join(CONFIGS, "models", "bert_small.yaml"),
                   os.path.join(CONFIGS, "experiments", "pretrain_paper.yaml"),
                   os.path.join(CONFIGS, "runtime", "tpu.yaml")],
      params_override=(f"task.train_data.input_path={records},"
                       f"task.validation_data.input_path={records}")))
  task = task_factory.get_task(params.task)
  # 2 hosts x 4 cores: each host's pipeline batches for one replica.
  context = tf.distribute.InputContext(
      num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=8)
  for data in (params.task.train_data, params.task.validation_data):
    assert data.drop_remainder
    spec = task.build_inputs(data, input_context=context).element_spec
    assert set(spec) == {"input_word_ids", "input_mask", "input_type_ids",
                         "masked_lm_positions", "masked_lm_ids",
                         "masked_lm_weights", "next_sentence_labels"}
    for name, tensor_spec in spec.items():
      assert tensor_spec.shape.is_fully_defined(), (name, tensor_spec)
      assert tensor_spec.shape[0] == data.global_batch_size // 8, name
    assert spec["input_word_ids"].shape == (64, 512)
    assert spec["masked_lm_ids"].shape == (64, 80)
    assert spec["input_word_ids"].dtype == tf.int32  # TPU-friendly ints.


def test_quickstart_is_seeded():
  assert experiments.realformer_quickstart().task.train_data.seed == (
      experiments.QUICKSTART_SEED)
