r"""SQuAD v1.1 / v2.0 data for Model Garden's `QuestionAnsweringTask`.

Converts a SQuAD JSON file into the TFRecords that Model Garden's
`QuestionAnsweringDataLoader` reads, tokenizing with tensorflow-text only:

  python -m realformer_tf.data.squad \
      --input_json=train-v2.0.json \
      --vocab_file=vocab.txt \
      --output_dir=/tmp/squad_v2 \
      --version_2_with_negative \
      --max_seq_length=384 --doc_stride=128 --max_query_length=64 \
      --is_training --epochs=2 --train_batch_size=48

Training (`--is_training`) writes `train.tf_record` (input_ids, input_mask,
segment_ids, start_positions, end_positions, is_impossible),
`train_meta_data.json` (counts) and, with `--epochs` and
`--train_batch_size`, `train_schedule.yaml`: a `--config_file` that sets
`trainer.train_steps` (and the matching warm-up and decay) from the exact
number of features. Evaluation (no `--is_training`) writes `eval.tf_record`
(unique_ids, input_ids, input_mask, segment_ids, padded to whole batches of
`--eval_batch_size`) and `eval_meta_data.json`; it is byte-identical to the
file the `realformer/squad` task writes when it starts, which is what its
evaluation reads: the task's eval needs the raw JSON (`validation_data.
input_path`, for the gold answers and the features' token maps) and the vocab.

Feature building (doc stride, max query length, token-to-original maps, the
`_improve_answer_span` heuristic, max-context flags) is Model Garden's
`squad_lib.convert_examples_to_features`, unchanged; it receives
`SquadTokenizer`, an adapter backed by tensorflow-text instead of
`FullTokenizer`. Post-processing (`postprocess_output`) follows
`squad_lib.postprocess_output` but projects answers back onto the original
text with the tensorflow-text basic tokenizer, the one that produced the
WordPieces (Model Garden's uses its hand-written `BasicTokenizer`).

Bad input, following the official tools:
  * An answer whose text is not at its `answer_start` in the context is a
    counted, logged skip in training, as in BERT's / Model Garden's
    `read_squad_examples` ("Could not find answer"); the count is in
    `train_meta_data.json`. Evaluation never uses `answer_start`; the
    official evaluators score against the answer texts.
  * Malformed input (missing or mistyped fields, duplicate question ids, an
    answerable training question without answers, a v1.1 evaluation question
    without gold answers, a v2.0 training question without `is_impossible`)
    raises `ValueError` naming the file and the question id.
  * A training question with several answers (dev files) trains on the first;
    the official training files have exactly one.
"""

import collections
import copy
import dataclasses
import json
import math
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer as tf_text_bert

from official.nlp.data import squad_lib
from realformer_tf.data import tokenization

TRAIN_RECORD = "train.tf_record"
EVAL_RECORD = "eval.tf_record"
TRAIN_META = "train_meta_data.json"
EVAL_META = "eval_meta_data.json"
TRAIN_SCHEDULE = "train_schedule.yaml"
PREDICTIONS_FILE = "predictions.json"
NULL_ODDS_FILE = "null_odds.json"

# Strings handed to tensorflow-text at once when filling the caches.
_TOKENIZE_BATCH = 4096
# BERT's fine-tuning warm-up: the first 10% of the steps.
WARMUP_PROPORTION = 0.1


