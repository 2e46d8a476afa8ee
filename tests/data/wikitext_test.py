"""WikiText articles -> BERT-format documents of sentences."""
import os
import subprocess
import sys

import pytest

from realformer_tf.data import wikitext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

_WIKI = (" \n = First = \n \n The cat sat . It ran away .\n"
         " = = Section = = \n Birds sang .\n = Second = \n Dogs bark .\n")


def test_articles_become_documents_of_sentences(tmp_path):
  path = tmp_path / "wiki.txt"
  path.write_text(_WIKI)
  assert wikitext.read_documents(str(path)) == [
      ["The cat sat .", "It ran away .", "Birds sang ."], ["Dogs bark ."]]


def test_bert_corpus_has_a_blank_line_between_articles_and_is_kept(tmp_path):
  path = tmp_path / "wiki.txt"
  path.write_text(_WIKI)
  out = wikitext.write_bert_corpus([str(path)], str(tmp_path / "data"))
  with open(out) as f:
    assert f.read().split("\n")[:5] == [
        "The cat sat .", "It ran away .", "Birds sang .", "", "Dogs bark ."]
  path.write_text(" = Other = \n Cows moo .\n")
  mtime = os.path.getmtime(out)
  assert wikitext.write_bert_corpus([str(path)], str(tmp_path / "data")) == out
  assert os.path.getmtime(out) == mtime  # Built once for every run.


def test_default_files_need_both_splits(tmp_path, monkeypatch):
  monkeypatch.setenv("REALFORMER_DATA_DIR", str(tmp_path))
  assert wikitext.default_files() == []
  corpus = tmp_path / "corpus" / "wikitext-2"
  corpus.mkdir(parents=True)
  (corpus / "valid.txt").write_text(_WIKI)
  assert wikitext.default_files() == []
  (corpus / "test.txt").write_text(_WIKI)
  assert wikitext.default_files() == [str(corpus / "valid.txt"),
                                      str(corpus / "test.txt")]


def test_convert_writes_articles_and_refuses_text_that_is_not_wikitext(
    tmp_path):
  path = tmp_path / "wiki.txt"
  path.write_text(_WIKI)
  out = tmp_path / "out" / "documents.txt"
  assert wikitext.convert([str(path)], str(out)) == [
      ["The cat sat .", "It ran away .", "Birds sang ."], ["Dogs bark ."]]
  assert out.read_text().split("\n") == [
      "The cat sat .", "It ran away .", "Birds sang .", "", "Dogs bark .",
      "", ""]
  # Rewritten whole on a second call (not kept as write_bert_corpus does).
  path.write_text(" = Other = \n Cows moo . Hens cluck .\n")
  wikitext.convert([str(path)], str(out))
  assert out.read_text() == "Cows moo .\nHens cluck .\n\n"
  bert_text = tmp_path / "bert.txt"
  bert_text.write_text("A sentence.\nAnother one.\n\nA second document.\n")
  with pytest.raises(ValueError, match=r"bert\.txt has no ` = Title = ` "
                     "line: not WikiText"):
    wikitext.convert([str(bert_text)], str(tmp_path / "x.txt"))
  assert not (tmp_path / "x.txt").exists()
  with pytest.raises(ValueError, match="does not exist"):
    wikitext.convert([str(tmp_path / "missing.txt")], str(out))


def test_command_line(tmp_path):
  path = tmp_path / "wiki.txt"
  path.write_text(_WIKI)
  out = tmp_path / "documents.txt"
  result = subprocess.run(
      [sys.executable, "-m", "realformer_tf.data.wikitext",
       f"--input_files={path}", f"--output_file={out}"],
      capture_output=True, text=True, cwd=REPO, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"Wrote {out}: 2 articles, 4 sentences." in result.stdout
  assert out.read_text().startswith("The cat sat .\nIt ran away .\n")
