"""Model Garden TF2 BERT checkpoints (BertEncoder, BertEncoderV2) into RealFormer."""

import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from official.nlp.modeling import models as mg_models
from realformer_tf.checkpoints import errors
from realformer_tf import utils
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders

BERT = dict(vocab_size=30, hidden_size=16, num_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=16,
            type_vocab_size=2, dropout_rate=0.0, attention_dropout_rate=0.0)
IDS = np.array([[2, 5, 7, 9, 0, 0], [3, 4, 8, 1, 6, 2]], np.int32)
INPUTS = dict(input_word_ids=IDS, input_mask=(IDS > 0).astype(np.int32),
              input_type_ids=np.array([[0, 0, 1, 1, 0, 0]] * 2, np.int32))


def _mg_config(encoder_type="bert_v2", **changes):
  return mg_encoders.EncoderConfig(
      type=encoder_type,
      **{encoder_type: mg_encoders.BertEncoderConfig(**dict(BERT, **changes))})


def _mg_encoder(config):
  encoder = mg_encoders.build_encoder(config)
  outputs = encoder(INPUTS)
  return encoder, outputs


@pytest.fixture(scope="module")
def v2_checkpoint(tmp_path_factory):
  """A BertEncoderV2 written as Model Garden's converter does: encoder=."""
  config = _mg_config()
  encoder, outputs = _mg_encoder(config)
  prefix = tf.train.Checkpoint(encoder=encoder).write(
      os.path.join(str(tmp_path_factory.mktemp("v2")), "ckpt"))
  return prefix, config, outputs


def test_bert_encoder_v2_identical_with_residual_none(v2_checkpoint):
  prefix, config, expected = v2_checkpoint
  encoder = tf2_checkpoint.encoder_from_tf2_checkpoint(
      prefix, config, residual_attention="none")
  outputs = encoder(INPUTS)
  np.testing.assert_array_equal(outputs["sequence_output"].numpy(),
                                expected["sequence_output"].numpy())
  np.testing.assert_array_equal(outputs["pooled_output"].numpy(),
                                expected["pooled_output"].numpy())
  # A BERT config has no residual_attention: RealFormer ("sum") by default,
  # warm-started from the same weights (small init: nearly uniform attention,
  # so the outputs differ only slightly).
  summed = tf2_checkpoint.encoder_from_tf2_checkpoint(prefix, config)
  assert summed.get_config()["residual_attention"] == "sum"
  np.testing.assert_array_equal(
      summed.get_embedding_table().numpy(),
      encoder.get_embedding_table().numpy())
  assert np.abs(summed(INPUTS)["sequence_output"].numpy() -
                expected["sequence_output"].numpy()).max() > 1e-6


def test_pretrainer_under_model_key(tmp_path):
  """tf.train.Checkpoint(model=BertPretrainerV2): encoder at model/encoder_network."""
  config = _mg_config()
  encoder, expected = _mg_encoder(config)
  pretrainer = mg_models.BertPretrainerV2(encoder_network=encoder)
  prefix = tf.train.Checkpoint(model=pretrainer).write(
      os.path.join(str(tmp_path), "ckpt"))
  # A dict of RealFormerEncoderConfig fields works as well as a config.
  loaded = tf2_checkpoint.encoder_from_tf2_checkpoint(
      prefix, dict(BERT, residual_attention="none", final_layer_norm=False))
  outputs = loaded(INPUTS)
  np.testing.assert_array_equal(outputs["sequence_output"].numpy(),
                                expected["sequence_output"].numpy())
  assert tf2_checkpoint.load_encoder_weights(prefix, loaded) == (
      "model/encoder_network")


def test_functional_bert_encoder(tmp_path):
  """The functional BertEncoder (type 'bert') maps object by object too."""
  config = _mg_config("bert")
  encoder, expected = _mg_encoder(config)
  prefix = tf.train.Checkpoint(encoder=encoder).write(
      os.path.join(str(tmp_path), "ckpt"))
  loaded = tf2_checkpoint.encoder_from_tf2_checkpoint(
      prefix, config, residual_attention="none")
  outputs = loaded(INPUTS)
  # Different attention kernels, same math: float32 rounding only.
  np.testing.assert_allclose(outputs["sequence_output"].numpy(),
                             expected["sequence_output"].numpy(), atol=1e-5)
  np.testing.assert_allclose(outputs["pooled_output"].numpy(),
                             expected["pooled_output"].numpy(), atol=1e-5)


