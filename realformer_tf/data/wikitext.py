"""WikiText (tokenized: a paragraph a line under ` = Title = ` headings) as
BERT pre-training text (a sentence a line, a blank line between documents).
"""

import os
from typing import List, Sequence

import tensorflow as tf

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
  wikitext_dir = os.path.join(pretraining_data.default_data_dir(), "corpus",
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
