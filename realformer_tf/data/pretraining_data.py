"""BERT pre-training (masked LM + next sentence) TFRecords from raw text.

Decision: the project pre-trains from fixed-length MLM/NSP `tf.Example`
records, exactly as Google BERT's `create_pretraining_data.py` writes them, and
reads them with Model Garden's
`official.nlp.data.pretrain_dataloader.BertPretrainDataLoader`:

  feature                 dtype     shape
  input_ids               int64     [max_seq_length]    0-padded
  input_mask              int64     [max_seq_length]    1 = real token
  segment_ids             int64     [max_seq_length]    0 = A, 1 = B
  masked_lm_positions     int64     [max_predictions_per_seq]  0-padded
  masked_lm_ids           int64     [max_predictions_per_seq]  0-padded
  masked_lm_weights       float32   [max_predictions_per_seq]  1.0 / 0.0 pad
  next_sentence_labels    int64     [1]                 1 = random B

(the loader's `use_v2_feature_names=False` names). Why static records rather
than masking on the fly: it is the paper's recipe; the evaluation set is fixed,
so evaluation numbers are deterministic and comparable across runs; and the
train-time input pipeline is plain `tf.io.parse_single_example`, so TPU input
hosts need no tensorflow-text custom ops.

Tokenization is `tensorflow_text.BertTokenizer` (see `tokenization.py`), run
on batches of lines. Instances are then built in Python with a seeded
`random.Random`, following Google BERT's algorithm step for step:
documents are shuffled; each document is cut into chunks of sentences
that fill `max_seq_length - 3` tokens (10% of the time a shorter random
target); a chunk is split into segment A and B at a random sentence
boundary, and half the time B is replaced by text from a random other
document (label 1); `truncate_seq_pair` trims the longer side from a random
end; the layout is `[CLS] A [SEP] B [SEP]`. Masking picks
`min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))` WordPieces
(never [CLS]/[SEP]), each independently: 80% -> [MASK], 10% kept, 10% -> a
random vocabulary id; `masked_lm_ids` hold the original ids, positions
ascending. Finally all instances are shuffled.

Input convention (BERT's): one sentence per line, a blank line between
documents. Unlike Google's script, a document never continues from one input
file into the next. As in Google's script, a random replacement can be any
vocabulary id, special tokens included.
"""

import collections
import os
import random
from typing import List, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from realformer_tf.data import tokenization

# Lines handed to the tokenizer per call.
_TOKENIZE_BATCH_SIZE = 2048

# An instance before padding: token ids with masking applied, segment ids,
# masked positions (ascending) and their original ids, and the NSP label.
TrainingInstance = collections.namedtuple(
    "TrainingInstance",
    ["input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids",
     "is_random_next"])


def check_input_files(input_files: Sequence[str]) -> List[str]:
  """Checks that every input text file exists and has a non-blank line.

  Args:
    input_files: Paths (a list, or one comma-separated string).

  Returns:
    The paths as a list.

  Raises:
    ValueError: For no file, or a missing, directory or empty file (named).
  """
  if isinstance(input_files, str):
    input_files = [f for f in input_files.split(",") if f]
  input_files = list(input_files)
  if not input_files:
    raise ValueError("No input files given.")
  for path in input_files:
    if not tf.io.gfile.exists(path):
      raise ValueError(f"Input file {path!r} does not exist.")
    if tf.io.gfile.isdir(path):
      raise ValueError(f"Input file {path!r} is a directory, not a file.")
    if not _has_text(path):
      raise ValueError(f"Input file {path!r} is empty (no non-blank line).")
  return input_files


