"""WordPiece vocabularies and BERT tokenizers, all through tensorflow-text.

Nothing here tokenizes by hand: `make_tokenizer` returns a
`tensorflow_text.BertTokenizer` (basic splitting, lower-casing and accent
stripping, then greedy longest-match WordPiece), and `learn_vocab` runs
`tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset`, which splits
words with the same basic tokenizer before learning sub-words.

A vocabulary file is one token per line; the token id is the line number. It
must hold the five BERT special tokens (`RESERVED_TOKENS`). Vocabularies
learned here put them first, so `[PAD]` is id 0 as the padding in the
pre-training records assumes; the published BERT vocabularies also have
`[PAD]` at 0 (and `[UNK]`=100, `[CLS]`=101, `[SEP]`=102, `[MASK]`=103).
"""

import hashlib
import os
from typing import Any, Dict, Iterable, List, Optional

from absl import logging
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
RESERVED_TOKENS = (PAD, UNK, CLS, SEP, MASK)

# Lines of text handed to the basic tokenizer at once while counting words.
_LEARN_BATCH_SIZE = 1024


def load_vocab(path: str) -> List[str]:
  """Reads and validates a WordPiece vocabulary file.

  Args:
    path: A text file with one token per line (line number = token id).

  Returns:
    The tokens, in id order.

  Raises:
    ValueError: If the file does not exist, is empty, is not UTF-8, has a blank
      line, a token with whitespace inside or a repeated token, or lacks any of
      [PAD] [UNK] [CLS] [SEP] [MASK]. The message names the file.
  """
  if not path:
    raise ValueError("No vocabulary file given (empty path).")
  if not tf.io.gfile.exists(path):
    raise ValueError(f"Vocabulary file {path!r} does not exist.")
  if tf.io.gfile.isdir(path):
    raise ValueError(f"Vocabulary file {path!r} is a directory, not a file.")
  with tf.io.gfile.GFile(path, "rb") as f:
    raw = f.read()
  if not raw.strip():
    raise ValueError(f"Vocabulary file {path!r} is empty.")
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(
        f"Vocabulary file {path!r} is not UTF-8 text: {e}.") from e
  lines = text.split("\n")
  if lines[-1] == "":  # The usual trailing newline.
    lines.pop()
  vocab = []
  seen = {}
  for line_number, line in enumerate(lines, start=1):
    token = line.rstrip("\r")
    if not token.strip():
      raise ValueError(
          f"Vocabulary file {path!r} is not a WordPiece vocabulary: line "
          f"{line_number} is blank (expected one token per line).")
    if token != token.strip() or len(token.split()) != 1:
      raise ValueError(
          f"Vocabulary file {path!r} is not a WordPiece vocabulary: line "
          f"{line_number} ({token[:40]!r}) is not a single token (expected "
          "one token per line, no whitespace).")
    if token in seen:
      raise ValueError(
          f"Vocabulary file {path!r} is not a WordPiece vocabulary: token "
          f"{token!r} appears on lines {seen[token]} and {line_number}.")
    seen[token] = line_number
    vocab.append(token)
  missing = [t for t in RESERVED_TOKENS if t not in seen]
  if missing:
    raise ValueError(
        f"Vocabulary file {path!r} is not a BERT WordPiece vocabulary: it "
        f"lacks the special token(s) {' '.join(missing)} (needs all of "
        f"{' '.join(RESERVED_TOKENS)}).")
  return vocab


def make_tokenizer(vocab_file: str,
                   lower_case: bool = True) -> tf_text.BertTokenizer:
  """Builds a `tensorflow_text.BertTokenizer` over a validated vocabulary.

  Args:
    vocab_file: WordPiece vocabulary file (see `load_vocab`).
    lower_case: Lower-case and strip accents first (uncased models).

  Returns:
    A `BertTokenizer` whose `tokenize(strings)` gives int64 ids as a
    `RaggedTensor` of shape [batch, words, wordpieces]; words not covered by
    the vocabulary become `[UNK]`.

  Raises:
    ValueError: If `vocab_file` is not a valid vocabulary.
  """
  vocab = load_vocab(vocab_file)
  # The table is built from the validated tokens (not by re-reading the file),
  # so ids are exactly the list positions `load_vocab` returned.
  table = tf.lookup.StaticVocabularyTable(
      tf.lookup.KeyValueTensorInitializer(
          keys=tf.constant(vocab, dtype=tf.string),
          values=tf.range(len(vocab), dtype=tf.int64)),
      num_oov_buckets=1)
  return tf_text.BertTokenizer(
      table, token_out_type=tf.int64, unknown_token=UNK,
      lower_case=lower_case)