class SquadTokenizer:
  """tensorflow-text WordPiece behind the interface `squad_lib` calls.

  `squad_lib.convert_examples_to_features` was written for Model Garden's
  `FullTokenizer` and calls `tokenize(text) -> list[str]` (for the question,
  each whitespace-separated context word and the answer text) and
  `convert_tokens_to_ids(tokens)`. This adapter answers both with
  `realformer_tf.data.tokenization.make_tokenizer` (a
  `tensorflow_text.BertTokenizer`: basic splitting, lower-casing and accent
  stripping, greedy longest-match WordPiece), mapping its ids back to vocab
  strings. `basic_tokenize` is the same tensorflow-text basic tokenizer on its
  own, for aligning predicted WordPieces with the original text.

  One tensorflow-text call per string would be slow (squad_lib re-tokenizes a
  paragraph's words for every question), so results are cached per string and
  `prime`/`prime_basic` fill the cache in large batches.
  """

  def __init__(self, vocab_file: str, do_lower_case: bool = True):
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.vocab = tokenization.load_vocab(vocab_file)
    self._token_to_id = {t: i for i, t in enumerate(self.vocab)}
    self._unk_id = self._token_to_id[tokenization.UNK]
    self._wordpiece = tokenization.make_tokenizer(
        vocab_file, lower_case=do_lower_case)
    # The class BertTokenizer builds internally, with the same settings as
    # `make_tokenizer` (lower-casing and accent stripping iff do_lower_case).
    self._basic = tf_text_bert.BasicTokenizer(lower_case=do_lower_case)
    self._wordpiece_cache: Dict[str, List[str]] = {}
    self._basic_cache: Dict[str, List[str]] = {}

  def _fill(self, texts: Iterable[str], cache: Dict[str, List[str]],
            run: Callable[[tf.Tensor], List[List[str]]]) -> None:
    missing = sorted({t for t in texts if t not in cache})
    for begin in range(0, len(missing), _TOKENIZE_BATCH):
      batch = missing[begin:begin + _TOKENIZE_BATCH]
      for text, tokens in zip(batch, run(tf.constant(batch, dtype=tf.string))):
        cache[text] = tokens

  def _run_wordpiece(self, texts: tf.Tensor) -> List[List[str]]:
    ids = self._wordpiece.tokenize(texts).merge_dims(-2, -1).to_list()
    return [[self.vocab[i] for i in row] for row in ids]

  def _run_basic(self, texts: tf.Tensor) -> List[List[str]]:
    return [[w.decode("utf-8") for w in row]
            for row in self._basic.tokenize(texts).to_list()]

  def prime(self, texts: Iterable[str]) -> None:
    """Tokenizes `texts` into WordPieces in batches and caches the results."""
    self._fill(texts, self._wordpiece_cache, self._run_wordpiece)

  def prime_basic(self, texts: Iterable[str]) -> None:
    """Basic-tokenizes `texts` in batches and caches the results."""
    self._fill(texts, self._basic_cache, self._run_basic)

  def tokenize(self, text: str) -> List[str]:
    """WordPiece strings of `text` (what `FullTokenizer.tokenize` returns)."""
    if text not in self._wordpiece_cache:
      self.prime([text])
    return list(self._wordpiece_cache[text])

  def basic_tokenize(self, text: str) -> List[str]:
    """Words and punctuation of `text`, lower-cased iff `do_lower_case`."""
    if text not in self._basic_cache:
      self.prime_basic([text])
    return list(self._basic_cache[text])

  def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
    return [self._token_to_id.get(t, self._unk_id) for t in tokens]

  def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
    return [self.vocab[i] for i in ids]


@dataclasses.dataclass
class ReadStats:
  """What `read_squad_examples` kept and skipped."""
  num_questions: int = 0
  num_examples: int = 0
  num_impossible: int = 0
  num_answer_not_found: int = 0
  num_multiple_answers: int = 0


def _is_whitespace(c: str) -> bool:
  # Exactly squad_lib's definition, so doc tokens match Model Garden's.
  return c in (" ", "\t", "\r", "\n") or ord(c) == 0x202F


def _split_doc(paragraph_text: str) -> Tuple[List[str], List[int]]:
  """Whitespace words of the context and each character's word index."""
  doc_tokens = []
  char_to_word_offset = []
  prev_is_whitespace = True
  for c in paragraph_text:
    if _is_whitespace(c):
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def load_squad_json(input_file: str) -> List[Dict[str, Any]]:
  """The `data` list of a SQuAD JSON file, with a clear error if malformed."""
  if not input_file:
    raise ValueError("No SQuAD JSON file given (empty path).")
  if not tf.io.gfile.exists(input_file):
    raise ValueError(f"SQuAD file {input_file!r} does not exist.")
  with tf.io.gfile.GFile(input_file, "r") as f:
    try:
      dataset = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"SQuAD file {input_file!r} is not JSON: {e}.") from e
  if not isinstance(dataset, dict) or not isinstance(
      dataset.get("data"), list):
    raise ValueError(
        f"SQuAD file {input_file!r} has no top-level 'data' list (is it a "
        "SQuAD v1.1/v2.0 JSON file?).")
  return dataset["data"]


