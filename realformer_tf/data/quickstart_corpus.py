r"""A small, self-contained pre-training set for the quickstart experiment.

`prepare_quickstart_data(data_dir)` writes the corpus, a learned WordPiece
vocabulary, MLM/NSP records and a manifest, as one cached output set. The
default text is the shipped docstrings of standard library modules
(`STDLIB_CORPUS_FILE`), so nothing is downloaded.
"""

import importlib
import inspect
import os
import re
import sys
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from realformer_tf import cli
from realformer_tf.core import writes
from realformer_tf.data import corpus_text
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf import utils
from realformer_tf.data import pretraining_data
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

# The default corpus' modules: importable on every platform and build (no
# GUI, test suites, optional C extensions, import side effects, deprecations).
STDLIB_MODULES = (
    "abc", "argparse", "ast", "asyncio", "asyncio.base_events",
    "asyncio.events", "asyncio.exceptions", "asyncio.locks",
    "asyncio.protocols", "asyncio.queues", "asyncio.runners",
    "asyncio.streams", "asyncio.tasks", "asyncio.transports", "base64", "bdb",
    "binascii", "bisect", "builtins", "calendar", "cmath", "cmd", "code",
    "codecs", "codeop", "collections", "collections.abc", "colorsys",
    "compileall", "concurrent.futures", "concurrent.futures.process",
    "concurrent.futures.thread", "configparser", "contextlib", "contextvars",
    "copy", "copyreg", "csv", "dataclasses", "datetime", "decimal", "difflib",
    "dis", "doctest", "email", "email.charset", "email.encoders",
    "email.errors", "email.feedparser", "email.generator", "email.header",
    "email.headerregistry", "email.iterators", "email.message",
    "email.parser", "email.policy", "email.utils", "encodings", "enum",
    "errno", "filecmp", "fileinput", "fnmatch", "fractions", "ftplib",
    "functools", "gc", "getopt", "getpass", "gettext", "glob", "graphlib",
    "hashlib", "heapq", "hmac", "html", "html.parser", "http", "http.client",
    "http.cookiejar", "http.cookies", "http.server", "imaplib", "importlib",
    "importlib.abc", "importlib.metadata", "importlib.resources",
    "importlib.util", "inspect", "io", "ipaddress", "itertools", "json",
    "json.decoder", "json.encoder", "keyword", "linecache", "locale",
    "logging", "logging.config", "logging.handlers", "mailbox", "marshal",
    "math", "mimetypes", "modulefinder", "multiprocessing",
    "multiprocessing.connection", "multiprocessing.context",
    "multiprocessing.managers", "multiprocessing.pool",
    "multiprocessing.process", "multiprocessing.shared_memory", "netrc",
    "numbers", "operator", "optparse", "os", "pathlib", "pdb", "pickle",
    "pickletools", "pkgutil", "platform", "plistlib", "poplib", "pprint",
    "profile", "pstats", "py_compile", "pyclbr", "pydoc", "queue", "quopri",
    "random", "re", "reprlib", "rlcompleter", "runpy", "sched", "secrets",
    "selectors", "shelve", "shlex", "shutil", "signal", "site", "smtplib",
    "socket", "socketserver", "stat", "statistics", "string", "stringprep",
    "struct", "subprocess", "symtable", "sys", "sysconfig", "tabnanny",
    "tarfile", "tempfile", "textwrap", "threading", "time", "timeit", "token",
    "tokenize", "trace", "traceback", "tracemalloc", "types", "typing",
    "unicodedata", "unittest", "unittest.case", "unittest.loader",
    "unittest.mock", "unittest.result", "unittest.runner", "unittest.suite",
    "urllib.error", "urllib.parse", "urllib.request", "urllib.response",
    "urllib.robotparser", "uuid", "warnings", "wave", "weakref", "webbrowser",
    "wsgiref.handlers", "wsgiref.headers", "wsgiref.simple_server",
    "wsgiref.util", "wsgiref.validate", "xml.dom", "xml.dom.expatbuilder",
    "xml.dom.minidom", "xml.dom.pulldom", "xml.etree.ElementTree",
    "xml.parsers.expat", "xml.sax", "xml.sax.expatreader", "xml.sax.handler",
    "xml.sax.saxutils", "xml.sax.xmlreader", "xmlrpc.client", "xmlrpc.server",
    "zipapp", "zipfile", "zipimport", "zoneinfo",
)

# The shipped corpus and the CPython that built it (`corpus_text`).
STDLIB_CORPUS_FILE = corpus_text.STDLIB_CORPUS_FILE
STDLIB_CORPUS_PYTHON = corpus_text.STDLIB_CORPUS_PYTHON

