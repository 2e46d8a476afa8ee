"""WordPiece vocabularies, BERT tokenizers and the one BERT input packer.

`make_tokenizer` is tensorflow-text's `BertTokenizer`, `pack_inputs` Model
Garden's `BertPackInputs`. A vocabulary is one token per line (id = line
number) holding the five `RESERVED_TOKENS`, `[PAD]` at id 0.
"""

from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf
import tensorflow_text as tf_text

from official.nlp.modeling.layers import text_layers
from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import output_sets
from realformer_tf.data import wordpiece

PAD, UNK, CLS, SEP, MASK = (wordpiece.PAD, wordpiece.UNK, wordpiece.CLS,
                            wordpiece.SEP, wordpiece.MASK)
RESERVED_TOKENS = wordpiece.RESERVED_TOKENS


def load_vocab(path: str, vocab_size: Optional[int] = None) -> List[str]:
  """Reads and validates a WordPiece vocabulary file.

  Args:
    path: A text file with one token per line (line number = token id).
    vocab_size: The embedding rows of the model the vocabulary is for: a
      larger vocabulary is refused (it is not the model's), a smaller one is
      logged.

  Returns:
    The tokens, in id order.

  Raises:
    ValueError: Naming the file, if it is missing, empty, not UTF-8, not one
      distinct token per line, lacks a reserved token or exceeds `vocab_size`.
  """
  if not path or not tf.io.gfile.exists(path):
    raise ValueError(f"Vocabulary file {path!r} does not exist.")
  if tf.io.gfile.isdir(path):
    raise ValueError(f"Vocabulary file {path!r} is a directory, not a file.")
  with tf.io.gfile.GFile(path, "rb") as f:
    raw = f.read()
  if not raw.strip():
    raise ValueError(f"Vocabulary file {path!r} is empty.")
  try:
    lines = raw.decode("utf-8").split("\n")
  except UnicodeDecodeError as e:
    raise ValueError(f"Vocabulary file {path!r} is not UTF-8 text: {e}.") from e
  if lines[-1] == "":  # The usual trailing newline.
    lines.pop()
  not_wordpiece = f"Vocabulary file {path!r} is not a WordPiece vocabulary:"
  seen = {}  # token -> line number, in file order.
  for line_number, line in enumerate(lines, start=1):
    token = line.rstrip("\r")
    if not token.strip():
      raise ValueError(f"{not_wordpiece} line {line_number} is blank "
                       "(expected one token per line).")
    if token != token.strip() or len(token.split()) != 1:
      raise ValueError(
          f"{not_wordpiece} line {line_number} ({token[:40]!r}) is not a "
          "single token (expected one token per line, no whitespace).")
    if token in seen:
      raise ValueError(f"{not_wordpiece} token {token!r} appears on lines "
                       f"{seen[token]} and {line_number}.")
    seen[token] = line_number
  missing = [t for t in RESERVED_TOKENS if t not in seen]
  if missing:
    raise ValueError(
        f"Vocabulary file {path!r} is not a BERT WordPiece vocabulary: it "
        f"lacks the special token(s) {' '.join(missing)} (needs all of "
        f"{' '.join(RESERVED_TOKENS)}).")
  check_vocab_size(path, len(seen), vocab_size)
  return list(seen)


def check_vocab_size(path: str, tokens: int,
                     vocab_size: Optional[int]) -> None:
  """A vocabulary of `tokens` tokens fits a model of `vocab_size` embedding
  rows (None: no model): a larger one is refused, a smaller one logged."""
  if vocab_size is not None and tokens > vocab_size:
    raise ValueError(
        f"Vocabulary file {path!r} has {tokens} tokens, more than the "
        f"model's vocab_size={vocab_size}: it is not the vocabulary this model "
        "was trained with.")
  if vocab_size is not None and tokens != vocab_size:
    warn_padded_vocabulary(path, tokens, vocab_size)


