r"""SQuAD v1.1 / v2.0 JSON -> `QuestionAnsweringDataLoader` records.

  python -m realformer_tf.data.squad --input_json=train-v2.0.json \
      --vocab_file=vocab.txt --output_dir=/tmp/squad_v2 \
      --version_2_with_negative --is_training --epochs=2 --train_batch_size=48

Model Garden's `squad_lib` does the work; ours: checks, tokenizer, padding.
"""

import collections
import copy
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import tensorflow as tf
import yaml

from official.nlp.data import squad_lib
from realformer_tf import cli
from realformer_tf.core import writes
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf import utils
from realformer_tf.data import schedule
from realformer_tf.data import squad_json
from realformer_tf.data import squad_spans
from realformer_tf.data import tokenization

TRAIN_RECORD = "train.tf_record"
EVAL_RECORD = "eval.tf_record"
TRAIN_META = "train_meta_data.json"
EVAL_META = "eval_meta_data.json"
TRAIN_SCHEDULE = "train_schedule.yaml"
PREDICTIONS_FILE = "predictions.json"
NULL_ODDS_FILE = "null_odds.json"
# Run again to rewrite a set (`output_sets` names it in its errors).
WRITER = "realformer_tf.data.squad"

# Strings handed to tensorflow-text at once when filling the cache.
_TOKENIZE_BATCH = 4096


class SquadTokenizer:
  """tensorflow-text WordPiece behind `FullTokenizer`'s `tokenize` and
  `convert_tokens_to_ids`, which `squad_lib` calls; cached per string (squad_lib
  re-tokenizes a paragraph per question), `prime` fills the cache in batches.
  """

  def __init__(self, vocab_file: str, do_lower_case: bool = True):
    self.do_lower_case = do_lower_case
    self.vocab = tokenization.load_vocab(vocab_file)
    self._token_to_id = {t: i for i, t in enumerate(self.vocab)}
    self._unk_id = self._token_to_id[tokenization.UNK]
    self._wordpiece = tokenization.make_tokenizer(
        vocab_file, lower_case=do_lower_case)
    self._cache: Dict[str, List[str]] = {}

  def prime(self, texts: Iterable[str]) -> None:
    """Tokenizes `texts` into WordPieces in batches and caches the results."""
    missing = sorted({t for t in texts if t not in self._cache})
    for begin in range(0, len(missing), _TOKENIZE_BATCH):
      batch = missing[begin:begin + _TOKENIZE_BATCH]
      ids = self._wordpiece.tokenize(tf.constant(batch, dtype=tf.string))
      for text, row in zip(batch, ids.merge_dims(-2, -1).to_list()):
        self._cache[text] = [self.vocab[i] for i in row]

  def tokenize(self, text: str) -> List[str]:
    # squad_lib calls this once per question and per context word: a cached
    # text must cost one dict lookup, not a pass through `prime`.
    if text not in self._cache:
      self.prime([text])
    return list(self._cache[text])

  def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
    return [self._token_to_id.get(t, self._unk_id) for t in tokens]


def _prime_for(tokenizer: SquadTokenizer,
               examples: Sequence[squad_lib.SquadExample]) -> None:
  # squad_lib gives the questions of a paragraph one shared doc_tokens list.
  docs = {id(e.doc_tokens): e.doc_tokens for e in examples}
  tokenizer.prime({w for doc in docs.values() for w in doc} | {
      t for e in examples for t in (e.question_text, e.orig_answer_text) if t})


def convert_examples_to_features(
    examples: Sequence[squad_lib.SquadExample], tokenizer: SquadTokenizer,
    max_seq_length: int, doc_stride: int, max_query_length: int,
    is_training: bool,
    output_fn: Callable[[squad_lib.InputFeatures], None]) -> int:
  """squad_lib's features of `examples` with a `SquadTokenizer`, each
  passed to `output_fn` (no padding: `pad_to_batch`); returns their number."""
  squad_spans.validate_lengths(max_seq_length, doc_stride, max_query_length)
  _prime_for(tokenizer, examples)
  # squad_lib's `convert_examples_to_features` logs every field of its
  # first 20 examples at INFO: quiet it for this call.
  verbosity = logging.get_verbosity()
  logging.set_verbosity(max(verbosity, logging.WARNING))
  try:
    # With batch_size=1 squad_lib's eval padding (`unique_id % batch_size`)
    # adds no feature.
    return squad_lib.convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length,
        is_training, lambda feature, is_padding=False: output_fn(feature),
        batch_size=1)
  finally:
    logging.set_verbosity(verbosity)


