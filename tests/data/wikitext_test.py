"""WikiText articles -> BERT-format documents of sentences."""
import os

from realformer_tf.data import wikitext

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
