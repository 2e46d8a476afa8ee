"""Reading and checking SQuAD v1.1 / v2.0 JSON into `squad_lib` examples.

Malformed input raises `ValueError` naming the file and question id; an
answer not at its `answer_start` is a counted, logged training skip.
"""

import dataclasses
import json
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import tensorflow as tf

from official.nlp.data import squad_lib


@dataclasses.dataclass
class ReadStats:
  """What `read_squad_examples` kept and skipped."""
  num_questions: int = 0
  num_examples: int = 0
  num_impossible: int = 0
  num_answer_not_found: int = 0
  num_multiple_answers: int = 0


def load_squad_json(input_file: str) -> List[Dict[str, Any]]:
  """The `data` list of a SQuAD JSON file, with a clear error if malformed."""
  if not input_file or not tf.io.gfile.exists(input_file):
    raise ValueError(f"SQuAD file {input_file!r} does not exist.")
  with tf.io.gfile.GFile(input_file, "r") as f:
    try:
      dataset = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"SQuAD file {input_file!r} is not JSON: {e}.") from e
  if not isinstance(dataset, dict) or not isinstance(dataset.get("data"),
                                                     list):
    raise ValueError(f"SQuAD file {input_file!r} has no top-level 'data' "
                     "list (is it a SQuAD v1.1/v2.0 JSON file?).")
  return dataset["data"]


def _get(obj: Any, key: str, kind: type, fail: Callable[[str], None]) -> Any:
  """`obj[key]` if `obj` is an object and that is a `kind`, else `fail`s."""
  value = obj.get(key) if isinstance(obj, dict) else None
  if not isinstance(value, kind) or kind is str and key == "id" and not value:
    fail(f"has no {key!r} {'list' if kind is list else 'string'}.")
  return value


def _checked_question(qa: Dict[str, Any], context: str, is_training: bool,
                      version_2_with_negative: bool, stats: ReadStats,
                      fail: Callable[[str], None]) -> Optional[Dict[str, Any]]:
  """`qa` as squad_lib may read it, or None for a training skip."""
  _get(qa, "question", str, fail)
  answers = _get(qa, "answers", list, fail)
  for answer in answers:
    _get(answer, "text", str, lambda _: fail(
        "has an answer without a 'text' string."))
  is_impossible = qa.get("is_impossible", False)
  if version_2_with_negative and not isinstance(is_impossible, bool):
    fail("'is_impossible' is not true/false.")
  if version_2_with_negative and is_training and "is_impossible" not in qa:
    fail("has no 'is_impossible' (needed to train on SQuAD v2.0 data).")
  stats.num_questions += 1
  if not is_training or version_2_with_negative and is_impossible:
    if not answers and not version_2_with_negative:
      fail("has no gold answers; the SQuAD v1.1 evaluation needs at least one "
           "(for v2.0 data with unanswerable questions set "
           "version_2_with_negative).")
    stats.num_impossible += int(bool(is_impossible) or not answers)
    return qa
  if not answers:
    fail("is answerable but has no answers" + (
        " (for v2.0 data with unanswerable questions pass "
        "--version_2_with_negative)." if not version_2_with_negative
        else " and is_impossible is false."))
  stats.num_multiple_answers += int(len(answers) > 1)
  text, start = answers[0]["text"], answers[0].get("answer_start")
  if isinstance(start, bool) or not isinstance(start, int):
    fail("the answer has no integer 'answer_start'.")
  if not text.strip():
    fail("the answer text is empty.")
  if start < 0 or start + len(text) > len(context):
    logging.warning("Skipping question %s: answer_start %d + answer %r runs "
                    "outside its context (%d characters).", qa["id"], start,
                    text, len(context))
    stats.num_answer_not_found += 1
    return None
  return dict(qa, answers=answers[:1])


def _check_squad_data(input_file: str, is_training: bool,
                      version_2_with_negative: bool,
                      stats: ReadStats) -> List[Dict[str, Any]]:
  """The `data` list of `input_file`, its `qas` reduced to what squad_lib
  may read."""
  def failing(where: str) -> Callable[[str], None]:
    def fail(message: str):
      raise ValueError(f"SQuAD file {input_file!r}, {where}: {message}")
    return fail

  seen_ids = {}
  data = load_squad_json(input_file)
  for a, article in enumerate(data):
    for p, paragraph in enumerate(
        _get(article, "paragraphs", list, failing(f"article {a}"))):
      where = f"article {a} paragraph {p}"
      context = _get(paragraph, "context", str, failing(where))
      kept = []
      for q, qa in enumerate(_get(paragraph, "qas", list, failing(where))):
        qas_id = _get(qa, "id", str, failing(f"{where} question {q}"))
        fail = failing(f"question id {qas_id!r}")
        if qas_id in seen_ids:
          fail(f"the id is used twice ({seen_ids[qas_id]} and {where} "
               f"question {q}).")
        seen_ids[qas_id] = f"{where} question {q}"
        qa = _checked_question(qa, context, is_training,
                               version_2_with_negative, stats, fail)
        if qa is not None:
          kept.append(qa)
      paragraph["qas"] = kept
  return data


def read_squad_examples(
    input_file: str,
    is_training: bool,
    version_2_with_negative: bool) -> Tuple[List[squad_lib.SquadExample],
                                            ReadStats]:
  """(examples, `ReadStats`) of `squad_lib.read_squad_examples` behind the
  checks of the module docstring (a ValueError names the file and question);
  `is_training`: answer positions are needed."""
  stats = ReadStats()
  data = _check_squad_data(input_file, is_training, version_2_with_negative,
                           stats)
  # squad_lib reads a file only.
  with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
    json.dump({"data": data}, f)
    f.flush()
    examples = squad_lib.read_squad_examples(
        f.name, is_training, version_2_with_negative)
  kept_ids = {example.qas_id for example in examples}
  # squad_lib's own skips (answer text not at answer_start) name no question.
  not_found = [qa["id"] for article in data for paragraph in
               article["paragraphs"] for qa in paragraph["qas"]
               if qa["id"] not in kept_ids]
  if not_found:
    logging.warning("Skipped %d training questions of %s whose answer text is "
                    "not at its answer_start: %s", len(not_found), input_file,
                    ", ".join(not_found))
  stats.num_answer_not_found += len(not_found)
  stats.num_examples = len(examples)
  logging.info("Read %s: %s.", input_file, stats)
  return examples, stats
