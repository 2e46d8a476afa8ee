"""Tests for realformer_tf.data.tokenization (tensorflow-text WordPiece; the
learned vocabulary's writer)."""
import os
import re
from unittest import mock

import pytest
import tensorflow as tf

from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

# A tiny handmade WordPiece vocabulary: id = line number.
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog",
              "play", "##ing", "##s", "un", "##aff", "##able", ",", "!", "."]


def write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


@pytest.fixture
def vocab_file(tmp_path):
  return write(tmp_path / "vocab.txt", "\n".join(TINY_VOCAB) + "\n")


def test_load_vocab_returns_tokens_in_id_order(vocab_file):
  assert tokenization.load_vocab(vocab_file) == TINY_VOCAB


def test_load_vocab_accepts_crlf_and_no_trailing_newline(tmp_path):
  path = write(tmp_path / "v.txt", "\r\n".join(TINY_VOCAB))
  assert tokenization.load_vocab(path) == TINY_VOCAB


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("\n\n  \n", "is empty"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n", "lacks the special token(s) [MASK]"),
    ("the\ndog\n", "[PAD] [UNK] [CLS] [SEP] [MASK]"),
    ("[PAD]\n[UNK]\n\n[CLS]\n[SEP]\n[MASK]\n", "line 3 is blank"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe dog\n", "line 6"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nthe\n",
     "'the' appears on lines 6 and 7"),
])
def test_load_vocab_rejects_non_vocab_files(tmp_path, content, message):
  path = write(tmp_path / "bad_vocab.txt", content)
  with pytest.raises(ValueError) as e:
    tokenization.load_vocab(path)
  assert "bad_vocab.txt" in str(e.value)
  assert message in str(e.value)


def test_load_vocab_rejects_missing_file_and_directory(tmp_path):
  with pytest.raises(ValueError, match=r"nope\.txt.*does not exist"):
    tokenization.load_vocab(str(tmp_path / "nope.txt"))
  with pytest.raises(ValueError, match="is a directory"):
    tokenization.load_vocab(str(tmp_path))
  with open(tmp_path / "latin1.txt", "wb") as f:
    f.write(b"[PAD]\ncaf\xe9\n")
  with pytest.raises(ValueError, match=r"latin1\.txt.*not UTF-8"):
    tokenization.load_vocab(str(tmp_path / "latin1.txt"))


def test_padded_vocabulary_is_allowed_with_a_warning(vocab_file):
  """vocab_size above the vocabulary (issue 39: 30522 for 956 tokens
  trained without a word): allowed, and said at load time."""
  with mock.patch.object(tokenization.logging, "warning") as warning:
    assert tokenization.load_vocab(vocab_file, vocab_size=24) == TINY_VOCAB
  message = warning.call_args[0][0] % warning.call_args[0][1:]
  assert message == (
      f"Vocabulary {vocab_file} has 16 tokens, but the model's vocab_size is "
      "24: word embedding rows 16-23 are never looked up (a padded "
      "vocabulary). If that is not deliberate, set vocab_size=16. Fine-tuning "
      "and export accept the run with this vocabulary, not another one.")
  with mock.patch.object(tokenization.logging, "warning") as warning:
    tokenization.load_vocab(vocab_file, vocab_size=16)
  warning.assert_not_called()


def test_make_tokenizer_wordpieces_on_handmade_vocab(vocab_file):
  tokenizer = tokenization.make_tokenizer(vocab_file)
  ids = tokenizer.tokenize(
      tf.constant(["The DOGS, playing!", "unaffable cat."]))
  ids = ids.merge_dims(-2, -1).to_list()
  v = {t: i for i, t in enumerate(TINY_VOCAB)}
  assert ids[0] == [v["the"], v["dog"], v["##s"], v[","], v["play"],
                    v["##ing"], v["!"]]
  # "cat" is not coverable by the vocabulary: the whole word becomes [UNK].
  assert ids[1] == [v["un"], v["##aff"], v["##able"], v["[UNK]"], v["."]]


def test_make_tokenizer_cased_keeps_case(vocab_file):
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=False)
  ids = tokenizer.tokenize(tf.constant(["The dog"])).merge_dims(-2, -1)
  assert ids.to_list() == [[TINY_VOCAB.index("[UNK]"), TINY_VOCAB.index("dog")]]


def test_make_tokenizer_rejects_bad_vocab(tmp_path):
  path = write(tmp_path / "words.txt", "the\ndog\n")
  with pytest.raises(ValueError, match=r"words\.txt.*\[PAD\]"):
    tokenization.make_tokenizer(path)


LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "The lazy dog sleeps while the quick fox runs.",
    "",
    "Dogs and foxes are playing in the garden; the garden is green.",
    "Jumping foxes, sleeping dogs and running cats.",
] * 6


def test_learn_vocab_writes_a_valid_vocab_with_reserved_tokens_first(tmp_path):
  out = str(tmp_path / "sub" / "vocab.txt")
  vocab = tokenization.learn_vocab(wordpiece.count_words(LINES), 200, out)
  assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert tokenization.load_vocab(out) == vocab
  assert len(set(vocab)) == len(vocab) and len(vocab) <= 200
  # Every character, as a word start and as a suffix.
  chars = set("".join(LINES).lower()) - {" "}
  assert all(c in vocab and "##" + c in vocab for c in chars)
  assert not [f for f in os.listdir(tmp_path / "sub") if "tmp" in f]
  # Every character of the corpus is in the vocabulary, so the corpus
  # tokenizes without [UNK], and frequent words are whole tokens.
  # Words seen >= 10 times are whole tokens.
  assert {"the", "dog", "garden", "quick", "##ing"} <= set(vocab)
  tokenizer = tokenization.make_tokenizer(out)
  ids = tokenizer.tokenize(tf.constant([l for l in LINES if l]))
  flat = ids.flat_values.numpy().tolist()
  assert vocab.index("[UNK]") not in flat
  # Deterministic.
  assert tokenization.learn_vocab(wordpiece.count_words(LINES), 200,
                                  str(tmp_path / "v2.txt")) == vocab


def test_learn_vocab_rejects_bad_arguments_before_writing(tmp_path):
  out = tmp_path / "vocab.txt"
  with pytest.raises(ValueError, match="at least 16"):
    tokenization.learn_vocab(wordpiece.count_words(LINES), 8, str(out))
  with pytest.raises(ValueError, match="No text"):
    tokenization.learn_vocab(wordpiece.count_words(["", "  "]), 100, str(out))
  assert not out.exists()


def test_learn_vocab_keeps_a_file_already_at_its_path(tmp_path):
  """A vocabulary carries no proof of its writer (issue 46): learn_vocab
  writes a new file only, and names the one it keeps."""
  out = tmp_path / "vocab.txt"
  out.write_text("mine\n")
  with pytest.raises(FileExistsError, match=re.escape(str(out)) +
                     " exists and no manifest of realformer_tf lists it"):
    tokenization.learn_vocab(wordpiece.count_words(LINES), 100, str(out))
  assert out.read_text() == "mine\n"
  assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]