def warn_padded_vocabulary(vocabulary: str, tokens: int,
                           vocab_size: int) -> None:
  """Warns that the word embedding has more rows than the vocabulary tokens
  (allowed: rows past the vocabulary are never looked up)."""
  logging.warning(
      "Vocabulary %s has %d tokens, but the model's vocab_size is %d: word "
      "embedding rows %d-%d are never looked up (a padded vocabulary). If "
      "that is not deliberate, set vocab_size=%d. Fine-tuning and export "
      "accept the run with this vocabulary, not another one.", vocabulary,
      tokens, vocab_size, tokens, vocab_size - 1, tokens)


def make_tokenizer(vocab_file: str,
                   lower_case: bool = True) -> tf_text.BertTokenizer:
  """A `tensorflow_text.BertTokenizer` over a validated vocabulary (a
  ValueError for an invalid one); `tokenize(strings)` gives int64 ids, ragged
  `[batch, words, wordpieces]`, uncovered words `[UNK]`. `lower_case`: also
  strip accents (uncased models).

  Not Model Garden's `text_layers.BertTokenizer`: its file table is shared
  per path (`TextFileInitializer`), so a rewritten vocabulary would be stale.
  """
  vocab = load_vocab(vocab_file)
  # `WordpieceTokenizer`'s table for a path; its OOV bucket is never looked up.
  table = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
      vocab, tf.range(len(vocab), dtype=tf.int64)), num_oov_buckets=1)
  return tf_text.BertTokenizer(
      table, token_out_type=tf.int64, unknown_token=UNK,
      lower_case=lower_case)


def pack_inputs(segments: Sequence[tf.RaggedTensor], seq_length: int,
                cls_id: int, sep_id: int) -> Dict[str, tf.Tensor]:
  """Packs one or two tokenized segments as BERT inputs.

  Model Garden's `BertPackInputs.bert_pack_inputs`: `[CLS] a [SEP] b [SEP]`,
  type ids 0 then 1, padded with id 0; a pair is cut by `RoundRobinTrimmer`.

  `segments`: one or two int ragged `[batch, tokens]`. Returns
  {input_word_ids, input_mask, input_type_ids}: int32 `[batch, seq_length]`.
  """
  # Padded with 0 whatever [PAD]'s id, as the records always were.
  features = text_layers.BertPackInputs.bert_pack_inputs(
      list(segments), seq_length, start_of_sequence_id=cls_id,
      end_of_segment_id=sep_id, padding_id=0)
  return {name: tf.cast(ids, tf.int32) for name, ids in features.items()}


def learn_vocab(word_counts: Mapping[str, int], vocab_size: int,
                output_file: str, **learn_params: Any) -> List[str]:
  """Writes `wordpiece.learn_vocab(word_counts, vocab_size, **learn_params)`
  (its size can be under `vocab_size`) to `output_file`, a new file, and
  returns it.

  Raises:
    ValueError: If `vocab_size` < 16 or there are no words.
    FileExistsError: If `output_file` exists.
  """
  # A vocabulary has no proof of its writer: a new file only (our writers
  # pass a path staged in their output set).
  ops = utils.GFILE_OPS  # ram:// calls a prefix of a file a folder.
  if ops.exists(output_file) and not ops.isdir(output_file):
    ownership.refuse_foreign([output_file])
  vocab = wordpiece.learn_vocab(word_counts, vocab_size, **learn_params)
  writes.replace_lines(output_file, vocab, utils.GFILE_OPS)
  logging.info("Wrote %d WordPiece tokens (target %s, from %d words) to %s",
               len(vocab), vocab_size, len(word_counts), output_file)
  return vocab


def vocab_meta(vocab_file: str) -> Dict[str, Any]:
  """The vocabulary's path, size and SHA-256, for the converters' meta data
  (records of one vocabulary are recognised under a model of another)."""
  return {"vocab_file": writes.absolute(vocab_file),
          "vocab_size": len(load_vocab(vocab_file)),
          "vocab_sha256": output_sets.file_sha256(vocab_file)}