def read_squad_examples(
    input_file: str,
    is_training: bool,
    version_2_with_negative: bool) -> Tuple[List[squad_lib.SquadExample],
                                            ReadStats]:
  """Reads a SQuAD JSON file into `squad_lib.SquadExample`s, validating it.

  Same examples as `squad_lib.read_squad_examples` on valid files (same doc
  tokens, positions and training skips); malformed input raises instead of a
  `KeyError`, and training accepts several answers per question (first used).

  Args:
    input_file: SQuAD v1.1 or v2.0 JSON file.
    is_training: Whether answer positions are needed (training features).
    version_2_with_negative: Whether questions may be unanswerable (v2.0).

  Returns:
    The examples and `ReadStats`.

  Raises:
    ValueError: On malformed input; the message names the file and question.
  """
  data = load_squad_json(input_file)
  stats = ReadStats()
  examples = []
  seen_ids = {}

  def fail(where: str, message: str):
    raise ValueError(f"SQuAD file {input_file!r}, {where}: {message}")

  for article_index, article in enumerate(data):
    if not isinstance(article, dict) or not isinstance(
        article.get("paragraphs"), list):
      fail(f"article {article_index}", "has no 'paragraphs' list.")
    for paragraph_index, paragraph in enumerate(article["paragraphs"]):
      where = f"article {article_index} paragraph {paragraph_index}"
      if not isinstance(paragraph, dict):
        fail(where, "is not an object.")
      context = paragraph.get("context")
      qas = paragraph.get("qas")
      if not isinstance(context, str):
        fail(where, "has no 'context' string.")
      if not isinstance(qas, list):
        fail(where, "has no 'qas' list.")
      doc_tokens, char_to_word_offset = _split_doc(context)
      for qa_index, qa in enumerate(qas):
        qas_id = qa.get("id") if isinstance(qa, dict) else None
        if not isinstance(qas_id, str) or not qas_id:
          fail(f"{where} question {qa_index}", "has no 'id' string.")
        where_q = f"question id {qas_id!r}"
        if qas_id in seen_ids:
          fail(where_q, f"the id is used twice ({seen_ids[qas_id]} and "
               f"{where} question {qa_index}).")
        seen_ids[qas_id] = f"{where} question {qa_index}"
        question_text = qa.get("question")
        if not isinstance(question_text, str):
          fail(where_q, "has no 'question' string.")
        answers = qa.get("answers")
        if not isinstance(answers, list):
          fail(where_q, "has no 'answers' list.")
        for answer in answers:
          if (not isinstance(answer, dict) or
              not isinstance(answer.get("text"), str)):
            fail(where_q, "has an answer without a 'text' string.")
        is_impossible = qa.get("is_impossible", False)
        if version_2_with_negative:
          if "is_impossible" in qa and not isinstance(is_impossible, bool):
            fail(where_q, "'is_impossible' is not true/false.")
          if is_training and "is_impossible" not in qa:
            fail(where_q, "has no 'is_impossible' (needed to train on "
                 "SQuAD v2.0 data).")
        stats.num_questions += 1

        if not is_training:
          if not answers and not version_2_with_negative:
            fail(where_q, "has no gold answers; the SQuAD v1.1 evaluation "
                 "needs at least one (for v2.0 data with unanswerable "
                 "questions set version_2_with_negative).")
          example = squad_lib.SquadExample(
              qas_id=qas_id, question_text=question_text,
              doc_tokens=doc_tokens,
              is_impossible=bool(is_impossible) or not answers)
          stats.num_impossible += int(example.is_impossible)
          examples.append(example)
          continue

        if version_2_with_negative and is_impossible:
          examples.append(squad_lib.SquadExample(
              qas_id=qas_id, question_text=question_text,
              doc_tokens=doc_tokens, orig_answer_text="",
              start_position=-1, end_position=-1, is_impossible=True))
          stats.num_impossible += 1
          continue
        if not answers:
          fail(where_q, "is answerable but has no answers" + (
              " (for v2.0 data with unanswerable questions pass "
              "--version_2_with_negative)." if not version_2_with_negative
              else " and is_impossible is false."))
        if len(answers) > 1:
          stats.num_multiple_answers += 1
        answer = answers[0]
        orig_answer_text = answer["text"]
        answer_offset = answer.get("answer_start")
        if isinstance(answer_offset, bool) or not isinstance(
            answer_offset, int):
          fail(where_q, "the answer has no integer 'answer_start'.")
        if not orig_answer_text.strip():
          fail(where_q, "the answer text is empty.")
        answer_end = answer_offset + len(orig_answer_text) - 1
        if answer_offset < 0 or answer_end >= len(context):
          logging.warning(
              "Skipping question %s of %s: answer_start %d + answer %r runs "
              "outside its context (%d characters).", qas_id, input_file,
              answer_offset, orig_answer_text, len(context))
          stats.num_answer_not_found += 1
          continue
        start_position = char_to_word_offset[answer_offset]
        end_position = char_to_word_offset[answer_end]
        # As squad_lib: keep only answers whose text is recovered from the
        # document at answer_start.
        actual_text = " ".join(doc_tokens[start_position:end_position + 1])
        cleaned_answer_text = " ".join(orig_answer_text.split())
        if start_position < 0 or actual_text.find(cleaned_answer_text) == -1:
          logging.warning(
              "Skipping question %s of %s: could not find answer %r at "
              "answer_start %d (context there: %r).", qas_id, input_file,
              cleaned_answer_text, answer_offset, actual_text)
          stats.num_answer_not_found += 1
          continue
        examples.append(squad_lib.SquadExample(
            qas_id=qas_id, question_text=question_text,
            doc_tokens=doc_tokens, orig_answer_text=orig_answer_text,
            start_position=start_position, end_position=end_position,
            is_impossible=False))

  stats.num_examples = len(examples)
  logging.info(
      "Read %s: %d questions, %d examples (%d unanswerable), %d skipped "
      "(answer not found in its context), %d with several answers.",
      input_file, stats.num_questions, stats.num_examples,
      stats.num_impossible, stats.num_answer_not_found,
      stats.num_multiple_answers)
  return examples, stats


