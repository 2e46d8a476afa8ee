r"""WikiText as BERT pre-training text (a document per article).

  python -m realformer_tf.data.wikitext \
    --input_files=$DATA/wikitext-2/valid.txt --output_file=/tmp/documents.txt
"""

import os
from typing import List, Sequence

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from realformer_tf import cli
from realformer_tf.data import corpus_text
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus

CONVERTED_FILE = "wikitext2_documents.txt"


def read_documents(path: str) -> List[List[str]]:
  """WikiText as documents of sentences.

  Each top-level heading (` = Title = `) starts an article (a document); the
  section headings (` = = ... = = `) are dropped and paragraphs are split
  into sentences with the quickstart corpus's splitter.
  """
  documents, current = [], []
  for line in pretraining_data.read_lines(path):
    text = line.strip()
    if not text:
      continue
    if text.startswith("= ") and text.endswith(" ="):
      if not text.startswith("= ="):
        if current:
          documents.append(current)
        current = []
      continue
    current.extend(quickstart_corpus.split_sentences(text))
  if current:
    documents.append(current)
  return documents


def default_files() -> List[str]:
  """WikiText-2 valid and test files in the shared data dir, or []."""
  wikitext_dir = os.path.join(corpus_text.default_data_dir(), "corpus",
                              "wikitext-2")
  files = [os.path.join(wikitext_dir, name)
           for name in ("valid.txt", "test.txt")]
  return files if all(os.path.exists(f) for f in files) else []


def write_bert_corpus(paths: Sequence[str], output_dir: str) -> str:
  """`output_dir/wikitext2_documents.txt` from `paths` (kept if present)."""
  converted = os.path.join(output_dir, CONVERTED_FILE)
  if not tf.io.gfile.exists(converted):
    documents = [doc for path in paths for doc in read_documents(path)]
    tf.io.gfile.makedirs(output_dir)
    quickstart_corpus.write_documents(converted, documents)
  return converted


def convert(paths: Sequence[str], output_file: str) -> List[List[str]]:
  """Writes `paths`' articles to `output_file` (BERT's text format, replaced
  whole) and returns them; before writing, a ValueError for an input that is
  missing or holds no ` = Title = ` heading (not WikiText)."""
  paths = pretraining_data.check_input_files(paths)
  documents = []
  for path in paths:
    if not any(line.startswith("= ") and line.endswith(" =") and
               not line.startswith("= =")
               for line in pretraining_data.read_lines(path)):
      raise ValueError(
          f"{path} has no ` = Title = ` line: not WikiText. Text already in "
          "BERT's format (a sentence a line, a blank line between documents) "
          "goes to --quickstart_input_files or create_pretraining_data as "
          "it is.")
    documents.extend(read_documents(path))
  tf.io.gfile.makedirs(os.path.dirname(os.path.abspath(output_file)))
  quickstart_corpus.write_documents(output_file, documents)
  logging.info("Wrote %s: %d articles, %d sentences.", output_file,
               len(documents), sum(len(d) for d in documents))
  return documents


def define_flags():
  """Defines the CLI flags (only when run as a program)."""
  flags.DEFINE_list("input_files", None, "WikiText files (e.g. WikiText-2's "
                    "valid.txt,test.txt or wiki.train.tokens).")
  flags.DEFINE_string("output_file", None, "BERT-format text to write.")
  flags.mark_flags_as_required(["input_files", "output_file"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  documents = convert(flags.FLAGS.input_files, flags.FLAGS.output_file)
  print(f"Wrote {flags.FLAGS.output_file}: {len(documents)} articles, "
        f"{sum(len(d) for d in documents)} sentences.", flush=True)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
