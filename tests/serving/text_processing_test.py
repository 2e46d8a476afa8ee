"""In-graph text preprocessing vs the training data code (no model, no export)."""

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.data import glue_tasks
from realformer_tf.data import squad as squad_data
from realformer_tf.data import squad_json
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from realformer_tf.serving import text_processing
from tests.helpers import numpy_reference
from tests.helpers import shared_data
from tests.helpers import serving as common

CLS, SEP, MASK = 2, 3, 4


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
  return common.write_vocab(str(tmp_path_factory.mktemp("vocab") / "v.txt"))


def test_pair_truncation_equals_glue_truncate_seq_pair(tiny_vocab):
  """RoundRobinTrimmer keeps exactly `numpy_reference.truncated_lengths` tokens."""
  lengths = [(a, b) for a in range(1, 15) for b in range(1, 15)]
  a = tf.ragged.range([n for n, _ in lengths]) + 100
  b = tf.ragged.range([n for _, n in lengths]) + 200
  checked = 0
  for max_seq_length in range(4, 20):
    packer = text_processing.BertTextPacker(tiny_vocab, True, max_seq_length)
    features, _ = packer.pack([a, b], ["a", "b"])
    truncated = packer.num_truncated_tokens([a, b], features).numpy()
    single, _ = packer.pack([a], ["a"])
    np.testing.assert_array_equal(
        packer.num_truncated_tokens([a], single),
        [max(0, n - (max_seq_length - 2)) for n, _ in lengths])
    for i, (len_a, len_b) in enumerate(lengths):
      keep_a, keep_b = numpy_reference.truncated_lengths(len_a, len_b,
                                                   max_seq_length - 3)
      row = ([CLS] + list(range(100, 100 + keep_a)) + [SEP]
             + list(range(200, 200 + keep_b)) + [SEP])
      expected = row + [0] * (max_seq_length - len(row))
      types = [0] * (keep_a + 2) + [1] * (keep_b + 1)
      np.testing.assert_array_equal(features["input_word_ids"][i], expected)
      np.testing.assert_array_equal(
          features["input_type_ids"][i],
          types + [0] * (max_seq_length - len(types)))
      np.testing.assert_array_equal(
          features["input_mask"][i],
          [1] * len(row) + [0] * (max_seq_length - len(row)))
      assert truncated[i] == len_a + len_b - keep_a - keep_b
      checked += 1
  assert checked == 16 * 14 * 14


def test_unknown_word_counts_report_what_became_unk(tiny_vocab):
  """A word without spaces of 100,000 characters is one [UNK] token, so no
  truncation: the counters say what the model did not see."""
  packer = text_processing.BertTextPacker(tiny_vocab, True, 16)
  texts = tf.constant([
      "the " + "x" * 100000 + " end",
      "the cat costs 5\u20ac here",  # "5€": no piece spells the euro sign.
      "a" * 100 + " " + "a" * 101,  # At and just over the 100-byte limit.
      "the [MASK] sat",
      "Ünïcode caf\u00e9"])  # Accents stripped: spelt by the vocabulary.
  ids = packer.tokenize(texts)
  features, _ = packer.pack([ids], ["text"])
  assert packer.num_truncated_tokens([ids], features).numpy()[0] == 0
  counts = {k: v.numpy().tolist()
            for k, v in packer.unknown_word_counts(texts).items()}
  assert counts == {
      "num_unknown_words": [1, 1, 1, 2, 0],  # "[" and "]" without splitting.
      "num_unknown_chars": [100000, 2, 101, 2, 0],
      "num_overlong_words": [1, 0, 1, 0, 0]}
  masked = packer.unknown_word_counts(texts, split_masks=True)
  assert masked["num_unknown_words"].numpy().tolist() == [1, 1, 1, 0, 0]
  # Each [UNK] counted is one [UNK] token in the ids.
  assert (tf.reduce_sum(tf.cast(tf.equal(ids, packer.unk_id), tf.int32),
                        axis=1).numpy().tolist() == [1, 1, 1, 2, 0])