def validate_lengths(max_seq_length: int, doc_stride: int,
                     max_query_length: int) -> None:
  """Rejects lengths under which squad_lib's doc-span loop cannot progress."""
  if max_query_length < 1:
    raise ValueError(f"max_query_length={max_query_length} must be >= 1.")
  if doc_stride < 1:
    raise ValueError(f"doc_stride={doc_stride} must be >= 1.")
  if max_seq_length < max_query_length + 4:
    raise ValueError(
        f"max_seq_length={max_seq_length} leaves no room for the context: "
        f"it needs [CLS] + up to max_query_length={max_query_length} question "
        "tokens + 2 [SEP] + at least 1 context token.")


def _prime_for(tokenizer: SquadTokenizer,
               examples: Sequence[squad_lib.SquadExample]) -> None:
  texts = set()
  seen_docs = set()
  for example in examples:
    texts.add(example.question_text)
    if example.orig_answer_text:
      texts.add(example.orig_answer_text)
    if id(example.doc_tokens) not in seen_docs:
      seen_docs.add(id(example.doc_tokens))
      texts.update(example.doc_tokens)
  tokenizer.prime(texts)


def convert_examples_to_features(
    examples: Sequence[squad_lib.SquadExample],
    tokenizer: SquadTokenizer,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    is_training: bool,
    output_fn: Callable[[squad_lib.InputFeatures], None]) -> int:
  """Model Garden's feature conversion with the tensorflow-text tokenizer.

  Args:
    examples: From `read_squad_examples`.
    tokenizer: A `SquadTokenizer`.
    max_seq_length: Tokens per feature.
    doc_stride: Stride of the sliding window over long contexts.
    max_query_length: Question tokens kept.
    is_training: Whether to emit answer positions.
    output_fn: Called with each feature (no padding features).

  Returns:
    The number of features.
  """
  validate_lengths(max_seq_length, doc_stride, max_query_length)
  _prime_for(tokenizer, examples)
  count = [0]

  def _output(feature, is_padding=False):
    # squad_lib pads eval features with a wrong modulus (it tests
    # `unique_id % batch_size`, whose base is 10**9); with batch_size=1 it adds
    # none and `pad_to_batch` pads correctly.
    if not is_padding:
      count[0] += 1
      output_fn(feature)

  # squad_lib logs every field of its first 20 examples at INFO (thousands
  # of lines, official/nlp/data/squad_lib.py:404): quiet it for this call.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(max(verbosity, logging.WARNING))
  try:
    squad_lib.convert_examples_to_features(
        examples=examples, tokenizer=tokenizer, max_seq_length=max_seq_length,
        doc_stride=doc_stride, max_query_length=max_query_length,
        is_training=is_training, output_fn=_output, batch_size=1)
  finally:
    logging.set_verbosity(verbosity)
  return count[0]


def pad_to_batch(writer: squad_lib.FeatureWriter,
                 features: Sequence[squad_lib.InputFeatures],
                 batch_size: int) -> int:
  """Writes copies of the last feature (new unique ids) up to whole batches.

  Padding features are not in `features`, so post-processing ignores them.

  Returns:
    The number of padding features written.
  """
  if batch_size < 1:
    raise ValueError(f"eval batch size {batch_size} must be >= 1.")
  if not features:
    return 0
  num_padding = -len(features) % batch_size
  padding = copy.deepcopy(features[-1])
  for i in range(num_padding):
    padding.unique_id = features[-1].unique_id + 1 + i
    writer.process_feature(padding)
  return num_padding


