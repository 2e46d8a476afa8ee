"""End to end on real MRPC: pre-training checkpoint -> fine-tune -> paper metrics.

A tiny RealFormer (hidden 32, 2 layers) is pre-trained for 2 steps on dummy
data by Model Garden's trainer (`realformer/pretraining`), then fine-tuned
from that checkpoint on the first 64 rows of the shared MRPC train file and
evaluated on the first 64 dev rows (seq 32) through `train_lib.run_experiment`.
"""
import os

import numpy as np
import pytest
from sklearn import metrics as sk
import tensorflow as tf
import tf_keras

from official.core import exp_factory
from official.core import task_factory
from official.core import train_lib
from realformer_tf.configs import finetuning
from realformer_tf.configs import recipe
from realformer_tf.data import glue
from realformer_tf.data import pretraining_data
from realformer_tf.tasks import sentence_prediction as sp
from realformer_tf.training import sweep

DATA_DIR = pretraining_data.default_data_dir()
GLUE_DIR = os.path.join(DATA_DIR, "glue")
VOCAB = os.path.join(DATA_DIR, "vocab", "bert-base-uncased-vocab.txt")

pytestmark = pytest.mark.skipif(
    not (os.path.isdir(os.path.join(GLUE_DIR, "MRPC")) and
         os.path.exists(VOCAB)),
    reason=f"shared GLUE data not found under {DATA_DIR} "
    "(set REALFORMER_DATA_DIR)")

SEQ = 32
ENCODER = dict(vocab_size=30522, hidden_size=32, num_layers=2,
               num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=SEQ)
TINY_TRAINER = {"steps_per_loop": 2, "summary_interval": 2,
                "checkpoint_interval": 2}


def _strategy():
  return tf.distribute.OneDeviceStrategy("/cpu:0")


@pytest.fixture(scope="module")
def pretrain_dir(tmp_path_factory):
  """A checkpoint written by Model Garden's trainer for realformer/pretraining."""
  model_dir = str(tmp_path_factory.mktemp("pretrain"))
  config = exp_factory.get_exp_config("realformer/pretraining")
  config.override({
      "task": {"model": {"encoder": {"any": ENCODER}},
               "train_data": {"input_path": "dummy", "seq_length": SEQ,
                              "global_batch_size": 4,
                              "max_predictions_per_seq": 4}},
      "runtime": {"distribution_strategy": "one_device"},
      "trainer": dict(TINY_TRAINER, train_steps=2, optimizer_config={
          "learning_rate": {"polynomial": {"initial_learning_rate": 1e-2,
                                           "decay_steps": 10}},
          "warmup": {"polynomial": {"warmup_steps": 0}}}),
  })
  config.task.model.cls_heads[0].inner_dim = ENCODER["hidden_size"]
  tf_keras.utils.set_random_seed(1)
  strategy = _strategy()
  with strategy.scope():
    task = task_factory.get_task(config.task, logging_dir=model_dir)
  model, _ = train_lib.run_experiment(
      distribution_strategy=strategy, task=task, mode="train", params=config,
      model_dir=model_dir)
  weights = {
      "encoder": [w.numpy() for w in model.checkpoint_items["encoder"].weights],
      "pooler": [w.numpy() for w in
                 model.checkpoint_items["next_sentence.pooler_dense"].weights],
  }
  return model_dir, weights


@pytest.fixture(scope="module")
def mrpc_dir(tmp_path_factory):
  """TFRecords of the first 64 train / 64 dev rows of the real MRPC."""
  root = tmp_path_factory.mktemp("mrpc")
  task_dir = root / "glue" / "MRPC"
  task_dir.mkdir(parents=True)
  for name in ("train.tsv", "dev.tsv"):
    with open(os.path.join(GLUE_DIR, "MRPC", name), "rb") as f:
      lines = f.read().split(b"\n")
    (task_dir / name).write_bytes(b"\n".join(lines[:65]) + b"\n")
  out = str(root / "records")
  meta = glue.convert("mrpc", VOCAB, out, max_seq_length=SEQ,
                      glue_dir=str(root / "glue"))
  assert meta["train_data_size"] == 64
  return out


