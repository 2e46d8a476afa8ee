"""The TensorFlow-free WordPiece equals tensorflow-text's: the same words,
the same learned vocabulary, the same ids."""
import collections

import pytest
import tensorflow as tf
from tensorflow_text.python.ops import bert_tokenizer
from tensorflow_text.tools.wordpiece_vocab import (
    wordpiece_tokenizer_learner_lib as learner)

from realformer_tf.data import corpus_text
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

TRICKY = [
    "Hello, World! It's 3.5%-ready (isn't it?)",
    "Café naïve façade ´timeout´ Straße Ǆemal İstanbul ﬁnd",
    "x\u00a0y soft\u00adhyphen zero\u200bwidth tab\there\x07bell",
    "中文字符 and ｆｕｌｌｗｉｄｔｈ ＡＢＣ; «quotes» — dash… ¿qué?",
    "a" * 120 + " " + "é" * 60 + " emoji 🙂 ok",
    "",
]


def _stdlib_lines(documents=40):
  return [s for d in corpus_text.stdlib_documents()[:documents] for s in d]


def test_words_are_tensorflow_texts():
  basic = bert_tokenizer.BasicTokenizer(lower_case=True)
  lines = TRICKY + _stdlib_lines(10)
  expected = [[w.decode("utf-8") for w in row]
              for row in basic.tokenize(tf.constant(lines)).to_list()]
  assert [wordpiece.basic_words(line) for line in lines] == expected


def test_the_learned_vocabulary_and_ids_are_tensorflow_texts(tmp_path):
  lines = _stdlib_lines() + TRICKY
  counts = wordpiece.count_words(lines)
  assert counts == learner.count_words(tf.data.Dataset.from_tensor_slices(
      lines).batch(64).map(bert_tokenizer.BasicTokenizer(
          lower_case=True).tokenize))
  vocab = wordpiece.learn_vocab(counts, 600, upper_thresh=50)
  assert vocab == learner.learn(counts, 600,
                                list(wordpiece.RESERVED_TOKENS),
                                upper_thresh=50)
  assert vocab[:5] == list(wordpiece.RESERVED_TOKENS)
  assert 400 < len(vocab) <= 600
  path = str(tmp_path / "vocab.txt")
  with open(path, "w") as f:
    f.write("".join(t + "\n" for t in vocab))
  reference = tokenization.make_tokenizer(path).tokenize(
      tf.constant(lines)).merge_dims(-2, -1).to_list()
  tokenizer = wordpiece.WordPieceTokenizer(vocab)
  assert [tokenizer(line) for line in lines] == reference
  # A word over 100 bytes, a character never seen: one [UNK] each.
  unk = vocab.index(wordpiece.UNK)
  assert tokenizer("a" * 101) == [unk]
  assert tokenizer("ж") == [unk]


def test_learn_refuses_bad_arguments():
  with pytest.raises(ValueError, match="vocab_size must be an int >= 16"):
    wordpiece.learn_vocab({"a": 3}, 15)
  with pytest.raises(ValueError, match="No words"):
    wordpiece.learn_vocab(collections.Counter(), 100)
  with pytest.raises(ValueError, match=r"missing \['\[MASK\]'\]"):
    wordpiece.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