def write_eval_tfrecord(
    input_file: str, tokenizer: SquadTokenizer, output_path: str,
    max_seq_length: int, doc_stride: int, max_query_length: int,
    version_2_with_negative: bool, batch_size: int
) -> Tuple[List[squad_lib.SquadExample], List[squad_lib.InputFeatures],
           Dict[str, Any]]:
  """Writes evaluation features; returns examples, features and counts."""
  examples, stats = read_squad_examples(
      input_file, is_training=False,
      version_2_with_negative=version_2_with_negative)
  if not examples:
    raise ValueError(f"SQuAD file {input_file!r} has no questions.")
  writer = squad_lib.FeatureWriter(filename=output_path, is_training=False)
  features = []

  def _append(feature):
    features.append(feature)
    writer.process_feature(feature)

  convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      is_training=False, output_fn=_append)
  num_padding = pad_to_batch(writer, features, batch_size)
  writer.close()
  meta = {
      "task_type": "realformer_squad_eval",
      "input_json": input_file,
      "num_questions": stats.num_questions,
      "num_unanswerable": stats.num_impossible,
      "eval_data_size": len(features),
      "num_padding_features": num_padding,
      "eval_batch_size": batch_size,
      "max_seq_length": max_seq_length,
      "doc_stride": doc_stride,
      "max_query_length": max_query_length,
      "version_2_with_negative": version_2_with_negative,
      "do_lower_case": tokenizer.do_lower_case,
  }
  logging.info("Wrote %s: %d features (+%d padding) for %d questions.",
               output_path, len(features), num_padding, len(examples))
  return examples, features, meta


def write_train_tfrecord(
    input_file: str, tokenizer: SquadTokenizer, output_path: str,
    max_seq_length: int, doc_stride: int, max_query_length: int,
    version_2_with_negative: bool) -> Dict[str, Any]:
  """Writes training features; returns counts (`train_data_size` etc.)."""
  examples, stats = read_squad_examples(
      input_file, is_training=True,
      version_2_with_negative=version_2_with_negative)
  if not examples:
    raise ValueError(
        f"SQuAD file {input_file!r} has no usable training questions "
        f"({stats.num_answer_not_found} skipped: answer not in context).")
  writer = squad_lib.FeatureWriter(filename=output_path, is_training=True)
  num_no_answer = [0]

  def _write(feature):
    num_no_answer[0] += int(bool(feature.is_impossible))
    writer.process_feature(feature)

  num_features = convert_examples_to_features(
      examples, tokenizer, max_seq_length, doc_stride, max_query_length,
      is_training=True, output_fn=_write)
  writer.close()
  meta = {
      "task_type": "realformer_squad_train",
      "input_json": input_file,
      "num_questions": stats.num_questions,
      "num_examples": stats.num_examples,
      "num_unanswerable": stats.num_impossible,
      "num_skipped_answer_not_found": stats.num_answer_not_found,
      "num_multiple_answers_first_used": stats.num_multiple_answers,
      "train_data_size": num_features,
      # Features whose window holds no answer: target [CLS] (position 0).
      "num_features_without_answer": num_no_answer[0],
      "max_seq_length": max_seq_length,
      "doc_stride": doc_stride,
      "max_query_length": max_query_length,
      "version_2_with_negative": version_2_with_negative,
      "do_lower_case": tokenizer.do_lower_case,
  }
  logging.info("Wrote %s: %d features from %d examples.", output_path,
               num_features, len(examples))
  return meta


def train_schedule(train_data_size: int, epochs: float,
                   global_batch_size: int) -> Dict[str, int]:
  """Steps for `epochs` passes: train, warm-up (10%) and linear decay."""
  if train_data_size < 1 or epochs <= 0 or global_batch_size < 1:
    raise ValueError(
        f"Need train_data_size >= 1, epochs > 0 and batch size >= 1; got "
        f"{train_data_size}, {epochs}, {global_batch_size}.")
  train_steps = int(math.ceil(train_data_size * epochs / global_batch_size))
  return {
      "train_steps": train_steps,
      "warmup_steps": int(train_steps * WARMUP_PROPORTION),
  }