MANIFEST = "manifest.json"
_TRAIN_TEXT = "corpus_train.txt"
_EVAL_TEXT = "corpus_eval.txt"
_VOCAB = "vocab.txt"
_TRAIN_RECORDS = "train.tfrecord"
_EVAL_RECORDS = "eval.tfrecord"
# Bump when the way the files are made changes, so old caches are rebuilt.
_FORMAT_VERSION = 5
# Named in `output_sets` errors: the module that rewrites the cache.
WRITER = "realformer_tf.data.quickstart_corpus"
# Shortest sentence kept in the stdlib corpus, in characters.
_MIN_SENTENCE_CHARS = 3

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`*])")
# A doctest example: a `>>>` line with its `...` continuations and its
# expected output, which runs up to the next blank line.
_DOCTEST_EXAMPLE = re.compile(r"^[ \t]*>>>.*?(?=\n[ \t]*\n|\n[ \t]*\Z|\Z)",
                              re.M | re.S)


def split_sentences(paragraph: str) -> List[str]:
  """Splits one paragraph into sentences (after '.', '!' or '?')."""
  return [s for s in _SENTENCE_END.split(" ".join(paragraph.split()))
          if len(s) >= _MIN_SENTENCE_CHARS]


def docstring_sentences(doc: Optional[str]) -> List[str]:
  """A docstring as sentences: paragraphs split, doctest examples dropped."""
  if not doc or not isinstance(doc, str):
    return []
  text = _DOCTEST_EXAMPLE.sub("", inspect.cleandoc(doc))
  return [sentence for paragraph in re.split(r"\n\s*\n", text)
          for sentence in split_sentences(paragraph)]


def module_document(module) -> List[str]:
  """Sentences of a module's docstring and of its public members'.

  `__doc__`, not `inspect.getdoc`: a member without a docstring of its own
  adds nothing rather than its base class's text.
  """
  sentences = docstring_sentences(module.__doc__)
  name = module.__name__
  for attr, obj in sorted(vars(module).items()):
    # Skip names re-exported from other modules; keep a C accelerator's
    # (e.g. `heapq.heappush` comes from `_heapq`).
    if attr.startswith("_") or not (
        inspect.isclass(obj) or inspect.isroutine(obj)) or (
            name != "builtins" and
            getattr(obj, "__module__", None) not in (name, "_" + name)):
      continue
    sentences.extend(docstring_sentences(obj.__doc__))
    for member_name, member in sorted(vars(obj).items()
                                      if inspect.isclass(obj) else []):
      if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
      if not member_name.startswith("_") and (
          inspect.isroutine(member) or isinstance(member, property)):
        sentences.extend(docstring_sentences(member.__doc__))
  return sentences


def build_stdlib_documents() -> List[List[str]]:
  """One document of sentences per `STDLIB_MODULES` entry, from the running
  Python's docstrings; a module that does not import is skipped (logged)."""
  documents, skipped = [], []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for name in STDLIB_MODULES:
      try:
        documents.append(module_document(importlib.import_module(name)))
      except ImportError:
        skipped.append(name)
  if skipped:
    logging.warning("Standard library modules not importable here, skipped: "
                    "%s", ", ".join(skipped))
  return [document for document in documents if document]


def stdlib_documents() -> List[List[str]]:
  """The default corpus as shipped (`STDLIB_CORPUS_FILE`), the same on every
  Python; FileNotFoundError if the package lacks it."""
  return corpus_text.stdlib_documents(STDLIB_CORPUS_FILE)


def write_documents(path: str, documents: List[List[str]]) -> None:
  """Writes documents in BERT's format: a line a sentence, a blank after each."""
  writes.replace_lines(path, [line for document in documents
                               for line in document + [""]], utils.GFILE_OPS)


def write_stdlib_corpus(path: str) -> int:
  """Writes `build_stdlib_documents()` gzipped (`utils.gzip_bytes`: the same
  bytes on every Python) to `path`; returns its size."""
  documents = build_stdlib_documents()
  text = "".join(line + "\n" for document in documents
                 for line in document + [""])
  data = utils.gzip_bytes(text.encode("utf-8"))
  with writes.staged(path, writes.OS_OPS) as tmp, open(tmp, "wb") as f:
    f.write(data)
  logging.info("Wrote %s: %d documents, %d bytes, from Python %s.", path,
               len(documents), len(data), "%d.%d.%d" % sys.version_info[:3])
  return len(data)


def _cached_manifest(data_dir: str, key: dict) -> Optional[dict]:
  """`data_dir`'s manifest if it is for `key` and its outputs are unchanged."""
  manifest_path = os.path.join(data_dir, MANIFEST)
  manifest = output_sets.read_manifest(manifest_path)
  if (not isinstance(manifest, dict) or manifest.get("key") != key or
      output_sets.FILES_KEY not in manifest):
    return None
  mismatch = output_sets.find_mismatch(manifest_path, manifest)
  if mismatch:
    logging.info("Cached quickstart data: %s; rebuilding.", mismatch)
    return None
  return manifest


def _result(data_dir: str, key: dict, counts: dict) -> Dict[str, object]:
  """What `prepare_quickstart_data` returns; it logs which corpus it is."""
  python = key["python"] and ".".join(key["python"].split(".")[:2])
  logging.info("Quickstart corpus: %s.", f"docstrings of the Python {python} "
               "standard library, shipped in the package" if python
               else "your input files")
  return dict(train_file=os.path.join(data_dir, _TRAIN_RECORDS),
              eval_file=os.path.join(data_dir, _EVAL_RECORDS),
              vocab_file=os.path.join(data_dir, _VOCAB), python=python,
              **{name: counts[name] for name in (
                  "vocab_size", "num_train_examples", "num_eval_examples")})


def data_key(data_dir: str, input_files: Optional[Sequence[str]] = None,
             vocab_size: int = 4000, max_seq_length: int = 64,
             max_predictions_per_seq: int = 10, dupe_factor: int = 1,
             eval_fraction: float = 0.05, seed: int = 0) -> dict:
  """The cache key `prepare_quickstart_data` records in its manifest (the
  arguments, the corpus' SHA-256), after checking them; writes nothing."""
  if not data_dir:
    raise ValueError("data_dir is required.")
  if input_files is not None:
    input_files = [os.path.abspath(f) for f in
                   pretraining_data.check_input_files(input_files)]
  if not 0.0 < float(eval_fraction) < 1.0:
    raise ValueError(f"eval_fraction must be in (0, 1), got {eval_fraction}.")
  if vocab_size < 16:
    raise ValueError(f"vocab_size must be at least 16, got {vocab_size}.")
  pretraining_data.check_instance_options(
      max_seq_length, max_predictions_per_seq, masked_lm_prob=0.15,
      dupe_factor=dupe_factor, short_seq_prob=0.1)
  if tf.io.gfile.exists(data_dir) and not tf.io.gfile.isdir(data_dir):
    raise ValueError(f"data_dir {data_dir!r} exists and is not a directory.")
  return dict(
      format_version=_FORMAT_VERSION,
      corpus=("files" if input_files else "stdlib-docstrings"),
      inputs=([dict(path=f, sha256=output_sets.file_sha256(f))
               for f in input_files] if input_files else None),
      # The shipped corpus: which Python built it, and its bytes (the
      # running Python does not matter).
      python=None if input_files else STDLIB_CORPUS_PYTHON,
      stdlib_corpus_sha256=(None if input_files else
                            output_sets.file_sha256(STDLIB_CORPUS_FILE)),
      vocab_size=vocab_size, max_seq_length=max_seq_length,
      max_predictions_per_seq=max_predictions_per_seq,
      dupe_factor=dupe_factor, eval_fraction=float(eval_fraction), seed=seed)


def recorded_key(data_dir: str) -> Tuple[str, Optional[dict]]:
  """(manifest path, the key the data in `data_dir` was built for), the key
  None when there is no readable manifest; writes nothing."""
  path = os.path.join(data_dir, MANIFEST)
  manifest = output_sets.read_manifest(path)
  key = manifest.get("key") if manifest else None
  return path, key if isinstance(key, dict) else None


def cached_data(data_dir: str, key: dict) -> Optional[Dict[str, object]]:
  """What `prepare_quickstart_data` would return for `key` without writing
  (the data in `data_dir` is for `key` and unchanged), else None."""
  manifest = _cached_manifest(data_dir, key)
  return _result(data_dir, key, manifest["counts"]) if manifest else None


def prepare_quickstart_data(
    data_dir: str, input_files: Optional[Sequence[str]] = None,
    vocab_size: int = 4000, max_seq_length: int = 64,
    max_predictions_per_seq: int = 10, dupe_factor: int = 1,
    eval_fraction: float = 0.05, seed: int = 0) -> Dict[str, object]:
  """Builds (or reuses) the quickstart vocabulary and MLM/NSP records.

  Args:
    data_dir: Output directory (created if needed).
    input_files: BERT-format text files (one sentence per line, blank line
      between documents); None for the standard library docstring corpus.
    vocab_size: Target WordPiece vocabulary size (>= 16); the learned one can
      be smaller, see the returned `vocab_size`.
    max_seq_length: Fixed sequence length (>= 8).
    max_predictions_per_seq: Masked positions per sequence (>= 1).
    dupe_factor: Copies of the train split, each with its own masks (>= 1);
      the eval split is written once.
    eval_fraction: Fraction of documents held out (at least one), in (0, 1).
    seed: Seed for the split and for building the records.

  Returns:
    dict(train_file, eval_file, vocab_file, vocab_size (the real size),
    num_train_examples, num_eval_examples, python: the Python that built the
    shipped corpus ("3.11"), None for `input_files`).

  Raises:
    ValueError: Before writing anything, for a bad argument, a missing or
      empty input file, or fewer than two documents.
  """
  key = data_key(data_dir, input_files, vocab_size, max_seq_length,
                 max_predictions_per_seq, dupe_factor, eval_fraction, seed)
  input_files = [f["path"] for f in key["inputs"] or []]
  writes.sweep(data_dir, utils.GFILE_OPS)  # Before the cache: a killed run.
  manifest = _cached_manifest(data_dir, key)
  if manifest:
    logging.info("Quickstart data in %s is up to date (cache hit).", data_dir)
    return _result(data_dir, key, manifest["counts"])

  if input_files:
    logging.info("Reading quickstart corpus from %s", ", ".join(input_files))
    documents = [document for path in input_files
                 for document in pretraining_data.text_documents(path)]
  else:
    logging.info("Reading the quickstart corpus (docstrings of %d standard "
                 "library modules) from %s.", len(STDLIB_MODULES),
                 STDLIB_CORPUS_FILE)
    documents = stdlib_documents()
  corpus_text.check_documents(
      len(documents),
      f"The quickstart corpus ({', '.join(input_files or ['stdlib'])})",
      "a train/eval split", "separate documents with a blank line")
  train_docs, eval_docs = corpus_text.split_documents(documents,
                                                      eval_fraction, seed)
  num_eval = len(eval_docs)
  num_chars = sum(len(s) + 1 for d in documents for s in d)
  logging.info("Corpus: %d documents, %d sentences, %.2f MB; %d for eval.",
               len(documents), sum(len(d) for d in documents),
               num_chars / 1e6, num_eval)

  names = (_TRAIN_TEXT, _EVAL_TEXT, _VOCAB)
  with output_sets.output_set(
      os.path.join(data_dir, MANIFEST), WRITER,
      [os.path.join(data_dir, name)
       for name in names + (_TRAIN_RECORDS, _EVAL_RECORDS)]) as outputs:
    train_text, eval_text, vocab_file = (
        outputs.stage(os.path.join(data_dir, name)) for name in names)
    write_documents(train_text, train_docs)
    write_documents(eval_text, eval_docs)
    vocab = tokenization.learn_vocab(
        wordpiece.count_words(s for d in train_docs for s in d), vocab_size,
        vocab_file, upper_thresh=wordpiece.QUICKSTART_UPPER_THRESH)
    counts = dict(vocab_size=len(vocab), num_train_documents=len(train_docs),
                  num_eval_documents=len(eval_docs))
    for split, text, records, split_seed, split_dupes in (
        ("train", train_text, _TRAIN_RECORDS, seed, dupe_factor),
        ("eval", eval_text, _EVAL_RECORDS, seed + 1, 1)):
      counts[f"num_{split}_examples"] = (
          pretraining_data.create_pretraining_data(
              [text], vocab_file, os.path.join(data_dir, records),
              max_seq_length, max_predictions_per_seq,
              dupe_factor=split_dupes, random_seed=split_seed,
              output_set=outputs))
    outputs.commit(dict(key=key, counts=counts,
                        records=record_facts.listing(outputs.staged)))
  logging.info("Quickstart data written to %s: %s", data_dir, counts)
  return _result(data_dir, key, counts)


def define_flags():
  """Defines the CLI flag (only when run as a program)."""
  flags.DEFINE_string(
      "write_stdlib_corpus", None,
      "Rebuild the shipped corpus from this Python's docstrings, to this path "
      f"(the package's: {STDLIB_CORPUS_FILE}); then set STDLIB_CORPUS_PYTHON.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not flags.FLAGS.write_stdlib_corpus:
    raise app.UsageError("--write_stdlib_corpus=PATH is required.")
  write_stdlib_corpus(flags.FLAGS.write_stdlib_corpus)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