def pad_to_batch(writer: squad_lib.FeatureWriter,
                 features: Sequence[squad_lib.InputFeatures],
                 batch_size: int) -> int:
  """Writes copies of the last feature (new unique ids) up to whole batches;
  returns their number. Not squad_lib's padding: it tests the unique id, not
  the feature count, and can leave a partial batch."""
  num_padding = -len(features) % batch_size
  for i in range(num_padding):
    padding = copy.deepcopy(features[-1])
    padding.unique_id += 1 + i
    writer.process_feature(padding)
  return num_padding


def drop_answers_without_tokens(
    examples: Sequence[squad_lib.SquadExample], tokenizer: SquadTokenizer,
    input_file: str) -> Tuple[List[squad_lib.SquadExample], int]:
  """(Training examples minus those whose answer has no WordPiece, how many
  were dropped, logged): squad_lib labels an answer of zero-width characters
  only (U+200B) end = start - 1."""
  _prime_for(tokenizer, examples)
  dropped = [e.qas_id for e in examples if not e.is_impossible and not any(
      tokenizer.tokenize(word)
      for word in e.doc_tokens[e.start_position:e.end_position + 1])]
  if dropped:
    logging.warning("Skipped %d training questions of %s whose answer has no "
                    "WordPiece (e.g. only zero-width characters): %s",
                    len(dropped), input_file, ", ".join(dropped))
  return [e for e in examples if e.qas_id not in set(dropped)], len(dropped)


def write_features(
    input_file: str, tokenizer: SquadTokenizer, output_path: str,
    max_seq_length: int, doc_stride: int, max_query_length: int,
    version_2_with_negative: bool, is_training: bool, batch_size: int = 1
) -> Tuple[List[squad_lib.SquadExample], List[squad_lib.InputFeatures],
           Dict[str, Any]]:
  """Writes the features of a SQuAD file; returns examples, features, counts.

  Evaluation features are padded to whole batches of `batch_size`; training
  features are streamed to the file and not returned (millions of lists).
  """
  examples, stats = squad_json.read_squad_examples(
      input_file, is_training, version_2_with_negative, utils.GFILE_OPS)
  num_without_tokens = 0
  if is_training:
    examples, num_without_tokens = drop_answers_without_tokens(
        examples, tokenizer, input_file)
  if not examples:
    raise ValueError(
        f"SQuAD file {input_file!r} has no usable questions "
        f"({stats.num_answer_not_found + num_without_tokens} training "
        "answers skipped).")
  features = []
  counts = collections.Counter()
  with writes.staged(output_path, utils.GFILE_OPS) as tmp_path:
    writer = squad_lib.FeatureWriter(filename=tmp_path, is_training=is_training)

    def _write(feature):
      counts["no_answer"] += int(bool(feature.is_impossible))
      if not is_training:
        features.append(feature)
      writer.process_feature(feature)

    num_features = convert_examples_to_features(
        examples, tokenizer, max_seq_length, doc_stride, max_query_length,
        is_training=is_training, output_fn=_write)
    num_padding = 0 if is_training else pad_to_batch(writer, features,
                                                      batch_size)
    writer.close()
  meta = dict(
      task_type=f"realformer_squad_{'train' if is_training else 'eval'}",
      input_json=input_file, num_questions=stats.num_questions,
      num_unanswerable=stats.num_impossible, max_seq_length=max_seq_length,
      doc_stride=doc_stride, max_query_length=max_query_length,
      version_2_with_negative=version_2_with_negative,
      do_lower_case=tokenizer.do_lower_case)
  if is_training:
    meta.update(
        num_examples=stats.num_examples,
        num_skipped_answer_not_found=stats.num_answer_not_found,
        num_skipped_answer_without_tokens=num_without_tokens,
        num_multiple_answers_first_used=stats.num_multiple_answers,
        train_data_size=num_features,
        # Features whose window holds no answer: target [CLS] (position 0).
        num_features_without_answer=counts["no_answer"])
  else:
    meta.update(eval_data_size=num_features, eval_batch_size=batch_size,
                num_padding_features=num_padding)
  logging.info("Wrote %s: %d features (+%d padding) from %d examples.",
               output_path, num_features, num_padding, len(examples))
  return examples, features, meta