def train_schedule_yaml(train_record: str, train_data_size: int,
                        epochs: float, global_batch_size: int) -> str:
  """A `--config_file` setting data path, batch and step counts for a run."""
  steps = train_schedule(train_data_size, epochs, global_batch_size)
  return (
      f"# {epochs:g} epochs over {train_data_size} features at batch "
      f"{global_batch_size}; written by realformer_tf.data.squad.\n"
      "task:\n"
      "  train_data:\n"
      f"    input_path: {json.dumps(train_record)}\n"
      f"    global_batch_size: {global_batch_size}\n"
      "trainer:\n"
      f"  train_steps: {steps['train_steps']}\n"
      f"  validation_interval: {steps['train_steps']}\n"
      "  optimizer_config:\n"
      "    learning_rate:\n"
      "      polynomial:\n"
      f"        decay_steps: {steps['train_steps']}\n"
      "    warmup:\n"
      "      polynomial:\n"
      f"        warmup_steps: {steps['warmup_steps']}\n")


def get_final_text(pred_text: str, orig_tokens: Sequence[str],
                   tokenizer: SquadTokenizer) -> str:
  """Projects a detokenized WordPiece answer onto the original words.

  `squad_lib.get_final_text`'s character alignment, with the basic
  tokenization of `orig_text` done by tensorflow-text (word by word, which
  equals tokenizing the joined text, since the basic tokenizer splits on
  whitespace first). Falls back to the whole original words when the
  alignment fails, as squad_lib does.
  """
  orig_text = " ".join(orig_tokens)
  tok_text = " ".join(
      w for token in orig_tokens for w in tokenizer.basic_tokenize(token))

  start_position = tok_text.find(pred_text)
  if start_position == -1:
    return orig_text
  end_position = start_position + len(pred_text) - 1

  def _strip_spaces(text):
    ns_chars = []
    ns_to_s_map = {}
    for i, c in enumerate(text):
      if c == " ":
        continue
      ns_to_s_map[len(ns_chars)] = i
      ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map

  orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
  tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
  if len(orig_ns_text) != len(tok_ns_text):
    return orig_text
  tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}

  orig_start = orig_ns_to_s_map.get(tok_s_to_ns_map.get(start_position, -1))
  orig_end = orig_ns_to_s_map.get(tok_s_to_ns_map.get(end_position, -1))
  if orig_start is None or orig_end is None:
    return orig_text
  return orig_text[orig_start:orig_end + 1]


_Prelim = collections.namedtuple(
    "_Prelim",
    ["feature_index", "start_index", "end_index", "start_logit", "end_logit"])


