"""BERT pre-training (masked LM + next sentence) TFRecords from raw text.

Google BERT's records (`BertPretrainDataLoader` reads them), built by Model
Garden's `create_instances_from_document` from one seeded `random.Random`.
Around it: non-UTF-8 text is an error naming file:line, lines are tokenized
in batches, records are byte-identical for a seed in any process, and they
and their meta data change as one output set.
"""

import contextlib
import functools
import importlib
import os
import random
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple
import zlib

from absl import flags
from absl import logging
import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import writes
from realformer_tf.data import corpus_text
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf.data import tfds_corpus
from realformer_tf.data import tokenization

# Lines handed to the tokenizer per call.
_TOKENIZE_BATCH_SIZE = 2048
# Why a corpus (a shard) needs 2 documents (`corpus_text.check_documents`).
NSP_PURPOSE = "random next sentences from another document"
# Run again to rewrite a set (`output_sets` names it in its errors).
WRITER = "realformer_tf.data.create_pretraining_data"


def import_without_global_flags(module_name: str):
  """Imports `module_name` (Model Garden's script defines flags at import)
  with its absl flags kept off FLAGS; already imported, it is returned."""
  private_flags = flags.FlagValues()
  with contextlib.ExitStack() as stack:
    for name in ("DEFINE_string", "DEFINE_enum", "DEFINE_bool",
                 "DEFINE_integer", "DEFINE_float", "DEFINE_list"):
      define = getattr(flags, name)
      setattr(flags, name, functools.partial(define,
                                             flag_values=private_flags))
      stack.callback(setattr, flags, name, define)
    return importlib.import_module(module_name)


mg_create_pretraining_data = import_without_global_flags(
    "official.nlp.data.create_pretraining_data")


def check_input_files(input_files: Sequence[str]) -> List[str]:
  """The input files (a list or one comma-separated string of paths and glob
  patterns, each pattern's matches sorted) as a list; ValueError for no
  file, a pattern matching none, or a missing, directory or blank file."""
  if any(isinstance(f, tfds_corpus.Corpus) for f in input_files or ()):
    return list(input_files)  # Checked by `tfds_corpus.open_split`.
  if isinstance(input_files, str):
    input_files = input_files.split(",")
  files = []
  for pattern in (p.strip() for p in input_files or () if p.strip()):
    matched = (sorted(tf.io.gfile.glob(pattern))
               if any(c in pattern for c in "*?[") else [pattern])
    if not matched:
      raise ValueError(f"Input pattern {pattern!r} matches no file.")
    files += [f for f in matched if f not in files]
  input_files = files
  if not input_files:
    raise ValueError("No input files given.")
  for path in input_files:
    if not tf.io.gfile.exists(path):
      raise ValueError(f"Input file {path!r} does not exist.")
    if tf.io.gfile.isdir(path):
      raise ValueError(f"Input file {path!r} is a directory, not a file.")
    try:
      if not any(line.strip() for line in _raw_lines(path)):
        raise ValueError(f"Input file {path!r} is empty (no non-blank line).")
    except (OSError, EOFError, zlib.error) as e:  # A corrupt .gz or .bz2.
      raise ValueError(f"Input file {path!r}: {e}") from None
  return input_files


def check_instance_options(max_seq_length: int, max_predictions_per_seq: int,
                           masked_lm_prob: float, dupe_factor: int,
                           short_seq_prob: float) -> None:
  """Raises ValueError naming the first of these options out of range."""
  for name, value, minimum in (("max_seq_length", max_seq_length, 8),
                               ("max_predictions_per_seq",
                                max_predictions_per_seq, 1),
                               ("dupe_factor", dupe_factor, 1)):
    if value < minimum:
      raise ValueError(f"{name} must be >= {minimum}, got {value}.")
  if not 0.0 < float(masked_lm_prob) < 1.0:
    raise ValueError(f"masked_lm_prob must be in (0, 1), got {masked_lm_prob}.")
  if not 0.0 <= float(short_seq_prob) <= 1.0:
    raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}.")