def train_schedule_yaml(train_record: str, train_data_size: int,
                        epochs: float, global_batch_size: int) -> str:
  """A `--config_file` setting data path, batch and the paper's schedule
  (`schedule.train_steps`) for `epochs` passes."""
  steps = schedule.train_steps(train_data_size, epochs, global_batch_size)
  return (f"# {epochs:g} epochs over {train_data_size} features at batch "
          f"{global_batch_size}; written by realformer_tf.data.squad.\n" +
          yaml.safe_dump({
              "task": {"train_data": {"input_path": train_record,
                                      "global_batch_size": global_batch_size}},
              "trainer": {**schedule.schedule_override(steps),
                          "validation_interval": steps}}))


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
  """`squad_lib.postprocess_output` (BERT format) for `tokenizer`'s features.

  `features` without padding; `results` have `unique_id`, `start_logits`,
  `end_logits`; `null_score_diff_threshold`: "" iff null - best non-null
  score exceeds it.

  Returns:
    predictions {question id: text}, n-best lists {id: [...]} and, for v2.0,
    null odds {id: null score - best non-null score, a float} (else empty).
  """
  if n_best_size < 1 or max_answer_length < 1:
    raise ValueError(
        f"n_best_size={n_best_size} and max_answer_length={max_answer_length} "
        "must be >= 1.")
  predictions, nbest, null_odds = squad_lib.postprocess_output(
      examples, features, results, n_best_size, max_answer_length,
      tokenizer.do_lower_case, version_2_with_negative,
      null_score_diff_threshold)
  # Logit sums come back as numpy floats, which `json` cannot write.
  return predictions, nbest, {k: float(v) for k, v in null_odds.items()}


def convert(input_json: str, vocab_file: str, output_dir: str,
            is_training: bool, version_2_with_negative: bool,
            max_seq_length: int = 384, doc_stride: int = 128,
            max_query_length: int = 64, do_lower_case: bool = True,
            eval_batch_size: int = 48, epochs: Optional[float] = None,
            train_batch_size: Optional[int] = None) -> Dict[str, Any]:
  """What the command line does; returns the meta data it wrote.

  Every argument is checked before any file is opened; the record, its meta
  data and the schedule are published as one set (`data.output_sets`).
  """
  if not output_dir:
    raise ValueError("No output directory given (--output_dir).")
  squad_spans.validate_lengths(max_seq_length, doc_stride, max_query_length)
  if is_training and (epochs is None) != (train_batch_size is None):
    raise ValueError("Give both --epochs and --train_batch_size (or "
                     "neither) to write train_schedule.yaml.")
  if is_training and epochs is not None:
    schedule.train_steps(1, epochs, train_batch_size)  # Raises if not positive.
  if not is_training and eval_batch_size < 1:
    raise ValueError(f"--eval_batch_size={eval_batch_size} must be >= 1.")
  tokenizer = SquadTokenizer(vocab_file, do_lower_case=do_lower_case)
  record = os.path.join(output_dir, TRAIN_RECORD if is_training
                        else EVAL_RECORD)
  schedule_path = os.path.join(output_dir, TRAIN_SCHEDULE)
  with output_sets.output_set(
      os.path.join(output_dir, TRAIN_META if is_training else EVAL_META),
      WRITER, [record] + ([schedule_path] if is_training and epochs is not None
                          else [])) as outputs:
    _, _, meta = write_features(
        input_json, tokenizer, outputs.stage(record), max_seq_length,
        doc_stride, max_query_length, version_2_with_negative, is_training,
        eval_batch_size)
    meta.update(tokenization.vocab_meta(vocab_file))
    if is_training and epochs is not None:
      utils.GFILE_OPS.write(outputs.stage(schedule_path), train_schedule_yaml(
          record, meta["train_data_size"], epochs, train_batch_size))
    meta[record_facts.RECORDS_KEY] = record_facts.listing(outputs.staged)
    meta = outputs.commit(meta)
  return meta


main = utils.flags_main(convert)


if __name__ == "__main__":
  flags.DEFINE_string("input_json", None, "SQuAD v1.1 or v2.0 JSON file.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary file.")
  flags.DEFINE_string("output_dir", None, "Where to write the TFRecords.")
  flags.DEFINE_bool("is_training", False, "Training features (with answer "
                    "positions); otherwise evaluation features.")
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
  cli.run(main)
