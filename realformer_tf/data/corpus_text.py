"""Pre-training text without TensorFlow: BERT-format files, the shipped
quickstart corpus and its held-out split (for the Keras 3 reproduction),
and where the real data sets are (`default_data_dir`).
"""

import bz2
import gzip
import itertools
import os
import random
from typing import BinaryIO, List, Sequence, Tuple

# The shipped corpus (BERT's text format, `utils.gzip_bytes`: the same text
# gives the same bytes on every Python) and the CPython whose docstrings it
# holds; setup.py's package_data ships it. See `quickstart_corpus`.
STDLIB_CORPUS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "quickstart_stdlib_corpus.txt.gz")
STDLIB_CORPUS_PYTHON = "3.11.7"


# Compressed files by their first bytes: (magic, what, suffix we read).
_COMPRESSED = ((b"\x1f\x8b", "gzip", ".gz"), (b"BZh", "bzip2", ".bz2"),
               (b"\xfd7zXZ\x00", "xz", None), (b"(\xb5/\xfd", "zstd", None),
               (b"PK\x03\x04", "zip", None))
# Corpus files whose name says they are compressed, read decompressed.
_DECOMPRESS = {".gz": gzip.open, ".bz2": bz2.open}


def decompressed(path: str, f: BinaryIO) -> BinaryIO:
  """`f`, the open binary file `path`, decompressed if `path` ends with .gz
  or .bz2 (the suffixes Beam's `CompressionTypes.AUTO` reads)."""
  opener = _DECOMPRESS.get(os.path.splitext(path)[1])
  return opener(f, "rb") if opener else f


def not_utf8(path: str, data: bytes, error: UnicodeDecodeError,
             line: int, offset: int = 0) -> ValueError:
  """The error for bytes `data` (line `line`, at byte `offset` of `path`);
  a compressed file (by its magic bytes at the start) is named as one."""
  for magic, what, suffix in _COMPRESSED if line == 1 and not offset else ():
    if data.startswith(magic):
      return ValueError(
          f"{path}: a {what}-compressed file, not text: " +
          (f"name it *{suffix} to have it read decompressed, or decompress it."
           if suffix else "decompress it first (.gz and .bz2 files are read "
           "as they are)."))
  return ValueError(
      f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x} at offset "
      f"{offset + error.start}): a binary file, or text in another encoding "
      "(convert it, e.g. iconv -f latin1 -t utf-8).")


def decode_lines(data: bytes, path: str) -> List[str]:
  """UTF-8 bytes of `path` as stripped lines (else ValueError: `not_utf8`)."""
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise not_utf8(path, data, e, data.count(b"\n", 0, e.start) + 1) from None
  return [line.strip() for line in text.split("\n")]


def documents_of_lines(lines: Sequence[str]) -> List[List[str]]:
  """BERT's format: documents are runs of non-blank lines between blanks."""
  return [list(group) for non_blank, group in
          itertools.groupby(lines, key=bool) if non_blank]


def text_documents(path: str) -> List[List[str]]:
  """A local BERT-format file's documents, .gz and .bz2 decompressed
  (`decode_lines`' errors)."""
  with open(path, "rb") as f:
    return documents_of_lines(decode_lines(decompressed(path, f).read(), path))


def stdlib_documents(path: str = STDLIB_CORPUS_FILE) -> List[List[str]]:
  """The quickstart's default corpus, as shipped: the same on every Python."""
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"The quickstart corpus {path} is missing: reinstall "
        "realformer_tf (setup.py's package_data ships it), or rebuild it with "
        "`python -m realformer_tf.data.quickstart_corpus "
        f"--write_stdlib_corpus={path}`.")
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return documents_of_lines(f.read().split("\n"))


def check_documents(count: int, what: str, purpose: str, instead: str
                   ) -> None:
  """Refuses fewer than 2 documents (ValueError naming `what`, `purpose` and
  `instead`): a held-out one needs another, and so does a random next
  sentence (Model Garden's takes it from the same one, labelled random)."""
  if count < 2:
    raise ValueError(f"{what} has {count} document(s); at least 2 are needed "
                     f"for {purpose} ({instead}).")


def split_documents(documents: Sequence[List[str]], eval_fraction: float,
                    seed: int) -> Tuple[List[List[str]], List[List[str]]]:
  """(train, eval) documents: `eval_fraction` of them (at least one, never
  all) held out by a seeded shuffle, each part in corpus order."""
  if not 0.0 < float(eval_fraction) < 1.0:
    raise ValueError(f"eval_fraction must be in (0, 1), got {eval_fraction}.")
  check_documents(len(documents), "The corpus", "a train/eval split",
                  "separate documents with a blank line")
  num_eval = min(len(documents) - 1,
                 max(1, int(round(len(documents) * eval_fraction))))
  order = list(range(len(documents)))
  random.Random(seed).shuffle(order)
  return ([documents[i] for i in sorted(order[num_eval:])],
          [documents[i] for i in sorted(order[:num_eval])])


def default_data_dir() -> str:
  """`$REALFORMER_DATA_DIR`, else `<repo root>/../shared/data`."""
  repo_root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  return os.environ.get(
      "REALFORMER_DATA_DIR",
      os.path.join(os.path.dirname(repo_root), "shared", "data"))
