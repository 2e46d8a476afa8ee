"""End to end: convert, fine-tune and evaluate with Model Garden's train_lib."""
import json
import os

import pytest
import tensorflow as tf
import tf_keras

from official.core import exp_factory
from official.core import task_factory
from official.core import train_lib
from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from realformer_tf.configs import squad
from realformer_tf.data import squad as squad_data
from tests.helpers import squad as common

SEQ, STRIDE, QUERY = 128, 32, 32


def _run(tmp_path, source, v2, train_steps):
  """Converts `source`, trains `train_steps` and evaluates; returns logs."""
  tf_keras.utils.set_random_seed(1)
  data_dir = str(tmp_path / "data")
  meta = squad_data.convert(
      source, common.vocab_file(), data_dir, is_training=True,
      version_2_with_negative=v2, max_seq_length=SEQ, doc_stride=STRIDE,
      max_query_length=QUERY)
  model_dir = str(tmp_path / "model")
  params = exp_factory.get_exp_config(squad.SQUAD)
  params.override({
      "task": {
          "model": {"encoder": {"any": common.TINY_ENCODER}},
          "train_data": {
              "input_path": os.path.join(data_dir, squad_data.TRAIN_RECORD),
              "global_batch_size": 8, "seq_length": SEQ,
              "version_2_with_negative": v2, "seed": 1},
          "validation_data": {
              "input_path": source, "vocab_file": common.vocab_file(),
              "global_batch_size": 16, "seq_length": SEQ,
              "doc_stride": STRIDE, "query_length": QUERY,
              "version_2_with_negative": v2},
      },
      "trainer": {
          "train_steps": train_steps, "validation_interval": train_steps,
          "steps_per_loop": train_steps, "summary_interval": train_steps,
          "checkpoint_interval": train_steps,
          "optimizer_config": {
              "learning_rate": {"polynomial": {
                  "initial_learning_rate": 1e-3, "decay_steps": train_steps}},
              "warmup": {"polynomial": {"warmup_steps": 1}}},
      }}, is_strict=True)
  params.validate()
  params.lock()
  task = task_factory.get_task(params.task, logging_dir=model_dir)
  _, logs = train_lib.run_experiment(
      distribution_strategy=tf.distribute.get_strategy(), task=task,
      mode="train_and_eval", params=params, model_dir=model_dir,
      run_post_eval=True)
  return meta, model_dir, logs


def _question_ids(dataset):
  return [qa["id"] for a in dataset for p in a["paragraphs"]
          for qa in p["qas"]]


def test_v11_real_dev_slice(tmp_path):
  with open(common.dev_v11_file()) as f:
    articles = json.load(f)["data"]
  # Super_Bowl_50 paragraph 0 (30 questions, 124 words) and Warsaw
  # paragraphs 0-1 (10 questions; 283 words -> several 128-token windows).
  data = [
      {"title": articles[0]["title"],
       "paragraphs": articles[0]["paragraphs"][:1]},
      {"title": articles[1]["title"],
       "paragraphs": articles[1]["paragraphs"][:2]},
  ]
  source = common.write_json({"version": "1.1", "data": data},
                             str(tmp_path / "dev_slice.json"))
  # 300 steps (~12 epochs of the slice's 144 features) on the slice, which is
  # also the eval set: a check that labels, windows and answer projection
  # line up (untrained, EM is 0; seeded runs here reach EM 27.5, F1 31.2).
  meta, model_dir, logs = _run(tmp_path, source, v2=False, train_steps=300)
  assert meta["num_questions"] == 40
  # Dev questions have 3 (often duplicate) answers: trained on the first.
  assert meta["num_multiple_answers_first_used"] == 40
  assert meta["train_data_size"] > 40  # long contexts give several windows

  assert set(logs) >= {"exact_match", "f1"}
  assert 15.0 <= logs["exact_match"] <= 100.0
  assert 15.0 <= logs["f1"] <= 100.0
  assert logs["f1"] >= logs["exact_match"]
  with open(os.path.join(model_dir, squad_data.PREDICTIONS_FILE)) as f:
    predictions = json.load(f)
  assert sorted(predictions) == sorted(_question_ids(data))
  assert all(isinstance(v, str) and v for v in predictions.values())
  # Each answer is a span of its own context.
  contexts = {qa["id"]: p["context"] for a in data for p in a["paragraphs"]
              for qa in p["qas"]}
  assert all(v in contexts[k] for k, v in predictions.items())
  official = squad_evaluate_v1_1.evaluate(data, predictions)
  assert logs["exact_match"] == pytest.approx(100 * official["exact_match"])
  assert logs["f1"] == pytest.approx(100 * official["final_f1"])
  assert not os.path.exists(os.path.join(model_dir, squad_data.NULL_ODDS_FILE))


def test_v20_handmade_with_unanswerable_questions(tmp_path):
  dataset = common.v2_dataset()
  source = common.write_json(dataset, str(tmp_path / "v2.json"))
  meta, model_dir, logs = _run(tmp_path, source, v2=True, train_steps=3)
  assert meta["num_unanswerable"] == 3
  for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact",
              "NoAns_f1", "best_exact", "best_f1"):
    assert 0.0 <= logs[key] <= 100.0, key
  assert "best_exact_thresh" in logs and "best_f1_thresh" in logs
  with open(os.path.join(model_dir, squad_data.PREDICTIONS_FILE)) as f:
    predictions = json.load(f)
  with open(os.path.join(model_dir, squad_data.NULL_ODDS_FILE)) as f:
    null_odds = json.load(f)
  ids = sorted(_question_ids(dataset["data"]))
  assert sorted(predictions) == sorted(null_odds) == ids
  assert all(isinstance(v, str) for v in predictions.values())
  # Written with null_score_diff_threshold 0: "" exactly when odds > 0.
  assert all((predictions[q] == "") == (null_odds[q] > 0.0) for q in ids)
  assert (logs["total"], logs["HasAns_total"], logs["NoAns_total"]) == (
      len(ids), len(ids) - 3, 3)
  official = squad_evaluate_v2_0.evaluate(dataset["data"], predictions,
                                          null_odds)
  assert logs["exact"] == pytest.approx(official["exact"])
  assert logs["f1"] == pytest.approx(official["f1"])
  assert logs["best_f1"] == pytest.approx(official["final_f1"])
  assert logs["best_f1_thresh"] == pytest.approx(official["final_f1_thresh"])
