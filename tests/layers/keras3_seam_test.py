"""Tests for the TypeError a tf_keras layer raises on Keras 3 tensors."""

import keras
import pytest
import tensorflow as tf
import tf_keras

from realformer_tf.layers import RealFormerEncoderBlock
from realformer_tf.layers import ResidualMultiHeadAttention
from realformer_tf.networks import decoder as decoder_lib
from realformer_tf.networks import RealFormerEncoder


def test_issue_example_names_the_keras3_block():
  """The issue's failing example, verbatim but for the assertion."""
  hidden = tf.keras.Input(shape=(16, 64))
  mask = tf.keras.Input(shape=(16, 16), dtype="int32")
  with pytest.raises(TypeError) as error:
    RealFormerEncoderBlock(num_attention_heads=4, inner_dim=128,
                           layer_index=0)(hidden, scores=None,
                                          attention_mask=mask)
  message = str(error.value)
  assert "got a Keras 3 KerasTensor (from tf.keras / keras) as argument 0" in (
      message)
  assert "This is the tf_keras layer" in message
  assert "use realformer_tf.keras3.RealFormerEncoderBlock" in message


def test_keyword_tensor_and_variable():
  layer = ResidualMultiHeadAttention(num_heads=2, key_dim=4, name="attn")
  query = tf_keras.Input(shape=(3, 8))
  with pytest.raises(TypeError, match=r"attn \(ResidualMultiHeadAttention\): "
                     r"got a Keras 3 KerasTensor .* as attention_mask.*"
                     r"realformer_tf.keras3.ResidualMultiHeadAttention"):
    layer(query, attention_mask=keras.Input(shape=(3, 3)))
  with pytest.raises(TypeError, match=r"Keras 3 Variable .* as argument 1"):
    layer(query, keras.Variable(tf.zeros([1, 3, 8])))


def test_networks_name_their_counterpart_or_none():
  with pytest.raises(TypeError, match="realformer_tf.keras3.RealFormerBackbone"):
    RealFormerEncoder(vocab_size=10, hidden_size=8, num_layers=1,
                      num_attention_heads=2, inner_dim=16,
                      max_sequence_length=4)(
                          dict(input_word_ids=keras.Input((4,), dtype="int32")))
  stack = decoder_lib.RealFormerDecoder(
      num_layers=1, num_attention_heads=2, intermediate_size=16)
  with pytest.raises(TypeError,
                     match=r"as argument 0\[0\].*keras3 has no RealFormerDecoder"):
    stack([keras.Input((3, 8)), tf_keras.Input((3, 8))])


def test_tf_keras_inputs_still_work():
  hidden = tf_keras.Input(shape=(4, 8))
  out, scores = RealFormerEncoderBlock(num_attention_heads=2,
                                       inner_dim=16)(hidden)
  assert scores.shape.as_list() == [None, 2, 4, 4]
  assert out.shape.as_list() == [None, 4, 8]
