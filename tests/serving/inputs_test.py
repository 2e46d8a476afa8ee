"""Input guards and `tf.Example` parsing of the signatures, run eagerly."""

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.serving import inputs
from realformer_tf.serving import options as options_lib
from realformer_tf.serving import text_processing
from tests.helpers import serving as common

OPTIONS = options_lib.ServingOptions(
    max_seq_length=8, max_position_embeddings=8, vocab_size=50,
    type_vocab_size=2)


def ids_features(**changes):
  features = dict(input_word_ids=[[2, 7, 9, 3], [2, 11, 3, 0]],
                  input_mask=[[1, 1, 1, 1], [1, 1, 1, 0]],
                  input_type_ids=[[0, 0, 1, 1], [0, 0, 0, 0]])
  features.update(changes)
  return {k: tf.constant(v, tf.int32) for k, v in features.items()}


def example(**features):
  return tf.train.Example(features=tf.train.Features(feature={
      k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
      for k, v in features.items()})).SerializeToString()


NAMES = {"input_word_ids": "input_ids", "input_mask": "input_mask",
         "input_type_ids": "segment_ids"}


def test_valid_ids_pass_unchanged():
  features = ids_features(masked_lm_positions=[[1, 2], [3, 0]])
  checked = inputs.check_ids(features, OPTIONS, "serving_default")
  for key, value in features.items():
    np.testing.assert_array_equal(checked[key], value)


@pytest.mark.parametrize("changes, message", [
    (dict(input_mask=[[1, 1, 1, 1]]), "input_mask and input_word_ids must "
     "have the same shape [batch, seq_length]"),
    (dict(input_word_ids=[[2] * 9] * 2, input_mask=[[1] * 9] * 2,
          input_type_ids=[[0] * 9] * 2),
     "the sequence length exceeds the maximum of the model, 8 tokens"),
    (dict(input_mask=[[1, 1, 1, 2], [1, 1, 1, 0]]),
     "input_mask values must be 0 or 1"),
    (dict(input_word_ids=[[2, 7, 50, 3], [2, 11, 3, 0]]),
     "input_word_ids must be < vocab_size=50"),
    (dict(input_word_ids=[[2, 7, -1, 3], [2, 11, 3, 0]]),
     "input_word_ids must be >= 0"),
    (dict(input_type_ids=[[0, 0, 2, 2], [0, 0, 0, 0]]),
     "input_type_ids must be < type_vocab_size=2"),
    (dict(masked_lm_positions=[[1, 4], [3, 0]]),
     "masked_lm_positions must be < the sequence length"),
    (dict(masked_lm_positions=[[1, 2]]), "masked_lm_positions and "
     "input_word_ids must have the same batch size"),
])
def test_bad_ids_are_named(changes, message):
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    inputs.check_ids(ids_features(**changes), OPTIONS, "serve_examples")
  assert "Invalid input to serve_examples: " + message in str(error.value)


def test_examples_of_different_lengths_are_zero_padded():
  records = [example(input_ids=[2, 7, 3], input_mask=[1, 1, 1],
                     segment_ids=[0, 0, 0]),
             example(input_ids=[2, 7, 9, 11, 3], input_mask=[1] * 5,
                     segment_ids=[0, 0, 1, 1, 1])]
  parsed = inputs.parse_examples(tf.constant(records), NAMES)
  np.testing.assert_array_equal(parsed["input_word_ids"],
                                [[2, 7, 3, 0, 0], [2, 7, 9, 11, 3]])
  np.testing.assert_array_equal(parsed["input_mask"],
                                [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
  np.testing.assert_array_equal(parsed["input_type_ids"],
                                [[0, 0, 0, 0, 0], [0, 0, 1, 1, 1]])
  assert parsed["input_word_ids"].dtype == tf.int32


@pytest.mark.parametrize("records, message", [
    ([example(input_ids=[2, 3], input_mask=[1, 1], segment_ids=[0, 0]),
      b"\xff not a proto",
      example(input_ids=[2, 3], input_mask=[1, 1], segment_ids=[0, 0]),
      b"\xff not a proto"],
     r"`examples` holds a string that is not a serialized tf.Example with "
     r"int64 features \['input_ids', 'input_mask', 'segment_ids'\] at batch "
     r"positions\W*1\W+3"),
    ([example(input_ids=[2, 3], input_mask=[1], segment_ids=[0, 0])],
     "feature `input_mask` must have as many values as `input_ids`"),
    ([example(input_ids=[], input_mask=[], segment_ids=[])],
     "every example needs a non-empty `input_ids` feature"),
])
def test_bad_examples_are_named(records, message):
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="(?s)Invalid input to serve_examples: " + message):
    inputs.parse_examples(tf.constant(records), NAMES)


@pytest.fixture(scope="module")
def packer(tmp_path_factory):
  vocab = common.write_vocab(str(tmp_path_factory.mktemp("vocab") / "v.txt"))
  return text_processing.BertTextPacker(vocab, True, max_seq_length=8)


def test_pack_texts_single_and_pair(packer):
  features, tokens, names = inputs.pack_texts(
      packer, packer.tokenize, text=tf.constant(["the dog", "a cat sat"]))
  assert names == ["text"] and len(tokens) == 1
  np.testing.assert_array_equal(features["input_word_ids"][:, 0], [2, 2])
  np.testing.assert_array_equal(features["input_mask"].numpy().sum(axis=1),
                                [4, 5])
  features, tokens, names = inputs.pack_texts(
      packer, packer.tokenize, text_a=tf.constant(["the dog"]),
      text_b=tf.constant(["a cat"]))
  assert names == ["text_a", "text_b"] and len(tokens) == 2
  np.testing.assert_array_equal(features["input_type_ids"][0],
                                [0, 0, 0, 0, 1, 1, 1, 0])


@pytest.mark.parametrize("texts, message", [
    (dict(text_a=["a dog", "a cat"], text_b=["a dog"]),
     "`text_a` and `text_b` must have the same batch size"),
    (dict(text=[b"fun", b"caf\xe9"]),
     r"`text` holds a string that is not valid UTF-8 at batch positions\W*1\W"),
    (dict(text=["fun", " "]), "`text` holds an empty string"),
])
def test_bad_texts_are_named(packer, texts, message):
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    inputs.pack_texts(packer, packer.tokenize,
                      **{k: tf.constant(v) for k, v in texts.items()})