def check_instance_options(max_seq_length: int,
                           max_predictions_per_seq: int,
                           masked_lm_prob: float,
                           dupe_factor: int,
                           short_seq_prob: float) -> None:
  """Checks the numeric options of `create_pretraining_data`.

  Raises:
    ValueError: Naming the first option out of range.
  """
  _check_int("max_seq_length", max_seq_length, 8)
  _check_int("max_predictions_per_seq", max_predictions_per_seq, 1)
  _check_int("dupe_factor", dupe_factor, 1)
  if not 0.0 < float(masked_lm_prob) < 1.0:
    raise ValueError(
        f"masked_lm_prob must be in (0, 1), got {masked_lm_prob}.")
  if not 0.0 <= float(short_seq_prob) <= 1.0:
    raise ValueError(
        f"short_seq_prob must be in [0, 1], got {short_seq_prob}.")


def validate_arguments(input_files: Sequence[str],
                       output_file: str,
                       max_seq_length: int,
                       max_predictions_per_seq: int,
                       masked_lm_prob: float,
                       dupe_factor: int,
                       short_seq_prob: float) -> List[str]:
  """Checks every argument of `create_pretraining_data` but the vocabulary.

  Args:
    input_files: Text files (or one comma-separated string of them).
    output_file: Output TFRecord path.
    max_seq_length: Fixed sequence length, >= 8.
    max_predictions_per_seq: Masked positions per sequence, >= 1.
    masked_lm_prob: Fraction of tokens to mask, in (0, 1).
    dupe_factor: Times to duplicate the input with different masks, >= 1.
    short_seq_prob: Probability of a shorter target length, in [0, 1].

  Returns:
    The input files as a list.

  Raises:
    ValueError: On the first bad argument, naming it (and the file).
  """
  input_files = check_input_files(input_files)
  if not output_file:
    raise ValueError("No output file given (empty path).")
  out_abs = os.path.abspath(output_file)
  for path in input_files:
    if os.path.abspath(path) == out_abs:
      raise ValueError(
          f"Output file {output_file!r} is also an input file; refusing to "
          "overwrite it.")
  if tf.io.gfile.isdir(output_file):
    raise ValueError(f"Output file {output_file!r} is a directory.")
  check_instance_options(max_seq_length, max_predictions_per_seq,
                         masked_lm_prob, dupe_factor, short_seq_prob)
  return input_files


