"""The real data tests may use, and the handmade stand-ins shipped with them.

Real data is found only through `REALFORMER_DATA_DIR` (default
`<repo>/../shared/data`, `corpus_text.default_data_dir`). A test that is
*about* a real file (its row count, BERT's ids) calls `real(...)` and is
skipped, naming the path, when the file is absent. A test that only needs
*some* file of that kind calls `real_or_fixture(...)`: the real file when it is
there, else a few-row fixture in `tests/testdata/` (handmade, never a copy of
the shared data), so that it runs in every checkout.

Fixtures (`tests/testdata/`):
- `vocab.txt`: an uncased WordPiece vocabulary (BERT's five special tokens,
  ASCII punctuation, digits, letters and their `##` forms, so every ASCII word
  has a tokenization, plus whole words used by the tests' texts).
- `glue/MRPC/{train,dev}.tsv`: 16 + 16 handmade pairs in GLUE's MRPC format
  (UTF-8 BOM, header, five columns).
- `corpus/wikitext-2/valid.txt`: handmade paragraphs in WikiText's tokenized
  format (` = Title = ` headings, ` @-@ `, one paragraph a line).
"""
import os
from typing import Tuple

import pytest

from realformer_tf.data import corpus_text

DATA_DIR = corpus_text.default_data_dir()
FIXTURE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "testdata")

BERT_VOCAB = "vocab/bert-base-uncased-vocab.txt"
MRPC_DIR = "glue/MRPC"
WIKITEXT_VALID = "corpus/wikitext-2/valid.txt"
SQUAD_DEV_V11 = "squad/dev-v1.1.json"

# Real file -> its stand-in under FIXTURE_DIR.
_FIXTURES = {
    BERT_VOCAB: "vocab.txt",
    MRPC_DIR: MRPC_DIR,
    WIKITEXT_VALID: WIKITEXT_VALID,
}


def real(relpath: str) -> str:
  """The shared data file (or folder) `relpath`; skips the test without it."""
  path = os.path.join(DATA_DIR, relpath)
  if not os.path.exists(path):
    pytest.skip(f"{path} not found (set REALFORMER_DATA_DIR to the shared "
                "data directory; see its README.md)")
  return path


def real_or_fixture(relpath: str) -> Tuple[str, bool]:
  """(path, is_real): the shared file when present, else its fixture."""
  path = os.path.join(DATA_DIR, relpath)
  if os.path.exists(path):
    return path, True
  return os.path.join(FIXTURE_DIR, _FIXTURES[relpath]), False


def vocab_file() -> str:
  """The BERT uncased vocabulary, or the fixture vocabulary without it."""
  return real_or_fixture(BERT_VOCAB)[0]


def vocab_size(path: str) -> int:
  with open(path, encoding="utf-8") as f:
    return len(f.read().splitlines())
