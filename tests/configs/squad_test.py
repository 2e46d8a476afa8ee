"""realformer/squad: YAMLs through train.py's parser, init from pre-training."""
import filecmp
import os

import numpy as np
import pytest
import tensorflow as tf

from official.core import base_trainer
from official.core import exp_factory
from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments  # pylint: disable=unused-import
from realformer_tf.configs import squad
from realformer_tf.data import squad as squad_data
from realformer_tf.tasks import question_answering as rf_question_answering
from tests.helpers import squad as common


def _parse(*config_files, params_override=None):
  return train_utils.parse_configuration(
      common.Flags(experiment=squad.SQUAD, config_file=list(config_files),
                   params_override=params_override),
      print_return=False)


@pytest.mark.parametrize("version,batch,epochs,questions,v2", [
    ("v1.1", 32, 3, squad.SQUAD_V1_TRAIN_QUESTIONS, False),
    ("v2.0", 48, 2, squad.SQUAD_V2_TRAIN_QUESTIONS, True),
])
def test_yaml_loads_with_paper_recipe(version, batch, epochs, questions, v2):
  params = _parse(common.config_path(version))
  task = params.task
  assert task.name == squad.SQUAD
  assert isinstance(task, rf_question_answering.RealFormerQAConfig)
  assert task_factory._REGISTERED_TASK_CLS[type(task)] is (
      rf_question_answering.RealFormerQATask)  # pylint: disable=protected-access
  assert task.model.encoder.type == "any"
  assert isinstance(task.model.encoder.any, encoders.RealFormerEncoderConfig)
  assert task.model.encoder.any.residual_attention == "sum"
  assert task.train_data.global_batch_size == batch
  assert task.train_data.seq_length == task.validation_data.seq_length == 384
  assert task.validation_data.doc_stride == 128
  assert task.validation_data.query_length == 64
  assert task.train_data.version_2_with_negative == v2
  assert task.validation_data.version_2_with_negative == v2
  assert task.train_data.is_training and not task.validation_data.is_training
  steps = -(-questions * epochs // batch)
  assert params.trainer.train_steps == steps
  opt = params.trainer.optimizer_config
  assert opt.optimizer.type == "adamw"
  assert opt.optimizer.adamw.weight_decay_rate == 0.01
  assert opt.learning_rate.polynomial.initial_learning_rate == 5e-5
  assert opt.learning_rate.polynomial.decay_steps == steps
  assert opt.learning_rate.polynomial.end_learning_rate == 0.0
  assert opt.warmup.polynomial.warmup_steps == steps // 10
  # The placeholders are paths the user replaces.
  assert task.init_checkpoint.startswith("/path/to/")
  assert task.train_data.input_path.startswith("/path/to/")
  assert task.validation_data.input_path.startswith("/path/to/")


def test_paper_grid_point_and_schedule_overrides(tmp_path):
  # Any grid point by override; train_schedule.yaml (from the converter)
  # sets matching train/decay/warm-up steps.
  schedule = tmp_path / "train_schedule.yaml"
  schedule.write_text(squad_data.train_schedule_yaml(
      "/data/train.tf_record", train_data_size=88000, epochs=4,
      global_batch_size=48))
  params = _parse(
      common.config_path("v1.1"), str(schedule),
      params_override="trainer.optimizer_config.learning_rate.polynomial."
      "initial_learning_rate=2e-5")
  assert params.trainer.train_steps == 7334  # ceil(88000 * 4 / 48)
  assert params.trainer.validation_interval == 7334
  opt = params.trainer.optimizer_config
  assert opt.learning_rate.polynomial.decay_steps == 7334
  assert opt.warmup.polynomial.warmup_steps == 733
  assert opt.learning_rate.polynomial.initial_learning_rate == 2e-5
  assert params.task.train_data.global_batch_size == 48
  assert params.task.train_data.input_path == "/data/train.tf_record"


def test_inconsistent_overrides_are_rejected():
  with pytest.raises(KeyError, match="decay_steps"):
    _parse(common.config_path("v1.1"), params_override="trainer.train_steps=10")
  with pytest.raises(KeyError, match="version_2_with_negative"):
    _parse(common.config_path("v1.1"),
           params_override="task.train_data.version_2_with_negative=true")


def _tiny_squad_task_config(tmp_path, **overrides):
  config = exp_factory.get_exp_config(squad.SQUAD)
  config.override({
      "task": {
          "model": {"encoder": {"any": common.TINY_ENCODER}},
          "train_data": {"seq_length": 64},
          "validation_data": {"seq_length": 64},
          **overrides,
      }}, is_strict=True)
  return config.task


def test_init_checkpoint_restores_pretrained_encoder(tmp_path):
  """A Model Garden trainer checkpoint of realformer/pretraining -> encoder."""
  pre = exp_factory.get_exp_config(experiments.PRETRAINING)
  pre.override({"task": {"model": {"encoder": {"any": common.TINY_ENCODER},
                                   "cls_heads": [{"inner_dim": 32,
                                                  "num_classes": 2,
                                                  "name": "next_sentence"}]}},
                "trainer": {"optimizer_config": {"learning_rate": {
                    "polynomial": {"decay_steps": 100}}}}},
               is_strict=True)
  pre_task = task_factory.get_task(pre.task)
  pre_model = pre_task.build_model()
  pre_model(pre_model.inputs)
  trainer = base_trainer.Trainer(
      pre, pre_task, model=pre_model,
      optimizer=pre_task.create_optimizer(pre.trainer.optimizer_config,
                                          pre.runtime),
      train=False, evaluate=False)
  pre_dir = str(tmp_path / "pretrain")
  tf.train.CheckpointManager(trainer.checkpoint, pre_dir,
                             max_to_keep=1).save(checkpoint_number=7)

  task = task_factory.get_task(_tiny_squad_task_config(
      tmp_path, init_checkpoint=pre_dir))
  model = task.build_model()
  model(model.inputs)
  head_before = [w.numpy() for w in model.layers[-1].weights]
  task.initialize(model)  # Model Garden's: reads checkpoint_items['encoder'].
  pre_weights = pre_model.encoder_network.get_weights()
  qa_weights = model.checkpoint_items["encoder"].get_weights()
  assert len(qa_weights) == len(pre_weights) > 0
  for a, b in zip(qa_weights, pre_weights):
    np.testing.assert_array_equal(a, b)
  # The span head is not in the checkpoint and keeps its initial values.
  for a, b in zip(head_before, [w.numpy() for w in model.layers[-1].weights]):
    np.testing.assert_array_equal(a, b)

  # A mismatched encoder size fails loudly instead of loading partially.
  wrong = task_factory.get_task(_tiny_squad_task_config(
      tmp_path, init_checkpoint=pre_dir,
      model={"encoder": {"any": dict(common.TINY_ENCODER, num_layers=3)}}))
  wrong_model = wrong.build_model()
  wrong_model(wrong_model.inputs)
  with pytest.raises(AssertionError):
    wrong.initialize(wrong_model)


def test_task_eval_features_equal_the_command_line_ones(tmp_path):
  source = common.write_json(common.v2_dataset(), str(tmp_path / "v2.json"))
  cli_dir = str(tmp_path / "cli")
  squad_data.convert(source, common.vocab_file(), cli_dir, is_training=False,
                     version_2_with_negative=True, max_seq_length=64,
                     doc_stride=32, max_query_length=16, eval_batch_size=4)
  model_dir = str(tmp_path / "model")
  task = task_factory.get_task(_tiny_squad_task_config(
      tmp_path, validation_data={
          "input_path": source, "vocab_file": common.vocab_file(),
          "seq_length": 64, "doc_stride": 32, "query_length": 16,
          "global_batch_size": 4, "version_2_with_negative": True}),
      logging_dir=model_dir)
  assert filecmp.cmp(os.path.join(cli_dir, squad_data.EVAL_RECORD),
                     os.path.join(model_dir, squad_data.EVAL_RECORD),
                     shallow=False)


def test_task_rejects_sentencepiece_and_long_sequences(tmp_path):
  with pytest.raises(ValueError, match="tensorflow-text WordPiece"):
    task_factory.get_task(_tiny_squad_task_config(
        tmp_path, validation_data={"tokenization": "SentencePiece"}))
  with pytest.raises(ValueError, match="max_position_embeddings=128"):
    task_factory.get_task(_tiny_squad_task_config(
        tmp_path, train_data={"seq_length": 384}))