def test_glue_text_ids_equal_training_records():
  """Single texts and pairs, all truncations, on BERT's or the fixture vocab.

  The fixture vocabulary still sees accents stripped and "ß" folded to "ss";
  it has no "—" or emoji, so both sides must also agree on [UNK].
  """
  vocab_file = shared_data.vocab_file()
  tokenizer = wordpiece.WordPieceTokenizer(
      tokenization.load_vocab(vocab_file))
  long_text = ("The quick brown fox jumps over the lazy dog; "
               "Ünïcödé café, naïve straße — 😀 and [MASK] tokens! ") * 3
  singles = ["Hello, World!", "it's a GREAT movie...", long_text,
             "Tabs\tand\nnewlines  and\u00a0nbsp\u202fnarrow"]
  pairs = [("a b c", long_text), (long_text, "x y"), (long_text, long_text),
           ("What is RealFormer?", "A residual attention transformer.")]
  for seq_length in (16, 64):
    packer = text_processing.BertTextPacker(vocab_file, True, seq_length)
    for texts, pair in ((singles, False), (pairs, True)):
      examples = [glue_tasks.GlueExample(t[0], t[1], 0, "x") if pair else
                  glue_tasks.GlueExample(t, None, 0, "x") for t in texts]
      packed = glue_tasks.pack(examples, tokenizer, seq_length)
      segments = ([packer.tokenize(tf.constant([t[0] for t in texts])),
                   packer.tokenize(tf.constant([t[1] for t in texts]))]
                  if pair else [packer.tokenize(tf.constant(texts))])
      features, _ = packer.pack(segments, ["a", "b"][:len(segments)])
      np.testing.assert_array_equal(features["input_word_ids"],
                                    packed["token_ids"])
      np.testing.assert_array_equal(features["input_mask"],
                                    packed["padding_mask"])
      np.testing.assert_array_equal(features["input_type_ids"],
                                    packed["segment_ids"])


def test_mask_literal_becomes_one_mask_token(tiny_vocab):
  packer = text_processing.BertTextPacker(tiny_vocab, True, 32)
  tokenizer = tokenization.make_tokenizer(tiny_vocab)

  def ids(text):
    return tokenizer.tokenize([text]).merge_dims(-2, -1).to_list()[0]

  cases = {
      "the dog [MASK] on the mat": ids("the dog") + [MASK] + ids("on the mat"),
      "[MASK] won": [MASK] + ids("won"),
      "who won [MASK]": ids("who won") + [MASK],
      "[MASK][MASK] dog[MASK]s": [MASK, MASK] + ids("dog") + [MASK]
                                 + ids("s"),
      "[MASK]": [MASK],
      "no masks, THE Dog.": ids("no masks, THE Dog."),
      "[mask] is not a mask": ids("[mask] is not a mask"),
  }
  result = packer.tokenize_with_masks(tf.constant(list(cases))).to_list()
  assert result == list(cases.values())


def test_invalid_utf8_is_rejected_naming_input_and_positions():
  valid = ["café 😀", "", "a\x00b", "\ufeffbom", "\ufffd stays"]
  text_processing.assert_valid_utf8(tf.constant(valid), "text")  # No error.
  invalid = [b"caf\xe9",          # Latin-1
             b"\xe2\x82",          # cut 3-byte sequence
             b"\xed\xa0\x80",      # encoded surrogate
             b"\xc0\xaf",          # overlong "/"
             b"\xf4\x90\x80\x80"]  # beyond U+10FFFF

  @tf.function  # The message as a signature gives it.
  def checked(texts):
    with tf.control_dependencies(
        [text_processing.assert_valid_utf8(texts, "text_b")]):
      return tf.identity(texts)

  for bad in invalid:
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`text_b` holds a string that is not valid "
                       r"UTF-8 at batch positions\] \[1 3\]"):
      checked(tf.constant([b"fine", bad, b"ok", bad]))