def test_extra_layer_in_checkpoint_raises(tmp_path):
  encoder, _ = _mg_encoder(_mg_config(num_layers=3))
  prefix = tf.train.Checkpoint(encoder=encoder).write(
      os.path.join(str(tmp_path), "ckpt"))
  with pytest.raises(errors.CheckpointMismatchError) as info:
    tf2_checkpoint.encoder_from_tf2_checkpoint(prefix, _mg_config())
  message = str(info.value)
  assert ("encoder/_transformer_layers/2/_intermediate_dense/kernel/"
          ".ATTRIBUTES/VARIABLE_VALUE (shape [16, 32])") in message
  assert "unused by the model (16)" in message


def test_missing_layer_and_shape_mismatch_raise(v2_checkpoint):
  prefix, _, _ = v2_checkpoint
  with pytest.raises(errors.CheckpointMismatchError) as info:
    tf2_checkpoint.encoder_from_tf2_checkpoint(
        prefix, _mg_config(num_layers=3, vocab_size=31))
  message = str(info.value)
  assert "Missing from the checkpoint (16)" in message
  assert "transformer/layer_2/self_attention/query/kernel:0 (shape [16, 2, 8])" \
      in message
  # Keras may suffix the encoder's name (real_former_encoder_3/...).
  assert re.search(
      r"encoder/_embedding_layer/embeddings/\.ATTRIBUTES/VARIABLE_VALUE -> "
      r"real_former_encoder(_\d+)?/word_embeddings/embeddings:0: "
      r"checkpoint \[30, 16\], model \[31, 16\]", message)


def test_bad_inputs(tmp_path, v2_checkpoint):
  prefix, config, _ = v2_checkpoint
  other = tf.train.Checkpoint(head=tf.train.Checkpoint(v=tf.Variable(1.0)))
  other_prefix = other.write(os.path.join(str(tmp_path), "other", "ckpt"))
  with pytest.raises(ValueError, match=r"top-level objects are \['head'\]"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(other_prefix, config)
  with pytest.raises(ValueError, match="unknown key"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(prefix, dict(BERT, hidden=3))
  with pytest.raises(ValueError, match="residual_attention must be one of"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(prefix, config, "max")
  with pytest.raises(ValueError, match="does not exist"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(prefix + "x", config)
  with tf.Graph().as_default():
    variable = tf.compat.v1.get_variable("bert/pooler/dense/bias", [2])
    saver = tf.compat.v1.train.Saver([variable])
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf1_prefix = saver.save(session, os.path.join(str(tmp_path), "tf1"),
                              write_meta_graph=False)
  with pytest.raises(ValueError, match="encoder_from_tf1_checkpoint"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(tf1_prefix, config)


def test_truncated_checkpoint_is_named(v2_checkpoint, tmp_path):
  prefix, config, _ = v2_checkpoint
  copy = os.path.join(str(tmp_path), "ckpt")
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(prefix + suffix, copy + suffix)
  with open(copy + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  with pytest.raises(ValueError, match=re.escape(repr(copy)) +
                     " is not a readable checkpoint: .*hold 100 bytes.*"
                     r"\(truncated\)"):
    tf2_checkpoint.encoder_from_tf2_checkpoint(copy, config)


def test_shapes_only_graph_leaves_eager_models_working():
  """A tf_keras model built in a graph rewrote its classes' bases to v1, and
  every eager instance made before failed its next call ("invalid state"):
  `load_run` broke a user's own encoder. `shapes_only_graph` restores them."""
  config = tf2_checkpoint.realformer_config_from(BERT)
  eager = encoders.build_realformer_encoder(config)
  expected = eager(INPUTS)["sequence_output"].numpy()
  with tf.Graph().as_default():  # What the loaders did: the eager one breaks.
    encoders.build_realformer_encoder(config)(utils.dummy_inputs())
  with pytest.raises(ValueError, match="invalid state"):
    eager(INPUTS)
  encoders.build_realformer_encoder(config)  # Swaps the bases back.
  with tf2_checkpoint.shapes_only_graph() as built:
    shadow = encoders.build_realformer_encoder(config)
    built.append(shadow)
    shadow(utils.dummy_inputs())
    assert not tf.executing_eagerly()
  np.testing.assert_array_equal(eager(INPUTS)["sequence_output"].numpy(),
                                expected)
