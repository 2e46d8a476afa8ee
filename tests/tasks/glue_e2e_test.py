"""End to end on MRPC: pre-training checkpoint -> fine-tune -> paper metrics.

A tiny RealFormer (hidden 32, 2 layers) is pre-trained for 2 steps on dummy
data by Model Garden's trainer (`realformer/pretraining`), then fine-tuned
from that checkpoint on the first 64 rows of the shared MRPC train file and
evaluated on the first 64 dev rows (seq 32) through `train_lib.run_experiment`.
Without the shared data it runs on the handmade fixture MRPC (all 16 + 16
rows) and the fixture vocabulary (`tests.shared_data`); the step counts follow
the rows used.
"""
import math
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
from realformer_tf.tasks import sentence_prediction as sp
from realformer_tf.training import runs
from realformer_tf.training import sweep
from tests.helpers import shared_data

VOCAB = shared_data.vocab_file()
MRPC_DIR, MRPC_IS_REAL = shared_data.real_or_fixture(shared_data.MRPC_DIR)
# The real MRPC is cut to keep the test cheap; the fixture is used whole.
MAX_ROWS = 64
SEQ = 32
BATCH = 16
EVAL_BATCH = 12
EPOCHS = 2
ENCODER = dict(vocab_size=shared_data.vocab_size(VOCAB), hidden_size=32,
               num_layers=2, num_attention_heads=2, intermediate_size=64,
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
  """TFRecords of the first (at most 64) train / dev rows of MRPC.

  Returns:
    (records directory, {"train": rows, "dev": rows}).
  """
  root = tmp_path_factory.mktemp("mrpc")
  task_dir = root / "glue" / "MRPC"
  task_dir.mkdir(parents=True)
  rows = {}
  for split in ("train", "dev"):
    with open(os.path.join(MRPC_DIR, f"{split}.tsv"), "rb") as f:
      lines = f.read().split(b"\n")
    if not lines[-1]:  # The final newline, not an empty row.
      lines.pop()
    keep = lines[:1 + MAX_ROWS]  # The header and the first rows.
    (task_dir / f"{split}.tsv").write_bytes(b"\n".join(keep) + b"\n")
    rows[split] = len(keep) - 1
  if MRPC_IS_REAL:
    assert rows == {"train": MAX_ROWS, "dev": MAX_ROWS}
  out = str(root / "records")
  meta = glue.convert("mrpc", VOCAB, out, max_seq_length=SEQ,
                      glue_dir=str(root / "glue"))
  assert meta["train_data_size"] == rows["train"]
  assert meta["eval_data_size"] == {"dev": rows["dev"]}
  return out, rows


def _train_steps(rows):
  """ceil(EPOCHS * rows / BATCH): 8 on 64 real rows, 2 on 16 fixture rows."""
  return math.ceil(EPOCHS * rows["train"] / BATCH)


def _config(data_dir, init_checkpoint, rows):
  steps = _train_steps(rows)
  config = finetuning.load_glue_config("mrpc", params_override=(
      f"task.init_checkpoint={init_checkpoint},"
      "runtime.distribution_strategy=one_device"))
  config.override({
      "task": {"model": {"encoder": {"any": ENCODER}},
               "train_data": {"seq_length": SEQ, "global_batch_size": BATCH},
               # Not a divisor of the dev rows: the last batch is partial.
               "validation_data": {"seq_length": SEQ,
                                   "global_batch_size": EVAL_BATCH}},
      "trainer": dict(TINY_TRAINER, validation_interval=steps),
  })
  sweep.replace_data_dir(config, data_dir)
  # EPOCHS epochs over the train rows at BATCH, 10% warm-up.
  recipe.apply_paper_schedule(config, rows["train"], epochs=EPOCHS,
                              learning_rate=1e-3)
  assert config.trainer.train_steps == steps
  return config


def test_init_from_pretraining_checkpoint(pretrain_dir, mrpc_dir):
  ckpt_dir, pretrained = pretrain_dir
  records, rows = mrpc_dir
  config = _config(records, ckpt_dir, rows)
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
  no_head = os.path.join(os.path.dirname(records), "encoder_only", "ckpt")
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
  records, rows = mrpc_dir
  steps = _train_steps(rows)
  config = _config(records, ckpt_dir, rows)
  model_dir = str(tmp_path / "mrpc")
  tf_keras.utils.set_random_seed(0)
  strategy = _strategy()
  with strategy.scope():
    task = task_factory.get_task(config.task, logging_dir=model_dir)
  model, logs = train_lib.run_experiment(
      distribution_strategy=strategy, task=task, mode="train_and_eval",
      params=config, model_dir=model_dir, run_post_eval=True)
  assert tf.train.latest_checkpoint(model_dir).endswith(f"ckpt-{steps}")
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
  assert len(labels) == rows["dev"]  # Every dev row, no remainder dropped.
  assert f1 == pytest.approx(sk.f1_score(labels, preds), abs=1e-6)
  assert acc == pytest.approx(sk.accuracy_score(labels, preds), abs=1e-6)
  # Model Garden's Keras metric agrees on accuracy.
  assert float(logs["cls_accuracy"]) == pytest.approx(acc, abs=1e-6)

  # A rerun in the sweep's runner restores the final checkpoint instead of
  # training again: a different seed gives the very same evaluation.
  again = runs.train_and_evaluate(config, model_dir, seed=123)
  assert again["global_step"] == steps
  assert again["eval_logs"]["f1"] == pytest.approx(f1, abs=1e-7)
  assert again["eval_logs"]["accuracy"] == pytest.approx(acc, abs=1e-7)
  assert os.path.exists(os.path.join(model_dir, "params.yaml"))