def learn_vocab(text_lines: Iterable[str],
                vocab_size: int,
                output_file: str,
                lower_case: bool = True,
                learn_params: Optional[Dict[str, Any]] = None) -> List[str]:
  """Learns a WordPiece vocabulary with tensorflow-text and writes it.

  Uses `tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset`; the
  reserved tokens [PAD] [UNK] [CLS] [SEP] [MASK] come first ([PAD] = 0),
  then every single character seen, then the learned sub-words by falling
  count (they include every character as a `##` suffix). The learner searches an
  integer minimum count (>= 10) whose vocabulary is within 5% below
  `vocab_size`; the search can end outside that range, so the real size can
  be well under `vocab_size` on a small corpus and slightly over it when the
  characters alone nearly fill it. Use `len()` of the result.

  The file is written atomically (temporary name, then rename).

  Args:
    text_lines: Lines of raw text (blank lines are ignored).
    vocab_size: Target vocabulary size, at least 16.
    output_file: Where to write the vocabulary, one token per line.
    lower_case: Must match the `lower_case` of the tokenizer that will use it.
    learn_params: Extra keyword arguments of tensorflow-text's
      `wordpiece_tokenizer_learner_lib.learn` (e.g. `upper_thresh`).

  Returns:
    The vocabulary, in id order.

  Raises:
    ValueError: If `vocab_size` < 16 or `text_lines` holds no text.
  """
  if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
    raise ValueError(f"vocab_size must be an int, got {vocab_size!r}.")
  if vocab_size < 16:
    raise ValueError(f"vocab_size must be at least 16, got {vocab_size}.")
  if isinstance(text_lines, str):
    raise ValueError("text_lines must be an iterable of lines, not one str.")
  lines = [line.strip() for line in text_lines]
  lines = [line for line in lines if line]
  if not lines:
    raise ValueError(
        f"No text to learn a vocabulary from (for {output_file!r}).")
  logging.info("Learning a WordPiece vocabulary of up to %d tokens from %d "
               "lines.", vocab_size, len(lines))
  dataset = tf.data.Dataset.from_tensor_slices(
      tf.constant(lines, dtype=tf.string)).batch(_LEARN_BATCH_SIZE)
  vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
      dataset,
      vocab_size=vocab_size,
      reserved_tokens=list(RESERVED_TOKENS),
      bert_tokenizer_params={"lower_case": lower_case},
      learn_params=learn_params)
  if list(vocab[:len(RESERVED_TOKENS)]) != list(RESERVED_TOKENS):
    raise RuntimeError(
        "tensorflow-text did not put the reserved tokens first: "
        f"{vocab[:len(RESERVED_TOKENS)]}")
  write_lines_atomically(output_file, vocab)
  logging.info("Wrote %d WordPiece tokens to %s", len(vocab), output_file)
  return list(vocab)


def write_lines_atomically(path: str, lines: Iterable[str]) -> None:
  """Writes `lines` (one per line, UTF-8) to `path` via a temporary file."""
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  tmp_path = f"{path}.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(tmp_path, "w") as f:
    for line in lines:
      f.write(line + "\n")
  tf.io.gfile.rename(tmp_path, path, overwrite=True)


def file_sha256(path: str) -> str:
  """Hex SHA-256 of a file's bytes (read in 1 MB chunks)."""
  digest = hashlib.sha256()
  with tf.io.gfile.GFile(path, "rb") as f:
    while True:
      chunk = f.read(1 << 20)
      if not chunk:
        break
      digest.update(chunk)
  return digest.hexdigest()


def vocab_meta(vocab_file: str) -> Dict[str, Any]:
  """What the data converters record about their vocabulary in the meta data.

  `vocab_file` (absolute path), `vocab_size` (tokens) and `vocab_sha256` (of
  the file), so that records made with one vocabulary are recognised when a
  model trained with another is fine-tuned on them.
  """
  return {"vocab_file": os.path.abspath(vocab_file),
          "vocab_size": len(load_vocab(vocab_file)),
          "vocab_sha256": file_sha256(vocab_file)}