def validate_arguments(input_files: Sequence[str], output_file: str,
                       max_seq_length, max_predictions_per_seq, masked_lm_prob,
                       dupe_factor, short_seq_prob, random_seed) -> List[str]:
  """`create_pretraining_data`'s input files as a list, once its arguments
  but the vocabulary are checked (ValueError naming the first bad one)."""
  input_files = check_input_files(input_files)
  if not output_file:
    raise ValueError("No output file given (empty path).")
  utils.check_directory_path(os.path.dirname(writes.absolute(output_file)),
                             "Output folder", "pass another output path")
  if writes.absolute(output_file) in input_names(input_files):
    raise ValueError(f"Output file {output_file!r} is also an input file; "
                     "refusing to overwrite it.")
  if tf.io.gfile.isdir(output_file):
    raise ValueError(f"Output file {output_file!r} is a directory.")
  check_instance_options(max_seq_length, max_predictions_per_seq,
                         masked_lm_prob, dupe_factor, short_seq_prob)
  if isinstance(random_seed, bool) or not isinstance(random_seed, int):
    raise ValueError(f"random_seed must be an int, got {random_seed!r}.")
  return input_files


def input_names(input_files: Sequence) -> List[str]:
  """Input files as absolute paths, a `tfds_corpus.Corpus` as its name."""
  return [str(f) if isinstance(f, tfds_corpus.Corpus) else writes.absolute(f)
          for f in input_files]


def read_lines(path) -> Iterable[str]:
  """Reads a UTF-8 text file (.gz and .bz2 decompressed) as stripped lines
  (`corpus_text.decode_lines`' errors); a `tfds_corpus.Corpus`'s lines."""
  if isinstance(path, tfds_corpus.Corpus):
    return (line for _, lines in path.documents() for line in lines)
  with tf.io.gfile.GFile(path, "rb") as f:
    return corpus_text.decode_lines(
        corpus_text.decompressed(path, f).read(), path)


def _raw_lines(path: str) -> Iterator[bytes]:
  """The lines of `path` (.gz and .bz2 decompressed) as bytes, each with its
  b"\\n", read in chunks.

  Not `GFile` iteration: its `readline` drops b"\\r" inside lines.
  """
  with tf.io.gfile.GFile(path, "rb") as raw:
    f, rest = corpus_text.decompressed(path, raw), b""
    while chunk := f.read(1 << 20):
      lines = (rest + chunk).split(b"\n")
      rest = lines.pop()
      for line in lines:
        yield line + b"\n"
    if rest:
      yield rest


def stream_documents(path: str) -> Iterator[List[str]]:
  """A BERT-format file's documents (runs of non-blank stripped lines between
  blank ones), read a line at a time: memory holds one document
  (`read_lines`' errors)."""
  document, offset = [], 0
  for number, data in enumerate(_raw_lines(path), 1):
    try:
      line = data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
      raise corpus_text.not_utf8(path, data, e, number, offset) from None
    offset += len(data)
    if line:
      document.append(line)
    elif document:
      yield document
      document = []
  if document:
    yield document


def indexed_documents(source) -> Iterator[Tuple[int, List[str]]]:
  """(index, lines) of a BERT-format file's documents (`stream_documents`),
  or of a `tfds_corpus.Corpus`'s (their example indices)."""
  if isinstance(source, tfds_corpus.Corpus):
    return source.documents()
  return enumerate(stream_documents(source))


def text_documents(path) -> List[List[str]]:
  """A BERT-format file's (or `tfds_corpus.Corpus`'s) documents."""
  return [lines for _, lines in indexed_documents(path)]


