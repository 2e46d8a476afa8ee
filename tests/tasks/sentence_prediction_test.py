"""The paper's GLUE metrics and the task's aggregation (no training)."""
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk
import tensorflow as tf

from realformer_tf.configs import finetuning
from realformer_tf.data import glue_tasks
from realformer_tf.tasks import sentence_prediction as sp

LABELS = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
PREDS = np.array([1, 1, 1, 0, 1, 1, 0, 0, 0, 0])


def _task(task, **override):
  config = finetuning.load_glue_config(task)
  config.task.override(override, is_strict=True)
  return sp.RealFormerSentencePredictionTask(config.task)


def _model_metrics(result):
  return {k: v for k, v in result.items()
          if not k.startswith(glue_tasks.MAJORITY_PREFIX)}


def test_majority_class_baseline_next_to_the_metrics():
  """The task reports `glue_tasks.majority_class_metrics` beside the
  metrics."""
  task = _task("mrpc")
  step = {"sentence_prediction": (tf.constant([[1., 0], [0, 1], [0, 1]]),),
          "labels": (tf.constant([0, 0, 1]),)}
  result = task.reduce_aggregated_logs(task.aggregate_logs(None, step))
  assert result == pytest.approx({
      "accuracy": 2 / 3, "f1": 2 / 3, "majority_class_accuracy": 2 / 3,
      "majority_class_f1": 0.0})


def test_reduce_reports_mnli_matched_and_mismatched():
  task = _task("mnli", validation_data={"input_path": "m,mm"})
  # Two eval steps; split 0 = matched (2 of 3 right), 1 = mismatched (1/2).
  steps = [
      {"sentence_prediction": (tf.constant([[0., 5, 0], [9, 0, 0]]),),
       "labels": (tf.constant([1, 0]),), sp.SPLIT_ID: (tf.constant([0, 0]),)},
      {"sentence_prediction": (tf.constant([[0., 0, 1], [0, 0, 2],
                                            [3, 0, 0]]),),
       "labels": (tf.constant([1, 2, 0]),),
       sp.SPLIT_ID: (tf.constant([0, 1, 1]),)},
  ]
  state = None
  for step in steps:
    state = task.aggregate_logs(state, step)
  assert task.reduce_aggregated_logs(state) == pytest.approx(
      {"accuracy_matched": 2 / 3, "accuracy_mismatched": 1.0,
       # Matched labels 1, 0, 1; mismatched 2, 0 (a tie: the lower label).
       "majority_class_accuracy_matched": 2 / 3,
       "majority_class_accuracy_mismatched": 0.5})


def test_reduce_cola_and_stsb():
  task = _task("cola")
  step = {"sentence_prediction": (tf.constant(
      np.stack([1 - PREDS, PREDS], 1).astype(np.float32)),),
          "labels": (tf.constant(LABELS),)}
  result = task.reduce_aggregated_logs(task.aggregate_logs(None, step))
  assert _model_metrics(result) == pytest.approx(
      {"matthews_corrcoef": sk.matthews_corrcoef(LABELS, PREDS)})
  task = _task("stsb")
  step = {"sentence_prediction": (tf.constant([[0.5], [1.0], [3.0]]),),
          "labels": (tf.constant([0.0, 2.0, 4.0]),)}
  result = task.reduce_aggregated_logs(task.aggregate_logs(None, step))
  assert result == pytest.approx({
      "pearson": stats.pearsonr([0.5, 1, 3], [0, 2, 4])[0],
      "spearman": 1.0})


def test_task_rejects_inconsistent_configs():
  with pytest.raises(ValueError, match="num_classes=2, but stsb needs 1"):
    _task("stsb", model={"num_classes": 2})
  with pytest.raises(ValueError, match=r"label_type='int', but stsb labels"):
    _task("stsb", train_data={"label_type": "int"})
  with pytest.raises(ValueError, match="Unknown GLUE task ''"):
    sp.RealFormerSentencePredictionTask(
        finetuning.realformer_glue().task)
  task = _task("rte")
  with pytest.raises(ValueError, match="still holds the placeholder "
                     "GLUE_DATA_DIR"):
    task.build_inputs(task.task_config.train_data)


def test_init_checkpoint_must_exist(tmp_path):
  """Outside train.py (whose checks name these first, `run_plan`), the
  task still names the key and the path."""
  for path in (str(tmp_path), str(tmp_path / "ckpt-1")):
    task = _task("rte", init_checkpoint=path)
    with pytest.raises(ValueError, match=rf"task.init_checkpoint='{path}': "
                       "cannot read it"):
      task.initialize(model=None)


def _write_records(path, labels, seq_length, first_token):
  with tf.io.TFRecordWriter(path) as writer:
    for i, label in enumerate(labels):
      ids = [first_token + i, 5, 6] + [0] * (seq_length - 3)
      feature = {
          "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(
              value=ids)),
          "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[1, 1, 1] + [0] * (seq_length - 3))),
          "segment_ids": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[0] * seq_length)),
          "label_ids": tf.train.Feature(int64_list=tf.train.Int64List(
              value=[label])),
      }
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def test_named_validation_files_through_the_task(tmp_path):
  seq = 8
  matched, mismatched = str(tmp_path / "m.rec"), str(tmp_path / "mm.rec")
  _write_records(matched, [0, 1, 2, 1, 0], seq, first_token=100)
  _write_records(mismatched, [2, 2, 0], seq, first_token=200)
  task = _task("mnli", model={"encoder": {"any": {
      "vocab_size": 300, "hidden_size": 16, "num_layers": 1,
      "num_attention_heads": 2, "intermediate_size": 32,
      "max_position_embeddings": seq}}},
               train_data={"input_path": matched},
               validation_data={"input_path": f"{matched},{mismatched}",
                                "seq_length": seq, "global_batch_size": 2})
  batches = list(task.build_inputs(task.task_config.validation_data))
  split_ids = np.concatenate([b[sp.SPLIT_ID].numpy() for b in batches])
  first_ids = np.concatenate([b["input_word_ids"][:, 0].numpy()
                              for b in batches])
  # Every example once (odd counts, no remainder dropped), tagged by file.
  assert sorted(first_ids) == [100, 101, 102, 103, 104, 200, 201, 202]
  assert list(split_ids[first_ids < 200]) == [0] * 5
  assert list(split_ids[first_ids >= 200]) == [1] * 3

  model = task.build_model()
  state = None
  for batch in batches:
    logs = task.validation_step(batch, model)
    state = task.aggregate_logs(
        state, {k: (v,) for k, v in logs.items() if k != task.loss})
  result = _model_metrics(task.reduce_aggregated_logs(state))
  preds = np.concatenate([
      np.argmax(model(b, training=False).numpy(), axis=1) for b in batches])
  labels = np.concatenate([b["label_ids"].numpy() for b in batches])
  assert result == pytest.approx({
      "accuracy_matched": sk.accuracy_score(labels[split_ids == 0],
                                            preds[split_ids == 0]),
      "accuracy_mismatched": sk.accuracy_score(labels[split_ids == 1],
                                               preds[split_ids == 1])})

  config = task.task_config.validation_data.replace(input_path=matched)
  with pytest.raises(ValueError, match=r"needs one comma-separated file per "
                     r"name in input_path, got 1"):
    task.build_inputs(config)
  config = task.task_config.validation_data.replace(is_training=True)
  with pytest.raises(ValueError, match="split_names is for evaluation data"):
    task.build_inputs(config)