def _check_int(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be an int, got {value!r}.")
  if value < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {value}.")


def _has_text(path: str) -> bool:
  with tf.io.gfile.GFile(path, "rb") as f:
    for line in f:
      if line.strip():
        return True
  return False


def read_lines(path: str) -> List[str]:
  """Reads a UTF-8 text file as stripped lines.

  Google BERT's `convert_to_unicode` decodes with errors="ignore", which
  silently drops the bytes of binary or Latin-1 files; here (as the GLUE
  converter does) they are an error naming the file and the line.

  Raises:
    ValueError: If `path` is not UTF-8 text.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    raise ValueError(
        f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at offset "
        f"{e.start}): a binary file, or text in another encoding (convert "
        "it, e.g. iconv -f latin1 -t utf-8).") from None
  return [line.strip() for line in text.split("\n")]


def _warn_long_lines(path: str, lengths: Sequence[int],
                     max_tokens: Optional[int]) -> None:
  """Warns (with counts) about lines longer than a whole sequence."""
  if not max_tokens:
    return
  long_lines = [n for n in lengths if n > max_tokens]
  if long_lines:
    logging.warning(
        "%s: %d line(s) have more than %d tokens (longest: %d); each yields "
        "at most a few truncated examples and the rest is lost. Is the text "
        "one sentence per line?", path, len(long_lines), max_tokens,
        max(long_lines))


def read_documents(input_files: Sequence[str], tokenizer,
                   max_tokens: Optional[int] = None) -> List[List[List[int]]]:
  """Tokenizes BERT-format text files into documents of sentences of ids.

  Args:
    input_files: Files with one sentence per line and blank lines between
      documents. Documents do not continue from one file to the next.
    tokenizer: A `tensorflow_text.BertTokenizer` with int ids.
    max_tokens: If set, lines with more tokens are counted in a warning.

  Returns:
    Non-empty documents, each a list of non-empty sentences of WordPiece ids,
    in file order. Lines with no token are dropped.
  """
  documents = []
  for path in input_files:
    lines = read_lines(path)
    texts = [line for line in lines if line]
    ids = []
    for start in range(0, len(texts), _TOKENIZE_BATCH_SIZE):
      batch = texts[start:start + _TOKENIZE_BATCH_SIZE]
      pieces = tokenizer.tokenize(tf.constant(batch, dtype=tf.string))
      pieces = pieces.merge_dims(-2, -1)
      flat = pieces.flat_values.numpy().tolist()
      splits = pieces.row_splits.numpy().tolist()
      ids.extend(flat[splits[i]:splits[i + 1]] for i in range(len(batch)))
    _warn_long_lines(path, [len(i) for i in ids], max_tokens)
    current = []
    next_text = iter(ids)
    for line in lines:
      if not line:
        if current:
          documents.append(current)
        current = []
        continue
      sentence = next(next_text)
      if sentence:
        current.append(sentence)
    if current:
      documents.append(current)
  return documents


def truncate_seq_pair(tokens_a: List[int], tokens_b: List[int],
                      max_num_tokens: int, rng: random.Random) -> None:
  """Trims the longer of A and B, from a random end, until they fit."""
  while len(tokens_a) + len(tokens_b) > max_num_tokens:
    trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    assert trunc_tokens
    if rng.random() < 0.5:
      del trunc_tokens[0]
    else:
      trunc_tokens.pop()


def create_masked_lm_predictions(tokens: List[int], masked_lm_prob: float,
                                 max_predictions_per_seq: int,
                                 vocab_size: int, special_ids: dict,
                                 rng: random.Random):
  """BERT's 80/10/10 masking of individual WordPieces.

  Args:
    tokens: `[CLS] A [SEP] B [SEP]` as ids.
    masked_lm_prob: Fraction of tokens to predict.
    max_predictions_per_seq: Cap on the number of predictions.
    vocab_size: Random replacements are drawn from [0, vocab_size).
    special_ids: Ids of "[CLS]", "[SEP]" and "[MASK]".
    rng: The random generator.

  Returns:
    (output ids, masked positions ascending, original ids at them).
  """
  cls_id, sep_id, mask_id = (special_ids[tokenization.CLS],
                             special_ids[tokenization.SEP],
                             special_ids[tokenization.MASK])
  cand_indexes = [i for i, t in enumerate(tokens) if t not in (cls_id, sep_id)]
  rng.shuffle(cand_indexes)
  output_tokens = list(tokens)
  num_to_predict = min(max_predictions_per_seq,
                       max(1, int(round(len(tokens) * masked_lm_prob))))
  masked = []
  for index in cand_indexes[:num_to_predict]:
    if rng.random() < 0.8:
      masked_token = mask_id
    elif rng.random() < 0.5:
      masked_token = tokens[index]
    else:
      masked_token = rng.randint(0, vocab_size - 1)
    output_tokens[index] = masked_token
    masked.append((index, tokens[index]))
  masked.sort()
  return (output_tokens, [p for p, _ in masked], [t for _, t in masked])


def create_instances_from_document(all_documents, document_index,
                                   max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq,
                                   vocab_size, special_ids, rng):
  """Creates `TrainingInstance`s for one document (Google BERT's algorithm)."""
  document = all_documents[document_index]
  cls_id, sep_id = special_ids[tokenization.CLS], special_ids[tokenization.SEP]
  # Account for [CLS], [SEP], [SEP].
  max_num_tokens = max_seq_length - 3
  # Usually fill the whole sequence; sometimes (short_seq_prob) aim shorter to
  # reduce the mismatch with fine-tuning on short inputs.
  target_seq_length = max_num_tokens
  if rng.random() < short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  current_chunk = []
  current_length = 0
  i = 0
  while i < len(document):
    segment = document[i]
    current_chunk.append(segment)
    current_length += len(segment)
    if i == len(document) - 1 or current_length >= target_seq_length:
      if current_chunk:
        # How many sentences of the chunk go into A.
        a_end = 1
        if len(current_chunk) >= 2:
          a_end = rng.randint(1, len(current_chunk) - 1)
        tokens_a = []
        for j in range(a_end):
          tokens_a.extend(current_chunk[j])

        tokens_b = []
        if len(current_chunk) == 1 or rng.random() < 0.5:
          is_random_next = True
          target_b_length = target_seq_length - len(tokens_a)
          # Try not to draw the same document (matters on tiny corpora).
          for _ in range(10):
            random_document_index = rng.randint(0, len(all_documents) - 1)
            if random_document_index != document_index:
              break
          random_document = all_documents[random_document_index]
          random_start = rng.randint(0, len(random_document) - 1)
          for j in range(random_start, len(random_document)):
            tokens_b.extend(random_document[j])
            if len(tokens_b) >= target_b_length:
              break
          # The unused sentences of this chunk go back for the next instance.
          num_unused_segments = len(current_chunk) - a_end
          i -= num_unused_segments
        else:
          is_random_next = False
          for j in range(a_end, len(current_chunk)):
            tokens_b.extend(current_chunk[j])
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        assert tokens_a and tokens_b

        tokens = [cls_id] + tokens_a + [sep_id] + tokens_b + [sep_id]
        segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
        tokens, positions, labels = create_masked_lm_predictions(
            tokens, masked_lm_prob, max_predictions_per_seq, vocab_size,
            special_ids, rng)
        instances.append(TrainingInstance(
            input_ids=tokens, segment_ids=segment_ids,
            masked_lm_positions=positions, masked_lm_ids=labels,
            is_random_next=is_random_next))
      current_chunk = []
      current_length = 0
    i += 1
  return instances


def create_training_instances(documents, max_seq_length, dupe_factor,
                              short_seq_prob, masked_lm_prob,
                              max_predictions_per_seq, vocab_size, special_ids,
                              rng) -> List[TrainingInstance]:
  """Shuffles documents, builds instances `dupe_factor` times, shuffles them."""
  all_documents = list(documents)
  rng.shuffle(all_documents)
  instances = []
  for _ in range(dupe_factor):
    for document_index in range(len(all_documents)):
      instances.extend(create_instances_from_document(
          all_documents, document_index, max_seq_length, short_seq_prob,
          masked_lm_prob, max_predictions_per_seq, vocab_size, special_ids,
          rng))
  rng.shuffle(instances)
  return instances


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def instance_to_example(instance: TrainingInstance, max_seq_length: int,
                        max_predictions_per_seq: int) -> tf.train.Example:
  """Pads an instance to fixed length and makes BERT's `tf.train.Example`."""
  n = len(instance.input_ids)
  assert n <= max_seq_length
  pad = max_seq_length - n
  input_ids = list(instance.input_ids) + [0] * pad
  input_mask = [1] * n + [0] * pad
  segment_ids = list(instance.segment_ids) + [0] * pad
  m = len(instance.masked_lm_positions)
  assert m <= max_predictions_per_seq
  mpad = max_predictions_per_seq - m
  features = collections.OrderedDict()
  features["input_ids"] = _int_feature(input_ids)
  features["input_mask"] = _int_feature(input_mask)
  features["segment_ids"] = _int_feature(segment_ids)
  features["masked_lm_positions"] = _int_feature(
      list(instance.masked_lm_positions) + [0] * mpad)
  features["masked_lm_ids"] = _int_feature(
      list(instance.masked_lm_ids) + [0] * mpad)
  features["masked_lm_weights"] = _float_feature([1.0] * m + [0.0] * mpad)
  features["next_sentence_labels"] = _int_feature(
      [1 if instance.is_random_next else 0])
  return tf.train.Example(features=tf.train.Features(feature=features))


def create_pretraining_data(input_files: Sequence[str],
                            vocab_file: str,
                            output_file: str,
                            max_seq_length: int = 128,
                            max_predictions_per_seq: int = 20,
                            masked_lm_prob: float = 0.15,
                            dupe_factor: int = 1,
                            short_seq_prob: float = 0.1,
                            random_seed: int = 12345,
                            do_lower_case: bool = True) -> int:
  """Writes BERT MLM/NSP pre-training TFRecords from raw text files.

  Every argument (and the vocabulary) is checked before anything is written;
  the records go to a temporary file renamed to `output_file` at the end, so
  an interrupted run leaves no partial `output_file`.

  Args:
    input_files: Text files, one sentence per line, blank line between
      documents (a list, or one comma-separated string).
    vocab_file: WordPiece vocabulary (see `tokenization.load_vocab`).
    output_file: The TFRecord file to write (its directory is created).
    max_seq_length: Fixed sequence length, >= 8.
    max_predictions_per_seq: Masked positions per sequence, >= 1.
    masked_lm_prob: Fraction of tokens to mask, in (0, 1).
    dupe_factor: Passes over the data, each with different masks, >= 1.
    short_seq_prob: Probability of a shorter target sequence, in [0, 1].
    random_seed: Seed of the `random.Random` behind every random choice; the
      same seed and inputs give byte-identical records, in any process.
    do_lower_case: Lower-case and strip accents (uncased vocabularies).

  Returns:
    The number of examples written.

  Raises:
    ValueError: For a missing or empty input file, a file that is not a
      vocabulary, a bad number, or input that yields no example; the message
      names the file, argument or value.
  """
  input_files = validate_arguments(input_files, output_file, max_seq_length,
                                   max_predictions_per_seq, masked_lm_prob,
                                   dupe_factor, short_seq_prob)
  vocab = tokenization.load_vocab(vocab_file)
  special_ids = {t: vocab.index(t) for t in tokenization.RESERVED_TOKENS}
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=do_lower_case)

  logging.info("Tokenizing %d input file(s): %s", len(input_files),
               ", ".join(input_files))
  documents = read_documents(input_files, tokenizer, max_seq_length)
  if not documents:
    raise ValueError(
        f"Input files {', '.join(input_files)} yield no tokens with "
        f"vocabulary {vocab_file!r}.")
  num_sentences = sum(len(d) for d in documents)
  num_tokens = sum(len(s) for d in documents for s in d)
  logging.info("%d documents, %d sentences, %d WordPieces.", len(documents),
               num_sentences, num_tokens)

  rng = random.Random(random_seed)
  instances = create_training_instances(
      documents, max_seq_length, dupe_factor, short_seq_prob, masked_lm_prob,
      max_predictions_per_seq, len(vocab), special_ids, rng)
  if not instances:
    raise ValueError(
        f"Input files {', '.join(input_files)} yield no training instance.")

  directory = os.path.dirname(output_file)
  if directory:
    tf.io.gfile.makedirs(directory)
  tmp_file = f"{output_file}.tmp-{os.getpid()}"
  try:
    with tf.io.TFRecordWriter(tmp_file) as writer:
      for instance in instances:
        example = instance_to_example(instance, max_seq_length,
                                      max_predictions_per_seq)
        # Deterministic serialization sorts the feature map; otherwise its
        # order (hence the bytes) changes with the Python hash seed.
        writer.write(example.SerializeToString(deterministic=True))
    tf.io.gfile.rename(tmp_file, output_file, overwrite=True)
  finally:
    if tf.io.gfile.exists(tmp_file):
      tf.io.gfile.remove(tmp_file)
  num_random = sum(inst.is_random_next for inst in instances)
  logging.info("Wrote %d examples (%d with a random next sentence) to %s",
               len(instances), num_random, output_file)
  return len(instances)


def default_data_dir() -> str:
  """`$REALFORMER_DATA_DIR`, else `<repo root>/../shared/data`."""
  repo_root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  return os.environ.get(
      "REALFORMER_DATA_DIR",
      os.path.join(os.path.dirname(repo_root), "shared", "data"))

