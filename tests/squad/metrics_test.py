"""Official SQuAD EM/F1 (via Model Garden's evaluators) on hand-computed cases."""
import pytest

from realformer_tf.configs import squad


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
  metrics = squad.squad_metrics(dataset, predictions)
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
  metrics = squad.squad_metrics(dataset, predictions, null_odds,
                                version_2_with_negative=True)
  # Per question (exact, f1): a1 (1, 1); a2 (0, 0): "" for an answerable
  # question; a3 (0, 2/3): "panthers" vs "carolina panthers"; n1 (1, 1) and
  # n3 (1, 1): "" is right; n2 (0, 0).
  assert metrics["exact"] == pytest.approx(100.0 * 3 / 6)
  assert metrics["f1"] == pytest.approx(100.0 * (1 + 2 / 3 + 1 + 1) / 6)
  assert metrics["HasAns_exact"] == pytest.approx(100.0 / 3)
  assert metrics["HasAns_f1"] == pytest.approx(100.0 * (1 + 2 / 3) / 3)
  assert metrics["NoAns_exact"] == pytest.approx(200.0 / 3)
  assert metrics["NoAns_f1"] == pytest.approx(200.0 / 3)
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
  metrics = squad.squad_metrics(dataset, predictions,
                                version_2_with_negative=True)
  assert "best_f1" not in metrics
  assert metrics["exact"] == pytest.approx(50.0)


def test_v20_all_answered_thresholds_recover_no_answers():
  # Every question answered (null_score_diff_threshold = +inf): the best
  # threshold turns exactly the high-odds answers into "".
  dataset = _dataset([("a", ["Paris"]), ("n", [])])
  predictions = {"a": "Paris", "n": "Lyon"}
  metrics = squad.squad_metrics(dataset, predictions, {"a": -1.0, "n": 0.7},
                                version_2_with_negative=True)
  assert metrics["exact"] == pytest.approx(50.0)
  assert metrics["best_exact"] == pytest.approx(100.0)
  assert metrics["best_exact_thresh"] == -1.0