def postprocess_output(
    examples: Sequence[squad_lib.SquadExample],
    features: Sequence[squad_lib.InputFeatures],
    results: Iterable[Any],
    tokenizer: SquadTokenizer,
    n_best_size: int,
    max_answer_length: int,
    version_2_with_negative: bool,
    null_score_diff_threshold: float = 0.0
) -> Tuple[Dict[str, str], Dict[str, List[Dict[str, Any]]],
           Dict[str, float]]:
  """Turns start/end logits into answer texts (BERT's span selection).

  The logic of `squad_lib.postprocess_output` (BERT format): the n-best
  start/end pairs inside the context, in a max-context window, at most
  `max_answer_length` tokens; for v2.0 the null answer scores
  `start_logit[0] + end_logit[0]` of its lowest-scoring window and the answer
  is "" iff `null - best non-null > null_score_diff_threshold`.

  Args:
    examples: The eval examples.
    features: Their features (no padding).
    results: Objects with `unique_id`, `start_logits`, `end_logits`.
    tokenizer: The `SquadTokenizer` that built the features.
    n_best_size: Candidates kept per question.
    max_answer_length: Longest answer, in WordPieces.
    version_2_with_negative: Whether "" (no answer) may be predicted.
    null_score_diff_threshold: See above.

  Returns:
    predictions {question id: text}, n-best lists {id: [...]} and, for v2.0,
    null odds {id: null score - best non-null score} (else empty).
  """
  if n_best_size < 1 or max_answer_length < 1:
    raise ValueError(
        f"n_best_size={n_best_size} and max_answer_length={max_answer_length} "
        "must be >= 1.")
  example_to_features = collections.defaultdict(list)
  for feature in features:
    example_to_features[feature.example_index].append(feature)
  id_to_result = {int(r.unique_id): r for r in results}
  tokenizer.prime_basic(
      {t for example in examples for t in example.doc_tokens})

  predictions = collections.OrderedDict()
  nbest_json = collections.OrderedDict()
  null_odds = collections.OrderedDict()
  num_missing = 0
  for example_index, example in enumerate(examples):
    example_features = example_to_features[example_index]
    prelim = []
    score_null = 1e6
    null_feature_index = 0
    null_start_logit = null_end_logit = 0.0
    for feature_index, feature in enumerate(example_features):
      result = id_to_result.get(int(feature.unique_id))
      if result is None:
        num_missing += 1
        continue
      start_logits = [float(x) for x in result.start_logits]
      end_logits = [float(x) for x in result.end_logits]
      if version_2_with_negative:
        feature_null_score = start_logits[0] + end_logits[0]
        if feature_null_score < score_null:
          score_null = feature_null_score
          null_feature_index = feature_index
          null_start_logit, null_end_logit = start_logits[0], end_logits[0]
      best_starts = sorted(range(len(start_logits)),
                           key=lambda i: start_logits[i],
                           reverse=True)[:n_best_size]
      best_ends = sorted(range(len(end_logits)), key=lambda i: end_logits[i],
                         reverse=True)[:n_best_size]
      for start in best_starts:
        for end in best_ends:
          if start >= len(feature.tokens) or end >= len(feature.tokens):
            continue
          if (start not in feature.token_to_orig_map or
              end not in feature.token_to_orig_map):
            continue
          if not feature.token_is_max_context.get(start, False):
            continue
          if end < start or end - start + 1 > max_answer_length:
            continue
          prelim.append(_Prelim(feature_index, start, end,
                                start_logits[start], end_logits[end]))
    if version_2_with_negative:
      prelim.append(_Prelim(null_feature_index, 0, 0, null_start_logit,
                            null_end_logit))
    prelim.sort(key=lambda p: p.start_logit + p.end_logit, reverse=True)

    seen = set()
    nbest = []
    for pred in prelim:
      if len(nbest) >= n_best_size:
        break
      if pred.start_index > 0:
        feature = example_features[pred.feature_index]
        tok_text = " ".join(
            feature.tokens[pred.start_index:pred.end_index + 1])
        tok_text = tok_text.replace(" ##", "").replace("##", "")
        tok_text = " ".join(tok_text.strip().split())
        orig_start = feature.token_to_orig_map[pred.start_index]
        orig_end = feature.token_to_orig_map[pred.end_index]
        text = get_final_text(
            tok_text, example.doc_tokens[orig_start:orig_end + 1], tokenizer)
      else:
        text = ""
      if text in seen:
        continue
      seen.add(text)
      nbest.append((text, pred.start_logit, pred.end_logit))
    if version_2_with_negative and "" not in seen:
      nbest.append(("", null_start_logit, null_end_logit))
    if not nbest:
      # As squad_lib: no valid span at all (e.g. max_answer_length too small).
      nbest.append(("empty", 0.0, 0.0))

    scores = [s + e for _, s, e in nbest]
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    nbest_json[example.qas_id] = [
        {"text": text, "probability": x / sum(exps), "start_logit": s,
         "end_logit": e} for (text, s, e), x in zip(nbest, exps)]

    if not version_2_with_negative:
      predictions[example.qas_id] = nbest[0][0]
      continue
    best_non_null = next((n for n in nbest if n[0]), None)
    if best_non_null is None:
      null_odds[example.qas_id] = score_null
      predictions[example.qas_id] = ""
      continue
    score_diff = score_null - best_non_null[1] - best_non_null[2]
    null_odds[example.qas_id] = score_diff
    predictions[example.qas_id] = (
        "" if score_diff > null_score_diff_threshold else best_non_null[0])
  if num_missing:
    logging.warning("%d eval features had no model output.", num_missing)
  return predictions, nbest_json, null_odds


def write_json(obj: Any, path: str) -> None:
  """Writes `obj` as UTF-8 JSON (via a temporary file, then renames)."""
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  tmp = path + ".tmp"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
  tf.io.gfile.rename(tmp, path, overwrite=True)


def validate_arguments(max_seq_length: int, doc_stride: int,
                       max_query_length: int, is_training: bool,
                       eval_batch_size: int, epochs: Optional[float],
                       train_batch_size: Optional[int]) -> None:
  """Every converter argument, checked before any file is opened for writing.

  Raises:
    ValueError: Naming the flag and its value.
  """
  validate_lengths(max_seq_length, doc_stride, max_query_length)
  if is_training:
    if (epochs is None) != (train_batch_size is None):
      raise ValueError("Give both --epochs and --train_batch_size (or "
                       "neither) to write train_schedule.yaml.")
    if epochs is not None and not epochs > 0:
      raise ValueError(f"--epochs={epochs} must be > 0.")
    if train_batch_size is not None and train_batch_size < 1:
      raise ValueError(f"--train_batch_size={train_batch_size} must be >= 1.")
  elif eval_batch_size < 1:
    raise ValueError(f"--eval_batch_size={eval_batch_size} must be >= 1.")