def _config(data_dir, init_checkpoint, model_dir_steps=8):
  config = finetuning.load_glue_config("mrpc", params_override=(
      f"task.init_checkpoint={init_checkpoint},"
      "runtime.distribution_strategy=one_device"))
  config.override({
      "task": {"model": {"encoder": {"any": ENCODER}},
               "train_data": {"seq_length": SEQ, "global_batch_size": 16},
               "validation_data": {"seq_length": SEQ,
                                   "global_batch_size": 16}},
      "trainer": dict(TINY_TRAINER, validation_interval=model_dir_steps),
  })
  sweep.replace_data_dir(config, data_dir)
  # 2 epochs over 64 examples at batch 16 = 8 steps, 10% warm-up.
  recipe.apply_paper_schedule(config, 64, epochs=2, learning_rate=1e-3)
  assert config.trainer.train_steps == model_dir_steps
  return config


def test_init_from_pretraining_checkpoint(pretrain_dir, mrpc_dir):
  ckpt_dir, pretrained = pretrain_dir
  config = _config(mrpc_dir, ckpt_dir)
  task = sp.RealFormerSentencePredictionTask(config.task)
  model = task.build_model()
  encoder = model.checkpoint_items["encoder"]
  pooler = model.checkpoint_items["sentence_prediction.pooler_dense"]
  before = [w.numpy() for w in encoder.weights]
  task.initialize(model)
  after = [w.numpy() for w in encoder.weights]
  assert len(after) == len(pretrained["encoder"]) > 10
  for got, want in zip(after, pretrained["encoder"]):
    np.testing.assert_array_equal(got, want)
  assert any(not np.array_equal(b, a) for b, a in zip(before, after))
  for got, want in zip(pooler.weights, pretrained["pooler"]):
    np.testing.assert_array_equal(got.numpy(), want)

  # A checkpoint without the NSP head is refused when init_cls_pooler is on.
  no_head = os.path.join(os.path.dirname(mrpc_dir), "encoder_only", "ckpt")
  path = tf.train.Checkpoint(encoder=encoder).write(no_head)
  config.task.init_checkpoint = path
  with pytest.raises(ValueError, match="has no 'next_sentence.pooler_dense' "
                     "object"):
    sp.RealFormerSentencePredictionTask(config.task).initialize(model)
  config.task.init_cls_pooler = False
  sp.RealFormerSentencePredictionTask(config.task).initialize(model)


def test_finetune_mrpc_end_to_end_and_resume(pretrain_dir, mrpc_dir,
                                             tmp_path):
  ckpt_dir, _ = pretrain_dir
  config = _config(mrpc_dir, ckpt_dir)
  model_dir = str(tmp_path / "mrpc")
  tf_keras.utils.set_random_seed(0)
  strategy = _strategy()
  with strategy.scope():
    task = task_factory.get_task(config.task, logging_dir=model_dir)
  model, logs = train_lib.run_experiment(
      distribution_strategy=strategy, task=task, mode="train_and_eval",
      params=config, model_dir=model_dir, run_post_eval=True)
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-8")
  f1, acc = float(logs["f1"]), float(logs["accuracy"])
  assert 0.0 <= f1 <= 1.0 and 0.0 <= acc <= 1.0
  assert np.isfinite(float(logs["validation_loss"]))

  # The same predictions scored by scikit-learn.
  dataset = task.build_inputs(config.task.validation_data)
  labels, preds = [], []
  for batch in dataset:
    logits = model(batch, training=False)
    preds.append(np.argmax(logits.numpy(), axis=1))
    labels.append(batch["label_ids"].numpy())
  labels, preds = np.concatenate(labels), np.concatenate(preds)
  assert len(labels) == 64  # Every dev row, no remainder dropped.
  assert f1 == pytest.approx(sk.f1_score(labels, preds), abs=1e-6)
  assert acc == pytest.approx(sk.accuracy_score(labels, preds), abs=1e-6)
  # Model Garden's Keras metric agrees on accuracy.
  assert float(logs["cls_accuracy"]) == pytest.approx(acc, abs=1e-6)

  # A rerun in the sweep's runner restores ckpt-8 instead of training again:
  # a different seed gives the very same evaluation.
  again = sweep.train_and_evaluate(config, model_dir, seed=123)
  assert again["global_step"] == 8
  assert again["eval_logs"]["f1"] == pytest.approx(f1, abs=1e-7)
  assert again["eval_logs"]["accuracy"] == pytest.approx(acc, abs=1e-7)
  assert os.path.exists(os.path.join(model_dir, "params.yaml"))
