"""SQuAD metrics on hand-computed cases; predictions == Model Garden's."""
import json
import os
import re

import numpy as np
import pytest

from official.core import exp_factory
from official.nlp.data import squad_lib
from official.nlp.tasks import question_answering as mg_question_answering
from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from official.nlp.tools import tokenization
from realformer_tf.configs import squad
from realformer_tf.data import squad as squad_data
from realformer_tf.tasks import question_answering
from tests.helpers import file_trees
from tests.helpers import squad as common


def _dataset(qas):
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": [
      {"id": qid, "question": "?", "answers": [
          {"text": t, "answer_start": 0} for t in golds]}
      for qid, golds in qas]}]}]


def test_v11_normalisation_and_max_over_gold_answers():
  dataset = _dataset([
      ("q1", ["Denver Broncos", "the Denver Broncos", "Broncos"]),
      ("q2", ["Levi's Stadium"]),
      ("q3", ["Carolina Panthers", "Panthers"]),
      ("q4", ["Santa Clara, California"]),
      ("q5", ["an apple"]),
      ("q6", ["missing"]),
  ])
  predictions = {
      "q1": "The Denver Broncos!",  # article + punctuation removed: EM 1
      "q2": "levis stadium",        # apostrophe removed, lower-cased: EM 1
      "q3": "the Carolina team",    # F1 0.5 vs gold 1, 0 vs gold 2: max 0.5
      "q4": "in Santa Clara",       # 2 of 3 tokens each way: F1 2/3
      "q5": "Apple.",               # "an" is an article: EM 1
      # q6 unanswered: scores 0 (and counts in the total).
  }
  metrics = question_answering.squad_metrics(dataset, predictions)
  assert set(metrics) == {"exact_match", "f1"}
  assert metrics["exact_match"] == pytest.approx(100.0 * 3 / 6)
  assert metrics["f1"] == pytest.approx(100.0 * (1 + 1 + 0.5 + 2 / 3 + 1) / 6)


def _v2_case():
  dataset = _dataset([
      ("a1", ["Denver Broncos"]),
      ("a2", ["Levi's Stadium", "Levi's Stadium in Santa Clara"]),
      ("a3", ["Carolina Panthers"]),
      ("n1", []),
      ("n2", []),
      ("n3", []),
  ])
  # Written with null_score_diff_threshold 0: "" iff null odds > 0.
  predictions = {"a1": "Denver Broncos", "a2": "", "a3": "the Panthers",
                 "n1": "", "n2": "Normandy", "n3": ""}
  null_odds = {"a1": -3.0, "a3": -2.0, "n2": -1.0, "a2": 0.5, "n3": 0.8,
               "n1": 2.0}
  return dataset, predictions, null_odds


def test_v20_no_answer_scoring_and_best_threshold():
  dataset, predictions, null_odds = _v2_case()
  metrics = question_answering.squad_metrics(
      dataset, predictions, null_odds, version_2_with_negative=True)
  # Per question (exact, f1): a1 (1, 1); a2 (0, 0): "" for an answerable
  # question; a3 (0, 2/3): "panthers" vs "carolina panthers"; n1 (1, 1) and
  # n3 (1, 1): "" is right; n2 (0, 0).
  assert metrics["exact"] == pytest.approx(100.0 * 3 / 6)
  assert metrics["f1"] == pytest.approx(100.0 * (1 + 2 / 3 + 1 + 1) / 6)
  assert metrics["HasAns_exact"] == pytest.approx(100.0 / 3)
  assert metrics["HasAns_f1"] == pytest.approx(100.0 * (1 + 2 / 3) / 3)
  assert metrics["NoAns_exact"] == pytest.approx(200.0 / 3)
  assert metrics["NoAns_f1"] == pytest.approx(200.0 / 3)
  # The counts evaluate-v2.0.py prints, as ints.
  golds = [qa["answers"] for qa in dataset[0]["paragraphs"][0]["qas"]]
  totals = {"total": len(golds), "HasAns_total": sum(map(bool, golds)),
            "NoAns_total": sum(not g for g in golds)}
  assert totals == {"total": 6, "HasAns_total": 3, "NoAns_total": 3}
  assert {k: metrics[k] for k in totals} == totals
  assert all(type(metrics[k]) is int for k in totals)  # pylint: disable=unidiomatic-typecheck
  # Best threshold: start with every question predicted "" (3 no-answer
  # questions right), then answer them in increasing null odds:
  # a1 (+1 -> 4 at -3), a3 (+0 EM / +2/3 F1 at -2), n2 (-1 at -1), a2 (+0),
  # n3 (+0), n1 (+0).
  assert metrics["best_exact"] == pytest.approx(100.0 * 4 / 6)
  assert metrics["best_exact_thresh"] == -3.0
  assert metrics["best_f1"] == pytest.approx(100.0 * (4 + 2 / 3) / 6)
  assert metrics["best_f1_thresh"] == -2.0


def test_v20_without_null_odds_has_no_best_threshold():
  dataset, predictions, _ = _v2_case()
  metrics = question_answering.squad_metrics(
      dataset, predictions, version_2_with_negative=True)
  assert "best_f1" not in metrics
  assert metrics["exact"] == pytest.approx(50.0)


def test_v20_all_answered_thresholds_recover_no_answers():
  # Every question answered (null_score_diff_threshold = +inf): the best
  # threshold turns exactly the high-odds answers into "".
  dataset = _dataset([("a", ["Paris"]), ("n", [])])
  predictions = {"a": "Paris", "n": "Lyon"}
  metrics = question_answering.squad_metrics(
      dataset, predictions, {"a": -1.0, "n": 0.7},
      version_2_with_negative=True)
  assert metrics["exact"] == pytest.approx(50.0)
  assert metrics["best_exact"] == pytest.approx(100.0)
  assert metrics["best_exact_thresh"] == -1.0