def tokenize_lines(tokenizer, lines: Sequence[str]) -> List[List[int]]:
  """Each line's WordPiece ids from `tokenizer` (a
  `tensorflow_text.BertTokenizer`), `_TOKENIZE_BATCH_SIZE` lines a call."""
  ids = []
  for start in range(0, len(lines), _TOKENIZE_BATCH_SIZE):
    pieces = tokenizer.tokenize(
        tf.constant(lines[start:start + _TOKENIZE_BATCH_SIZE])).merge_dims(
            -2, -1)
    ids.extend(pieces.to_list())
  return ids


def split_documents(file_documents: Sequence[Sequence[str]],
                    ids: Sequence[List[int]]) -> List[List[List[int]]]:
  """`ids` (one list per line of `file_documents`, in order) regrouped into
  documents; empty sentences and then empty documents are dropped."""
  sentences = iter(ids)
  documents = []
  for document in file_documents:
    document_ids = [s for s in (next(sentences) for _ in document) if s]
    if document_ids:
      documents.append(document_ids)
  return documents


def tokenized_documents(tokenizer, texts: Sequence[Sequence[str]], name: str,
                        max_tokens: Optional[int]) -> List[List[List[int]]]:
  """`split_documents` of `texts`' `tokenize_lines`; lines of more than
  `max_tokens` tokens are counted in a warning naming `name`."""
  ids = tokenize_lines(tokenizer, [line for lines in texts for line in lines])
  long_lines = [len(i) for i in ids if max_tokens and len(i) > max_tokens]
  if long_lines:
    logging.warning(
        "%s: %d line(s) have more than %d tokens (longest: %d); each yields "
        "at most a few truncated examples and the rest is lost. Is the text "
        "one sentence per line?", name, len(long_lines), max_tokens,
        max(long_lines))
  return split_documents(texts, ids)


def read_documents(input_files: Sequence[str], tokenizer,
                   max_tokens: Optional[int] = None) -> List[List[List[int]]]:
  """BERT-format files (no document continues into the next) as documents of
  sentences of `tokenizer`'s WordPiece ids, in file order, empty ones
  dropped; lines of more than `max_tokens` tokens counted in a warning."""
  return [document for path in input_files for document in
          tokenized_documents(tokenizer, text_documents(path), path,
                              max_tokens)]


def _example(instance, token_ids: dict, max_seq_length: int,
             max_predictions_per_seq: int) -> tf.train.Example:
  """Model Garden's `TrainingInstance` as a padded BERT `tf.train.Example`."""
  ids = [token_ids[t] for t in instance.tokens]
  num_pad = max_seq_length - len(ids)
  num_masked = len(instance.masked_lm_positions)
  num_mask_pad = max_predictions_per_seq - num_masked
  int_feature = mg_create_pretraining_data.create_int_feature
  features = dict(
      input_ids=int_feature(ids + [0] * num_pad),
      input_mask=int_feature([1] * len(ids) + [0] * num_pad),
      segment_ids=int_feature(instance.segment_ids + [0] * num_pad),
      masked_lm_positions=int_feature(
          instance.masked_lm_positions + [0] * num_mask_pad),
      masked_lm_ids=int_feature(
          [token_ids[t] for t in instance.masked_lm_labels] +
          [0] * num_mask_pad),
      masked_lm_weights=mg_create_pretraining_data.create_float_feature(
          [1.0] * num_masked + [0.0] * num_mask_pad),
      next_sentence_labels=int_feature([int(instance.is_random_next)]))
  return tf.train.Example(features=tf.train.Features(feature=features))


