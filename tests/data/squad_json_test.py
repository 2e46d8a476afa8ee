"""SQuAD JSON reading and checks (realformer_tf.data.squad_json)."""
import logging

import pytest

from official.nlp.data import squad_lib
from realformer_tf.data import squad_json
from tests.helpers import squad as common


def test_eval_reader_matches_squad_lib_on_dev():
  path = common.dev_v11_file()
  examples, stats = squad_json.read_squad_examples(
      path, is_training=False, version_2_with_negative=False)
  reference = squad_lib.read_squad_examples(path, is_training=False,
                                            version_2_with_negative=False)
  assert stats.num_questions == len(examples) == len(reference) == 10570
  assert [(e.qas_id, e.question_text, e.doc_tokens) for e in examples] == [
      (e.qas_id, e.question_text, e.doc_tokens) for e in reference]


def test_training_skips_answers_not_in_context(tmp_path, caplog):
  context = "Denver Broncos won Super Bowl 50 in 2016."
  path = common.write_json(common.one_paragraph([
      {"id": "good", "question": "Who won?",
       "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
      {"id": "moved", "question": "When?",  # text is not at answer_start
       "answers": [{"text": "2016", "answer_start": 3}]},
      {"id": "outside", "question": "Where?",  # runs past the context
       "answers": [{"text": "Santa Clara", "answer_start": len(context) - 2}]},
      {"id": "several", "question": "Which game?", "answers": [
          {"text": "Super Bowl 50", "answer_start": 19},
          {"text": "Super Bowl", "answer_start": 19}]},
  ], context), str(tmp_path / "train.json"))
  with caplog.at_level(logging.WARNING):
    examples, stats = squad_json.read_squad_examples(
        path, is_training=True, version_2_with_negative=False)
  assert [e.qas_id for e in examples] == ["good", "several"]
  assert stats.num_questions == 4
  assert stats.num_answer_not_found == 2
  assert stats.num_multiple_answers == 1
  assert "moved" in caplog.text and "outside" in caplog.text
  # squad_lib's positions: whitespace-word indices of the first answer.
  assert (examples[1].start_position, examples[1].end_position) == (3, 5)
  # Evaluation keeps every question (the evaluator scores answer texts).
  examples, _ = squad_json.read_squad_examples(
      path, is_training=False, version_2_with_negative=False)
  assert len(examples) == 4


@pytest.mark.parametrize("qas,is_training,v2,needle", [
    ([{"question": "?", "answers": []}], False, False, "has no 'id'"),
    ([{"id": "a", "question": "?", "answers": [{"text": "x",
                                                  "answer_start": 0}]},
      {"id": "a", "question": "?", "answers": [{"text": "x",
                                                  "answer_start": 0}]}],
     False, False, "'a': the id is used twice"),
    ([{"id": "q9", "question": "?", "answers": []}], False, False,
     "'q9': has no gold answers"),
    ([{"id": "q9", "question": "?", "answers": []}], True, False,
     "'q9': is answerable but has no answers"),
    ([{"id": "q9", "question": "?", "answers": []}], True, True,
     "'q9': has no 'is_impossible'"),
    ([{"id": "q9", "question": 3, "answers": []}], False, True,
     "'q9': has no 'question' string"),
    ([{"id": "q9", "question": "?",
       "answers": [{"text": "x", "answer_start": "0"}]}], True, False,
     "'q9': the answer has no integer 'answer_start'"),
])
def test_malformed_input_names_file_and_question(tmp_path, qas, is_training,
                                                 v2, needle):
  path = common.write_json(common.one_paragraph(qas),
                           str(tmp_path / "bad.json"))
  with pytest.raises(ValueError) as e:
    squad_json.read_squad_examples(path, is_training=is_training,
                                   version_2_with_negative=v2)
  assert path in str(e.value) and needle in str(e.value)


def test_missing_file_and_not_squad(tmp_path):
  with pytest.raises(ValueError, match="does not exist"):
    squad_json.read_squad_examples(str(tmp_path / "none.json"), False, False)
  with pytest.raises(ValueError, match="no top-level 'data' list"):
    squad_json.read_squad_examples(common.write_json({"x": 1}, str(
        tmp_path / "x.json")), False, False)