def _vocab_for(dataset, path: str) -> str:
  """A WordPiece vocabulary covering `dataset`, long words split in two."""
  basic = tokenization.BasicTokenizer(do_lower_case=True)
  words = {w for article in dataset["data"] for p in article["paragraphs"]
           for text in [p["context"]] + [qa["question"] for qa in p["qas"]]
           for w in basic.tokenize(text)}
  pieces = set()
  for word in words:
    pieces.update([word[:4], "##" + word[4:]] if len(word) > 6 else [word])
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                      sorted(pieces)) + "\n")
  return path


def _source(tmp_path, name):
  """(SQuAD file, vocab, v2): handmade v2.0 data, or a real dev v1.1 slice."""
  if name == "handmade_v2.0":
    dataset = common.v2_dataset()
    return (common.write_json(dataset, str(tmp_path / "v2.json")),
            _vocab_for(dataset, str(tmp_path / "vocab.txt")), True)
  with open(common.dev_v11_file()) as f:
    articles = json.load(f)["data"]
  # Super_Bowl_50 paragraph 0 and Warsaw paragraph 1 (283 words: several
  # 64-token windows).
  dataset = {"version": "1.1", "data": [
      {"title": articles[0]["title"],
       "paragraphs": articles[0]["paragraphs"][:1]},
      {"title": articles[1]["title"],
       "paragraphs": articles[1]["paragraphs"][1:2]}]}
  return (common.write_json(dataset, str(tmp_path / "dev_slice.json")),
          common.vocab_file(), False)


@pytest.mark.parametrize("name", ["handmade_v2.0", "shared_dev_v1.1"])
def test_predictions_equal_squad_lib_and_official_evaluators(tmp_path, name):
  """Ours == Model Garden's FullTokenizer features, postprocess, evaluator."""
  path, vocab, v2 = _source(tmp_path, name)
  seq, stride, query = 64, 32, 16
  config = exp_factory.get_exp_config(squad.SQUAD).task
  config.override({
      "predictions_dir": str(tmp_path / "predictions"),
      "validation_data": {
          "input_path": path, "vocab_file": vocab, "seq_length": seq,
          "doc_stride": stride, "query_length": query,
          "global_batch_size": 4, "version_2_with_negative": v2}},
                  is_strict=True)
  task = question_answering.RealFormerQATask(
      config, logging_dir=str(tmp_path / "model"))

  examples = squad_lib.read_squad_examples(path, False, v2)
  features = []

  def _append(feature, is_padding=False):
    if not is_padding:
      features.append(feature)

  squad_lib.convert_examples_to_features(
      examples, tokenization.FullTokenizer(vocab, do_lower_case=True), seq,
      stride, query, False, _append, batch_size=1)
  assert len(features) >= len(examples) > 0
  ours = task._eval_features  # pylint: disable=protected-access
  assert [(f.unique_id, f.input_ids, f.tokens) for f in ours] == [
      (f.unique_id, f.input_ids, f.tokens) for f in features]

  rng = np.random.default_rng(0)
  logits = rng.normal(size=(len(features), 2, seq)).astype(np.float32)
  logits[::2, :, 0] += 3.0  # [CLS]: "" for some v2.0 questions.
  results = [mg_question_answering.RawAggregatedResult(
      unique_id=np.int32(f.unique_id), start_logits=start, end_logits=end)
             for f, (start, end) in zip(features, logits)]
  metrics = task.reduce_aggregated_logs(results)
  expected, _, null_odds = squad_lib.postprocess_output(
      examples, features, results, config.n_best_size,
      config.max_answer_length, True, version_2_with_negative=v2)
  with open(tmp_path / "predictions" / squad_data.PREDICTIONS_FILE) as f:
    assert json.load(f) == expected
  with open(path) as f:
    dataset = json.load(f)["data"]
  if v2:
    assert "" in expected.values() and any(expected.values())
    with open(tmp_path / "predictions" / squad_data.NULL_ODDS_FILE) as f:
      assert json.load(f) == pytest.approx(null_odds)
    official = squad_evaluate_v2_0.evaluate(dataset, expected, null_odds)
    for key in ("exact", "f1", "HasAns_f1", "NoAns_f1"):
      assert metrics[key] == pytest.approx(official[key])
    assert metrics["best_f1"] == pytest.approx(official["final_f1"])
  else:
    official = squad_evaluate_v1_1.evaluate(dataset, expected)
    assert metrics == pytest.approx({
        "exact_match": 100 * official["exact_match"],
        "f1": 100 * official["final_f1"]})
  # One set with our manifest: replaced while it is ours, else refused.
  out = tmp_path / "predictions"
  assert task.reduce_aggregated_logs(results, global_step=7) == metrics
  manifest = json.loads((out / question_answering.EVAL_MANIFEST).read_text())
  assert (manifest["step"], manifest["metrics"]) == (7, metrics)
  names = [squad_data.PREDICTIONS_FILE] + ([squad_data.NULL_ODDS_FILE]
                                           if v2 else [])
  assert sorted(manifest["files"]) == sorted(names)
  os.remove(out / question_answering.EVAL_MANIFEST)
  before = file_trees.files_under(out)
  with pytest.raises(FileExistsError, match=re.escape(
      ", ".join(str(out / name) for name in names) + (
          " exist" if v2 else " exists") + " and no manifest of "
      "realformer_tf lists")):
    task.reduce_aggregated_logs(results)
  assert file_trees.files_under(out) == before
