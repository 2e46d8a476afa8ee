r"""A BERT-format corpus of some tens of MB: WikiText-2 (../shared/data)
articles, then the docstrings of this Python's site-packages, one sentence
a line, a document per article or module, in 16 files.

usage:
  python benchmarks/pretraining_corpus.py --output_dir=/tmp/corpus --mb=60
"""

import argparse
import ast
import glob
import os
import re
import sysconfig

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_FILES = 16


def _sentences(text):
  return [s for line in text.splitlines()
          for s in _SENTENCE_END.split(line.strip()) if s]


def _documents(data_dir):
  """WikiText-2's articles, then each module's docstrings, as lists of
  sentences."""
  for name in ("valid.txt", "test.txt"):
    path = os.path.join(data_dir, "corpus", "wikitext-2", name)
    with open(path, encoding="utf-8") as f:
      for article in re.split(r"\n \n = [^=]", f.read()):
        yield [s for s in _sentences(article) if not s.startswith("=")]
  site = sysconfig.get_paths()["purelib"]
  for path in sorted(glob.glob(os.path.join(site, "**", "*.py"),
                               recursive=True)):
    try:
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
      continue
    yield [s for node in ast.walk(tree) if isinstance(node, (
        ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
           for s in _sentences(ast.get_docstring(node) or "")]


def main():
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument("--output_dir", required=True)
  p.add_argument("--mb", type=float, default=60)
  p.add_argument("--data_dir", default=os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
      "data"))
  args = p.parse_args()
  os.makedirs(args.output_dir, exist_ok=True)
  limit, written, out, index = args.mb * 1e6, 0, None, 0
  for document in _documents(args.data_dir):
    if written > limit:
      break
    if len(document) < 2:
      continue
    if out is None or out.tell() > limit / _FILES:
      if out:
        out.close()
      out = open(os.path.join(args.output_dir, f"corpus-{index:02d}.txt"),
                 "w", encoding="utf-8")
      index += 1
    text = "\n".join(document) + "\n\n"
    out.write(text)
    written += len(text.encode("utf-8"))
  out.close()
  print(f"{index} files, {written / 1e6:.1f} MB in {args.output_dir}")


if __name__ == "__main__":
  main()
