"""Reading and checking SQuAD v1.1 / v2.0 JSON into examples, for both faces
and without TensorFlow: `squad_lib.read_squad_examples`' examples (the same
fields, whitespace words and positions), which `squad_lib` reads as its own.

Malformed input raises `ValueError` naming the file and question id; an
answer not at its `answer_start` is a counted, logged training skip.
"""

import dataclasses
import json
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import logging

from realformer_tf.core import writes

# squad_lib's `is_whitespace`.
_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass
class SquadExample:
  """One question: squad_lib's `SquadExample` fields; `doc_tokens` is shared
  by a paragraph's questions; `answers`: every gold answer text."""
  qas_id: str
  question_text: str
  doc_tokens: List[str]
  orig_answer_text: Optional[str] = None
  start_position: Optional[int] = None
  end_position: Optional[int] = None
  is_impossible: bool = False
  answers: Sequence[str] = ()


@dataclasses.dataclass
class ReadStats:
  """What `read_squad_examples` kept and skipped."""
  num_questions: int = 0
  num_examples: int = 0
  num_impossible: int = 0
  num_answer_not_found: int = 0
  num_multiple_answers: int = 0


def load_squad_json(input_file: str, ops: writes.FileOps = writes.OS_OPS
                    ) -> List[Dict[str, Any]]:
  """The `data` list of a SQuAD JSON file, with a clear error if malformed;
  `ops`: the face's files (gfile reads gs://)."""
  text = ops.read(input_file) if input_file and ops.exists(input_file) else None
  if text is None:
    raise ValueError(f"SQuAD file {input_file!r} does not exist (or is not "
                     "UTF-8 text).")
  try:
    dataset = json.loads(text)
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
  return qa


def whitespace_words(context: str) -> Tuple[List[str], List[int]]:
  """squad_lib's words of `context` and each character's word index."""
  words, char_to_word, after_space = [], [], True
  for c in context:
    if c in _WHITESPACE:
      after_space = True
    else:
      if after_space:
        words.append(c)
      else:
        words[-1] += c
      after_space = False
    char_to_word.append(len(words) - 1)
  return words, char_to_word


def _example(qa: Dict[str, Any], words: List[str], char_to_word: List[int],
             is_training: bool, version_2_with_negative: bool
             ) -> Optional[SquadExample]:
  """squad_lib's example of a checked `qa`; None where squad_lib skips it
  (its first answer's words do not contain the answer text)."""
  example = SquadExample(qa["id"], qa["question"], words, answers=[
      a["text"] for a in qa["answers"]])
  if not is_training:
    return example
  if version_2_with_negative and qa["is_impossible"]:
    example.is_impossible, example.orig_answer_text = True, ""
    example.start_position = example.end_position = -1
    return example
  text, start = qa["answers"][0]["text"], qa["answers"][0]["answer_start"]
  first, last = char_to_word[start], char_to_word[start + len(text) - 1]
  if " ".join(words[first:last + 1]).find(" ".join(text.split())) == -1:
    return None
  example.orig_answer_text = text
  example.start_position, example.end_position = first, last
  return example


def read_squad_examples(
    input_file: str, is_training: bool, version_2_with_negative: bool,
    ops: writes.FileOps = writes.OS_OPS
) -> Tuple[List[SquadExample], ReadStats]:
  """(examples, `ReadStats`) as `squad_lib.read_squad_examples` reads them,
  behind the checks of the module docstring (a ValueError names the file and
  question); `is_training`: answer positions are needed."""
  def failing(where: str) -> Callable[[str], None]:
    def fail(message: str):
      raise ValueError(f"SQuAD file {input_file!r}, {where}: {message}")
    return fail

  stats, seen_ids, examples, not_found = ReadStats(), {}, [], []
  for a, article in enumerate(load_squad_json(input_file, ops)):
    for p, paragraph in enumerate(
        _get(article, "paragraphs", list, failing(f"article {a}"))):
      where = f"article {a} paragraph {p}"
      context = _get(paragraph, "context", str, failing(where))
      words, char_to_word = whitespace_words(context)
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
          example = _example(qa, words, char_to_word, is_training,
                             version_2_with_negative)
          if example is None:
            not_found.append(qas_id)
          else:
            examples.append(example)
  if not_found:
    logging.warning("Skipped %d training questions of %s whose answer text is "
                    "not at its answer_start: %s", len(not_found), input_file,
                    ", ".join(not_found))
  stats.num_answer_not_found += len(not_found)
  stats.num_examples = len(examples)
  logging.info("Read %s: %s.", input_file, stats)
  return examples, stats