def test_empty_text_is_rejected(tiny_vocab):
  packer = text_processing.BertTextPacker(tiny_vocab, True, 16)
  tokens = packer.tokenize(tf.constant(["the dog", " \t\n"]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"`text` holds an empty string"):
    packer.pack([tokens], ["text"])


def test_packer_rejects_tiny_length(tiny_vocab):
  with pytest.raises(ValueError, match="no room for text"):
    text_processing.BertTextPacker(tiny_vocab, True, 2)


@pytest.mark.parametrize("seq_length, query_length, doc_stride",
                         [(24, 6, 4), (32, 8, 8), (48, 16, 30), (96, 64, 128)])
def test_squad_windows_equal_squad_lib_features(tmp_path, seq_length,
                                                query_length, doc_stride):
  vocab_file = shared_data.vocab_file()
  contexts = [
      "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina "
      "Panthers 24–10 at Levi's Stadium in Santa Clara, California. " * 2,
      "Short  context.",
      "Ünïcödé café\u00a0naïve straße — résumé\u202fstays; tabs\there " * 3,
  ]
  questions = ["Who won Super Bowl 50 in the year after 2015 at Levi's?",
               "What?", "Where does the résumé stay in the café?"]
  import json  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "dev.json")
  with open(path, "w") as f:
    json.dump({"data": [{"paragraphs": [
        {"context": c, "qas": [{"id": f"q{i}", "question": q,
                                "answers": [{"text": "x", "answer_start": 0}]}]}
        for i, (q, c) in enumerate(zip(questions, contexts))]}]}, f)
  examples, _ = squad_json.read_squad_examples(path, False, False)
  tokenizer = squad_data.SquadTokenizer(vocab_file)
  features = []
  squad_data.convert_examples_to_features(
      examples, tokenizer, seq_length, doc_stride, query_length, False,
      features.append)

  packer = text_processing.BertTextPacker(vocab_file, True, seq_length)
  context = packer.tokenize_context(tf.constant(contexts))
  windows = packer.squad_windows(packer.tokenize(tf.constant(questions)),
                                 context["ids"], query_length, doc_stride)
  assert len(features) == int(tf.reduce_sum(windows["num_windows"]))
  np.testing.assert_array_equal(windows["input_word_ids"],
                                [f.input_ids for f in features])
  np.testing.assert_array_equal(windows["input_mask"],
                                [f.input_mask for f in features])
  np.testing.assert_array_equal(windows["input_type_ids"],
                                [f.segment_ids for f in features])
  np.testing.assert_array_equal(windows["example_index"],
                                [f.example_index for f in features])
  np.testing.assert_array_equal(
      windows["max_context"],
      [[bool(f.token_is_max_context.get(p, False)) for p in range(seq_length)]
       for f in features])
  # Each token's word is squad_lib's original word (token_to_orig_map).
  word_index = context["word_index"].to_list()
  for w, f in enumerate(features):
    start = int(windows["window_start"][w])
    offset = int(windows["context_offset"][w])
    example = int(windows["example_index"][w])
    for position, word in f.token_to_orig_map.items():
      assert word_index[example][start + position - offset] == word


def test_context_offsets_exact_for_ascii_whole_word_otherwise(tiny_vocab):
  packer = text_processing.BertTextPacker(tiny_vocab, True, 32)
  context = "The Broncos' won  café"
  tokens = packer.tokenize_context(tf.constant([context]))
  words = [w.decode() for w in tokens["words"].to_list()[0]]
  assert words == ["The", "Broncos'", "won", "café"]
  pieces = [common.VOCAB[i] for i in tokens["ids"].to_list()[0]]
  begins = tokens["word_begin"].to_list()[0]
  ends = tokens["word_end"].to_list()[0]
  word_index = tokens["word_index"].to_list()[0]
  spans = [(pieces[i], words[word_index[i]][begins[i]:ends[i]])
           for i in range(len(pieces))]
  # Lower-casing keeps ASCII byte lengths: exact offsets inside the word.
  # "café" is 5 bytes but "cafe" after accent stripping: each of its pieces
  # maps to the whole word (squad_lib falls back to whole words too).
  assert spans == [("the", "The"), ("broncos", "Broncos"), ("'", "'"),
                   ("won", "won"), ("c", "café"), ("##a", "café"),
                   ("##f", "café"), ("##e", "café")]
