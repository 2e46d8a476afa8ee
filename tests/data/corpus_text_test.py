"""Plain-Python corpus reading and the quickstart's held-out split."""
import bz2
import gzip

import pytest

from realformer_tf.data import corpus_text


def test_documents_are_runs_of_lines_between_blanks(tmp_path):
  path = tmp_path / "c.txt"
  path.write_text("  one.\ntwo.\n\n\nthree.\n\nfour.  \n")
  assert corpus_text.text_documents(str(path)) == [["one.", "two."],
                                                   ["three."], ["four."]]
  path.write_bytes(b"fine\nbad \xff byte\n")
  with pytest.raises(ValueError, match=r"c.txt:2: not UTF-8 text \(byte "
                     r"0xff at offset 9\)"):
    corpus_text.text_documents(str(path))


def test_gz_and_bz2_files_read_decompressed_and_named_when_misnamed(tmp_path):
  text = b"one.\ntwo.\n\nthree.\n"
  for name, compress in (("c.txt.gz", gzip.compress),
                         ("c.txt.bz2", bz2.compress)):
    (tmp_path / name).write_bytes(compress(text))
    assert corpus_text.text_documents(str(tmp_path / name)) == [
        ["one.", "two."], ["three."]]
  (tmp_path / "c.txt").write_bytes(gzip.compress(text))
  with pytest.raises(ValueError, match=r"^.*c\.txt: a gzip-compressed file, "
                     r"not text: name it \*\.gz to have it read decompressed"):
    corpus_text.text_documents(str(tmp_path / "c.txt"))


def test_the_shipped_corpus_and_a_missing_one(tmp_path):
  documents = corpus_text.stdlib_documents()
  assert len(documents) == 212 and all(documents)
  path = tmp_path / "c.txt.gz"
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("a.\nb.\n\nc.\n\n")
  assert corpus_text.stdlib_documents(str(path)) == [["a.", "b."], ["c."]]
  with pytest.raises(FileNotFoundError, match="reinstall realformer_tf"):
    corpus_text.stdlib_documents(str(tmp_path / "missing.gz"))


def test_the_split_holds_out_a_seeded_fraction_in_corpus_order():
  documents = [[f"d{i}."] for i in range(40)]
  train, held_out = corpus_text.split_documents(documents, 0.05, seed=0)
  assert len(held_out) == 2 and len(train) == 38
  assert sorted(train + held_out) == sorted(documents)
  assert held_out == sorted(held_out, key=documents.index)
  assert corpus_text.split_documents(documents, 0.05, seed=0) == (
      train, held_out)
  assert corpus_text.split_documents(documents, 0.05, seed=1) != (
      train, held_out)
  assert [len(p) for p in corpus_text.split_documents(
      documents[:2], 0.01, seed=0)] == [1, 1]  # At least one, never all.
  assert [len(p) for p in corpus_text.split_documents(
      documents[:2], 0.99, seed=0)] == [1, 1]
  with pytest.raises(ValueError, match="at least 2 are needed"):
    corpus_text.split_documents(documents[:1], 0.05, seed=0)
  with pytest.raises(ValueError, match=r"eval_fraction must be in \(0, 1\)"):
    corpus_text.split_documents(documents, 1.0, seed=0)