def shuffled_examples(documents: List[List[List[str]]], vocab: Sequence[str],
                      random_seed: int, max_seq_length: int,
                      max_predictions_per_seq: int, masked_lm_prob: float,
                      dupe_factor: int, short_seq_prob: float) -> List[bytes]:
  """The serialized examples of `documents` (shuffled in place), as Model
  Garden's `create_training_instances` makes them without its file reading;
  one `random.Random(random_seed)` draws everything. Also the Beam
  pipeline's, per shard."""
  rng = random.Random(random_seed)
  rng.shuffle(documents)
  token_ids = {token: i for i, token in enumerate(vocab)}
  examples = []
  for document_index in list(range(len(documents))) * dupe_factor:
    examples.extend(_example(instance, token_ids, max_seq_length,
                             max_predictions_per_seq).SerializeToString(
                                 deterministic=True)
                    for instance in mg_create_pretraining_data.
                    create_instances_from_document(
                        documents, document_index, max_seq_length,
                        short_seq_prob, masked_lm_prob,
                        max_predictions_per_seq, vocab, rng))
  rng.shuffle(examples)
  return examples


def write_records(path: str, records: Sequence[bytes]) -> None:
  """Writes serialized records to the TFRecord file `path`."""
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)


def meta_data_path(output_file: str) -> str:
  """The meta data (and set manifest) of the records `output_file`."""
  return os.path.splitext(output_file)[0] + "_pretraining_meta_data.json"


def meta_data(input_files: Sequence[str], vocab_file: str, num_examples: int,
              **options) -> dict:
  """What `meta_data_path` records: inputs, vocabulary, options, count."""
  return dict(task="pretraining",
              input_files=input_names(input_files),
              **tokenization.vocab_meta(vocab_file), **options,
              num_examples=num_examples)


def create_pretraining_data(
    input_files: Sequence[str], vocab_file: str, output_file: str,
    max_seq_length: int = 128, max_predictions_per_seq: int = 20,
    masked_lm_prob: float = 0.15, dupe_factor: int = 1,
    short_seq_prob: float = 0.1, random_seed: int = 12345,
    do_lower_case: bool = True,
    output_set: Optional[writes.OutputSet] = None,
    check_documents: bool = False) -> int:
  """Writes the records of `input_files` (BERT-format text files, or one
  comma-separated string) to `output_file` and returns their count; the same
  seed and inputs give byte-identical records. Every argument (the options'
  ranges: `check_instance_options`) is checked before anything is written
  (ValueError naming it); an interrupted run leaves the previous records and
  meta data whole. `output_set`: the set the records join (its owner
  commits it), else one of their own; `check_documents`: refuse fewer than
  2 documents (`NSP_PURPOSE`)."""
  options = dict(max_seq_length=max_seq_length,
                 max_predictions_per_seq=max_predictions_per_seq,
                 masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
                 short_seq_prob=short_seq_prob)
  input_files = validate_arguments(input_files, output_file,
                                   random_seed=random_seed, **options)
  vocab = tokenization.load_vocab(vocab_file)
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=do_lower_case)
  logging.info("Tokenizing %d input file(s): %s", len(input_files),
               ", ".join(map(str, input_files)))
  documents = [[[vocab[i] for i in sentence] for sentence in document]
               for document in read_documents(input_files, tokenizer,
                                              max_seq_length)]
  logging.info("%d documents, %d sentences, %d WordPieces.", len(documents),
               sum(map(len, documents)),
               sum(len(s) for d in documents for s in d))

  if check_documents:
    corpus_text.check_documents(
        len(documents), f"The input ({', '.join(map(str, input_files))})",
        NSP_PURPOSE, "separate documents with a blank line")
  examples = shuffled_examples(documents, vocab, random_seed, **options)
  if not examples:
    raise ValueError(f"Input {', '.join(map(str, input_files))} yields no "
                     f"training instance with vocabulary {vocab_file!r}.")

  with contextlib.ExitStack() as stack:
    outputs = output_set or stack.enter_context(output_sets.output_set(
        meta_data_path(output_file), WRITER, [output_file]))
    write_records(outputs.stage(output_file), examples)
    if output_set is None:
      outputs.commit(meta_data(
          input_files, vocab_file, len(examples), do_lower_case=do_lower_case,
          **options, random_seed=random_seed,
          records=record_facts.listing(outputs.staged)))
  logging.info("Wrote %d examples to %s", len(examples), output_file)
  return len(examples)
