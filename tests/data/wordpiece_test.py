"""The one WordPiece learner (data/wordpiece.py): tensorflow-text's words,
reserved tokens first, a bounded and deterministic vocabulary, the
quickstart's vocabulary as before, and ids equal to tensorflow-text's
`BertTokenizer` (the serving path) on held-out text."""
import collections
import hashlib
import os

import pytest
import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer

from realformer_tf.data import corpus_text
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from tests.helpers import train_runs

TRICKY = [
    "Hello, World! It's 3.5%-ready (isn't it?)",
    "Café naïve façade ´timeout´ Straße Ǆemal İstanbul ﬁnd",
    "x\u00a0y soft\u00adhyphen zero\u200bwidth tab\there\x07bell",
    "中文字符 and ｆｕｌｌ ＡＢＣ; «quotes» — dash… ¿qué?",
    "a" * 120 + " " + "é" * 60 + " emoji 🙂 ok",
    "ctrl\x00nul\x1fus\x7fdel\x0bvt\x0cff\rcr ascii",
    "",
]
WIKITEXT = os.path.join(os.path.dirname(train_runs.REPO_ROOT), "shared",
                        "data", "corpus", "wikitext-2", "valid.txt")


def _stdlib_lines(documents=40):
  return [s for d in corpus_text.stdlib_documents()[:documents] for s in d]


def _real_lines():
  """Stdlib docstrings, and WikiText-2 (accents, CJK, symbols) if present."""
  lines = _stdlib_lines(10)
  if os.path.exists(WIKITEXT):
    with open(WIKITEXT, encoding="utf-8") as f:
      wiki = [line.strip() for line in f if line.strip()]
    lines += [line for line in wiki if not line.isascii()][:300] + wiki[:300]
  return lines + TRICKY


def test_words_and_counts_are_tensorflow_texts():
  basic = bert_tokenizer.BasicTokenizer(lower_case=True)
  lines = _real_lines()
  expected = [[w.decode("utf-8") for w in row]
              for row in basic.tokenize(tf.constant(lines)).to_list()]
  assert [wordpiece.basic_words(line) for line in lines] == expected
  # Counted a block of lines at a time: the same words.
  assert wordpiece.count_words(lines) == collections.Counter(
      w for row in expected for w in row)
  assert any(not line.isascii() for line in lines)


def test_the_learned_vocabulary_and_its_ids_at_serving(tmp_path):
  documents = corpus_text.stdlib_documents()
  train = [s for d in documents[:60] for s in d] + TRICKY
  held_out = [s for d in documents[60:90] for s in d] + [
      "Une phrase inédite: 東京 ﬁnd ЖЖЖ " + "x" * 101]
  counts = wordpiece.count_words(train)
  vocab = wordpiece.learn_vocab(counts, 600, upper_thresh=50)
  assert vocab[:5] == list(wordpiece.RESERVED_TOKENS)
  assert 570 <= len(vocab) <= 600 and len(set(vocab)) == len(vocab)
  chars = {c for w in counts for c in w}
  assert all(c in vocab and "##" + c in vocab for c in chars)
  # Deterministic, whatever the order of the counts (a Beam combine's).
  shuffled = dict(sorted(counts.items(), key=lambda wc: hashlib.sha256(
      wc[0].encode()).digest()))
  assert wordpiece.learn_vocab(shuffled, 600, upper_thresh=50) == vocab
  path = str(tmp_path / "vocab.txt")
  tokenization.learn_vocab(shuffled, 600, path, upper_thresh=50)
  served = tokenization.make_tokenizer(path).tokenize(
      tf.constant(held_out)).merge_dims(-2, -1).to_list()
  tokenizer = wordpiece.WordPieceTokenizer(vocab)
  assert [tokenizer(line) for line in held_out] == served
  unk = vocab.index(wordpiece.UNK)
  assert served[-1].count(unk) >= 2  # A character never seen, a long word.
  assert sum(len(ids) for ids in served) > 5000


def test_the_quickstart_vocabulary_is_tensorflow_texts_as_before():
  """tensorflow-text's learner's vocabulary of the quickstart's corpus."""
  train, _ = corpus_text.split_documents(corpus_text.stdlib_documents(),
                                         0.05, 0)
  vocab = wordpiece.learn_vocab(
      wordpiece.count_words(s for d in train for s in d), 4000)
  assert len(vocab) == 2334
  # At the quickstart's own size and search bound: the 956 tokens its
  # printed numbers (README, command 1) were measured with.
  assert len(wordpiece.learn_vocab(
      wordpiece.count_words(s for d in train for s in d), 1000,
      upper_thresh=wordpiece.QUICKSTART_UPPER_THRESH)) == 956
  assert hashlib.sha256("".join(t + "\n" for t in vocab).encode(
  )).hexdigest() == (
      "5edc2d0bee339b9f684a770aa97bb3bf8471cfb26debf2478b8d2a367849baf2")


def test_learn_refuses_bad_arguments(tmp_path):
  with pytest.raises(ValueError, match="vocab_size must be an int, at least "
                     "16, got 15"):
    wordpiece.learn_vocab({"a": 3}, 15)
  with pytest.raises(ValueError, match="No text"):
    wordpiece.learn_vocab(collections.Counter(), 100)
  with pytest.raises(ValueError, match=r"missing \['\[MASK\]'\]"):
    wordpiece.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
