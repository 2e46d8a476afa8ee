r"""WordPiece vocabulary learning on a large corpus: each learner's seconds.

`--write_corpus` first writes a corpus (one sentence per line, a blank line
between documents) of the docstrings of a site-packages tree (read with `ast`,
nothing imported) and the WikiText-2 files of ../shared/data, up to `--mb` MB
in `--files` files. Then, each in this process, on all files but the last:
counting words (`wordpiece.count_words`), the project's learner
(`wordpiece.learn_vocab`) and Hugging Face `tokenizers`' `WordPieceTrainer`
on the same counts, and that trainer from the text (its own Rust counting,
BertNormalizer + BertPreTokenizer). Each vocabulary tokenizes the last
file's first `--held_out` lines with its own face's tokenizer and with
tensorflow-text's `BertTokenizer` (serving): the share of lines with equal
ids. Prints one JSON object.

usage:
  python benchmarks/vocab_learning.py --write_corpus --corpus_dir=/tmp/c60
  python benchmarks/vocab_learning.py --corpus_dir=/tmp/c60 --vocab_size=8000
"""

import ast
import glob
import json
import os
import sys
import sysconfig
import time

import tensorflow as tf
import tokenizers
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import trainers

from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

import timing  # pylint: disable=g-bad-import-order  (benchmarks/)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--corpus_dir", required=True)
  p.add_argument("--write_corpus", action="store_true",
                 help="Write the corpus into --corpus_dir first.")
  p.add_argument("--mb", type=float, default=60.0, help="Corpus size.")
  p.add_argument("--files", type=int, default=17, help="Corpus files.")
  p.add_argument("--site_packages", default=sysconfig.get_paths()["purelib"])
  p.add_argument("--wikitext", default=os.path.join(
      REPO_ROOT, "..", "shared", "data", "corpus", "wikitext-2"))
  p.add_argument("--vocab_size", type=int, default=8000)
  p.add_argument("--held_out", type=int, default=20000)
  return p


def _documents(site_packages, wikitext):
  """Documents (lists of sentences): WikiText-2's articles, then each
  docstring of each module under `site_packages`, in path order."""
  for path in sorted(glob.glob(os.path.join(wikitext, "*.txt"))):
    with open(path, encoding="utf-8") as f:
      text = f.read()
    for article in text.split("\n = ")[1:]:
      yield [line.strip() for line in article.splitlines() if line.strip()]
  for path in sorted(glob.glob(os.path.join(site_packages, "**", "*.py"),
                               recursive=True)):
    try:
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
      continue
    for node in ast.walk(tree):
      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                           ast.AsyncFunctionDef)):
        doc = ast.get_docstring(node)
        lines = [line.strip() for line in (doc or "").splitlines()
                 if line.strip()]
        if lines:
          yield lines


def write_corpus(corpus_dir, mb, files, site_packages, wikitext):
  """Writes `files` files of about `mb` MB in all; returns their paths."""
  os.makedirs(corpus_dir, exist_ok=True)
  per_file, paths, out = mb * 1e6 / files, [], None
  for document in _documents(site_packages, wikitext):
    if out is None or out.tell() >= per_file:
      if out:
        out.close()
      if len(paths) == files:
        break
      paths.append(os.path.join(corpus_dir, f"part{len(paths):02d}.txt"))
      out = open(paths[-1], "w", encoding="utf-8")
    out.write("\n".join(document) + "\n\n")
  else:
    out.close()
  return paths


def _lines(paths):
  for path in paths:
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          yield line.strip()


def _bert_tokenizer(vocab=None):
  """A `tokenizers` BERT tokenizer (over `vocab`, a token list, if given)."""
  tokenizer = tokenizers.Tokenizer(models.WordPiece(
      {t: i for i, t in enumerate(vocab or ())}, unk_token=wordpiece.UNK))
  tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return tokenizer


def _trained(tokenizer, texts, vocab_size):
  trainer = trainers.WordPieceTrainer(
      vocab_size=vocab_size, special_tokens=list(wordpiece.RESERVED_TOKENS),
      show_progress=False)
  tokenizer.train_from_iterator(texts, trainer)
  vocab = tokenizer.get_vocab()
  return sorted(vocab, key=vocab.get)


def learn_with_tokenizers(counts, vocab_size):
  """`WordPieceTrainer` on words already split: each word, count times."""
  tokenizer = tokenizers.Tokenizer(models.WordPiece(unk_token=wordpiece.UNK))
  tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  return _trained(tokenizer, (" ".join([word] * count)
                              for word, count in counts.items()), vocab_size)


def serving_equal(vocab, lines, work_dir, name):
  """Share of `lines` whose ids from the face's tokenizer (ours for our
  learner, `tokenizers`' for its) equal tensorflow-text's `BertTokenizer`."""
  path = os.path.join(work_dir, f"{name}.vocab")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in vocab))
  served = tokenization.make_tokenizer(path).tokenize(
      tf.constant(lines)).merge_dims(-2, -1).to_list()
  if name == "wordpiece":
    face = wordpiece.WordPieceTokenizer(vocab)
    ids = [face(line) for line in lines]
  else:
    ids = [e.ids for e in _bert_tokenizer(vocab).encode_batch(lines)]
  return round(sum(a == b for a, b in zip(ids, served)) / len(lines), 4)


def main():
  args = _parser().parse_args()
  if args.write_corpus:
    write_corpus(args.corpus_dir, args.mb, args.files, args.site_packages,
                 args.wikitext)
  paths = sorted(glob.glob(os.path.join(args.corpus_dir, "*.txt")))
  *paths, held_out = paths
  held_out = list(_lines([held_out]))[:args.held_out]
  mb = sum(os.path.getsize(p) for p in paths) / 1e6
  start, cpu = time.perf_counter(), time.process_time()
  counts = wordpiece.count_words(_lines(paths))
  rows = dict(corpus=dict(files=len(paths), mb=round(mb, 1),
                          words=sum(counts.values()), unique=len(counts)),
              count=dict(wall_s=round(time.perf_counter() - start, 1),
                         cpu_s=round(time.process_time() - cpu, 1)),
              versions=dict(python=sys.version.split()[0],
                            tokenizers=tokenizers.__version__,
                            tensorflow=tf.__version__))
  for name, learn in (
      ("wordpiece", lambda: wordpiece.learn_vocab(counts, args.vocab_size)),
      ("tokenizers", lambda: learn_with_tokenizers(counts, args.vocab_size)),
      ("tokenizers_from_text", lambda: _trained(
          _bert_tokenizer(), _lines(paths), args.vocab_size))):
    start, cpu = time.perf_counter(), time.process_time()
    vocab = learn()
    rows[name] = dict(wall_s=round(time.perf_counter() - start, 1),
                      cpu_s=round(time.process_time() - cpu, 1),
                      tokens=len(vocab), serving_equal=serving_equal(
                          vocab, held_out, args.corpus_dir, name))
  print(json.dumps(rows))


if __name__ == "__main__":
  main()
