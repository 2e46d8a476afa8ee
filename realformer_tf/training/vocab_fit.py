"""A vocabulary against the checkpoint it is used with: one token a row.

A model's word embedding has one row per token id. Fine-tuning or exporting
with a vocabulary of another size than the checkpoint's embedding rows runs
without an error (ids below the row count look up rows trained for other
tokens; Model Garden restores by shape, and the token-id range check passes
a smaller vocabulary) and learns or serves nonsense: the README's
fine-tuning from a quickstart run whose `vocab.txt` had been rebuilt gave
MRPC accuracy 0.316, F1 0.000, with exit 0. So the sizes are compared from
the checkpoint's own variable shapes (no model is built).
"""

import re
from typing import Optional, Tuple

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf.checkpoints import run_directory
from realformer_tf.data import output_sets
from realformer_tf.data import tokenization
from realformer_tf.training import input_checks

# Checkpoint keys of a word-embedding table, best first: a TF2 object-based
# checkpoint of Model Garden's BERT encoders (`_embedding_layer`, i.e.
# `OnDeviceEmbedding(name="word_embeddings")`); the masked-LM head's tied
# `embedding_table`, under which a pre-training checkpoint saves the shared
# variable; TF1 BERT's `bert/embeddings/word_embeddings`.
_WORD_EMBEDDING_KEYS = (
    re.compile(r"(^|/)_embedding_layer/embeddings/\.ATTRIBUTES/"
               r"VARIABLE_VALUE$"),
    re.compile(r"(^|/)embedding_table/\.ATTRIBUTES/VARIABLE_VALUE$"),
    re.compile(r"(^|/)word_embeddings(/embeddings)?(:0)?$"),
)


def embedding_rows(checkpoint: str) -> Optional[Tuple[str, int, str]]:
  """(checkpoint prefix, rows, key) of the word embedding in `checkpoint` (a
  prefix, or a directory's newest readable one); None if it has none that
  `_WORD_EMBEDDING_KEYS` knows. Reads the shape map only."""
  path = run_directory.resolve_checkpoint(checkpoint, "checkpoint")
  shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
  for pattern in _WORD_EMBEDDING_KEYS:
    found = sorted(key for key, shape in shapes.items()
                   if pattern.search(key) and len(shape) == 2)
    if found:
      # The shortest key: the model's own table, not a copy nested deeper.
      key = min(found, key=len)
      return path, int(shapes[key][0]), key
  return None


def trained_vocab_sha256(config: cfg.ExperimentConfig) -> Optional[str]:
  """The SHA-256 of the vocabulary a run's training records were converted
  with, as their converter recorded it then (`<task>_meta_data.json` and
  the like: `tokenization.vocab_meta`); None if unrecorded. Unlike the
  vocabulary file the run names, it cannot have been rebuilt since."""
  data = getattr(config.task, "train_data", None)
  input_path = getattr(data, "input_path", "") if data else ""
  if not input_path or input_path == "dummy":
    return None
  files = tf.io.gfile.glob(str(input_path).split(",")[0])
  meta = input_checks.meta_data_of(files[0]) if files else None
  return meta[1].get("vocab_sha256") if meta else None


def check_vocab_fits(vocab_file: str, vocab_key: str, checkpoint: str,
                     checkpoint_key: str,
                     trained_sha256: Optional[str] = None) -> None:
  """Raises ValueError, naming both files and sizes, unless the vocabulary
  `vocab_file` (set by `vocab_key`) fits `checkpoint` (set by
  `checkpoint_key`). The one rule, for fine-tuning and export alike: one
  token per word-embedding row; or fewer tokens when `vocab_file` is the
  vocabulary the checkpoint was trained with (its SHA-256 is
  `trained_sha256`, `trained_vocab_sha256` of the run): a padded embedding,
  which training allows with a warning (`tokenization.
  warn_padded_vocabulary`), whose rows past the vocabulary no id reaches.
  Any other smaller vocabulary (one rebuilt beside the checkpoint, issue 30)
  is refused: its ids would not be the ones the model learned."""
  found = embedding_rows(checkpoint)
  if found is None:
    logging.warning("%s=%s: no word embedding found among its variables; "
                    "its size is not compared with %s=%s.", checkpoint_key,
                    checkpoint, vocab_key, vocab_file)
    return
  path, rows, key = found
  size = len(tokenization.load_vocab(vocab_file))
  if (size < rows and trained_sha256 and
      output_sets.file_sha256(vocab_file) == trained_sha256):
    logging.info("%s=%s: %d tokens for %d embedding rows, the vocabulary "
                 "the checkpoint was trained with (a padded embedding).",
                 vocab_key, vocab_file, size, rows)
    return
  if size != rows:
    raise ValueError(
        f"{vocab_key}={vocab_file!r} has {size} tokens, but the word "
        f"embedding of {checkpoint_key}={checkpoint!r} ({path}: {key}) has "
        f"{rows} rows: the token ids would not match what the model learned. "
        "Use the vocabulary the checkpoint was trained with (and data "
        "converted with it).")