def convert(input_json: str, vocab_file: str, output_dir: str,
            is_training: bool, version_2_with_negative: bool,
            max_seq_length: int = 384, doc_stride: int = 128,
            max_query_length: int = 64, do_lower_case: bool = True,
            eval_batch_size: int = 48, epochs: Optional[float] = None,
            train_batch_size: Optional[int] = None) -> Dict[str, Any]:
  """What the command line does; returns the meta data it wrote.

  All arguments are checked first; the records are written under a
  temporary name and renamed only once complete, so a failure leaves the
  outputs of an earlier run untouched.
  """
  if not output_dir:
    raise ValueError("No output directory given (--output_dir).")
  validate_arguments(max_seq_length, doc_stride, max_query_length,
                     is_training, eval_batch_size, epochs, train_batch_size)
  tokenizer = SquadTokenizer(vocab_file, do_lower_case=do_lower_case)
  tf.io.gfile.makedirs(output_dir)
  record = os.path.join(output_dir, TRAIN_RECORD if is_training
                        else EVAL_RECORD)
  tmp_record = f"{record}.tmp-{os.getpid()}"
  try:
    if is_training:
      meta = write_train_tfrecord(
          input_json, tokenizer, tmp_record, max_seq_length, doc_stride,
          max_query_length, version_2_with_negative)
      schedule = (train_schedule_yaml(record, meta["train_data_size"], epochs,
                                      train_batch_size)
                  if epochs is not None else None)
    else:
      _, _, meta = write_eval_tfrecord(
          input_json, tokenizer, tmp_record, max_seq_length, doc_stride,
          max_query_length, version_2_with_negative, eval_batch_size)
    tf.io.gfile.rename(tmp_record, record, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_record):
      tf.io.gfile.remove(tmp_record)
  meta.update(tokenization.vocab_meta(vocab_file))
  write_json(meta, os.path.join(output_dir,
                                TRAIN_META if is_training else EVAL_META))
  if is_training and schedule is not None:
    tokenization.write_lines_atomically(
        os.path.join(output_dir, TRAIN_SCHEDULE), [schedule.rstrip("\n")])
  return meta


def define_flags():
  """Flags of `python -m realformer_tf.data.squad`."""
  flags.DEFINE_string("input_json", None, "SQuAD v1.1 or v2.0 JSON file.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary file.")
  flags.DEFINE_string("output_dir", None, "Where to write the TFRecords.")
  flags.DEFINE_bool("is_training", False,
                    "Write training features (with answer positions); "
                    "otherwise evaluation features.")
  flags.DEFINE_bool("version_2_with_negative", False,
                    "SQuAD v2.0: questions may be unanswerable.")
  flags.DEFINE_integer("max_seq_length", 384, "Tokens per feature.")
  flags.DEFINE_integer("doc_stride", 128, "Sliding-window stride.")
  flags.DEFINE_integer("max_query_length", 64, "Question tokens kept.")
  flags.DEFINE_bool("do_lower_case", True, "Uncased vocabulary.")
  flags.DEFINE_integer("eval_batch_size", 48,
                       "Evaluation features are padded to whole batches.")
  flags.DEFINE_float("epochs", None,
                     "With --train_batch_size: write train_schedule.yaml.")
  flags.DEFINE_integer("train_batch_size", None,
                       "With --epochs: write train_schedule.yaml.")
  flags.mark_flags_as_required(["input_json", "vocab_file", "output_dir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  meta = convert(
      input_json=f.input_json, vocab_file=f.vocab_file,
      output_dir=f.output_dir, is_training=f.is_training,
      version_2_with_negative=f.version_2_with_negative,
      max_seq_length=f.max_seq_length, doc_stride=f.doc_stride,
      max_query_length=f.max_query_length, do_lower_case=f.do_lower_case,
      eval_batch_size=f.eval_batch_size, epochs=f.epochs,
      train_batch_size=f.train_batch_size)
  print(json.dumps(meta, indent=2))


if __name__ == "__main__":
  define_flags()
  app.run(main)
