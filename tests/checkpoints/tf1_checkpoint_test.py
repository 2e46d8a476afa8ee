"""TF1 RealFormer/BERT checkpoints vs. an independent NumPy forward pass."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.configs import encoders
from tests.helpers import tf1_reference as ref

CONFIG = ref.TINY_CONFIG
SHAPES = ref.tf1_variable_shapes(CONFIG)
VALUES = ref.random_values(SHAPES)


@pytest.fixture(scope="module")
def tf1_dir(tmp_path_factory):
  """A TF1 checkpoint with heads and Adam slots; bert_config.json beside it."""
  directory = str(tmp_path_factory.mktemp("tf1"))
  prefix = ref.write_tf1_checkpoint(directory, VALUES, CONFIG)
  return prefix, os.path.join(directory, "bert_config.json")


def _write_config(tmp_path, config, name="bert_config.json"):
  path = os.path.join(str(tmp_path), name)
  with open(path, "w") as f:
    json.dump(config, f)
  return path


def _built_encoder(config):
  encoder = encoders.build_realformer_encoder(config)
  ids = tf.zeros([1, 2], tf.int32)
  _ = encoder(dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                   input_type_ids=ids))
  return encoder


def _inputs():
  ids, mask, types = ref.example_inputs(CONFIG)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


@pytest.mark.parametrize(
    "use_running_mean,residual_attention,expected_mode", [
        (False, None, "sum"),    # RealFormer default.
        (True, None, "mean"),    # bert_config.json "use_running_mean": true.
        (False, "none", "none"),  # Google BERT as plain BERT.
    ])
def test_encoder_matches_numpy(tf1_dir, tmp_path, use_running_mean,
                               residual_attention, expected_mode):
  prefix, _ = tf1_dir
  config_file = _write_config(
      tmp_path, dict(CONFIG, use_running_mean=use_running_mean))
  encoder = tf1_checkpoint.encoder_from_tf1_checkpoint(
      prefix, config_file, residual_attention=residual_attention)
  assert encoder.get_config()["residual_attention"] == expected_mode

  inputs = _inputs()
  outputs = encoder(inputs, training=False)
  sequence, pooled = ref.numpy_forward(
      VALUES, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
      inputs["input_type_ids"], use_running_mean=expected_mode == "mean",
      residual=expected_mode != "none")
  # All positions, padded ones included: TF1's -10000 and the encoder's
  # -1e9 mask adders both underflow exp() to exactly 0.
  np.testing.assert_allclose(outputs["sequence_output"].numpy(), sequence,
                             rtol=0, atol=1e-5)
  np.testing.assert_allclose(outputs["pooled_output"].numpy(), pooled,
                             rtol=0, atol=1e-5)


def test_reference_modes_differ():
  """The test weights make sum / mean / none clearly different."""
  inputs = _inputs()
  args = (VALUES, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
          inputs["input_type_ids"])
  plain, _ = ref.numpy_forward(*args, residual=False)
  summed, _ = ref.numpy_forward(*args)
  mean, _ = ref.numpy_forward(*args, use_running_mean=True)
  assert np.abs(plain - summed).max() > 0.1
  assert np.abs(summed - mean).max() > 0.1


def test_pretrainer_heads_match_numpy(tf1_dir):
  prefix, config_file = tf1_dir
  pretrainer = tf1_checkpoint.pretrainer_from_tf1_checkpoint(prefix,
                                                             config_file)
  inputs = _inputs()
  positions = np.array([[1, 3], [2, 5], [0, 3]], np.int32)
  outputs = pretrainer(dict(inputs, masked_lm_positions=positions))
  sequence, pooled = ref.numpy_forward(
      VALUES, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
      inputs["input_type_ids"])
  mlm = ref.numpy_mlm_logits(VALUES, sequence, positions)
  nsp = ref.numpy_nsp_logits(VALUES, pooled)
  assert outputs["mlm_logits"].shape == (3, 2, CONFIG["vocab_size"])
  # Logits reach |10|; float32 rounding is relative there.
  np.testing.assert_allclose(outputs["mlm_logits"].numpy(), mlm, rtol=1e-6,
                             atol=1e-5)
  np.testing.assert_allclose(outputs["next_sentence"].numpy(), nsp, rtol=0,
                             atol=1e-5)
  head = pretrainer.classification_heads[0]
  assert head.name == "next_sentence"
  np.testing.assert_array_equal(head.dense.kernel.numpy(),
                                VALUES["bert/pooler/dense/kernel"])
  np.testing.assert_array_equal(
      head.out_proj.kernel.numpy(),
      VALUES["cls/seq_relationship/output_weights"].T)


def test_report_ignores_optimizer_state_and_skips_heads(tf1_dir):
  prefix, config_file = tf1_dir
  encoder = _built_encoder(tf1_checkpoint.encoder_config_from_bert_config(
      tf1_checkpoint.read_bert_config(config_file)))
  report = tf1_checkpoint.load_tf1_weights(
      prefix, tf1_checkpoint.encoder_variable_map(encoder),
      skippable=tf1_checkpoint.HEAD_VARIABLES)
  encoder_names = [n for n in SHAPES if n.startswith("bert/")]
  assert report["loaded"] == sorted(encoder_names)
  assert len(report["loaded"]) == 7 + 16 * CONFIG["num_hidden_layers"]
  assert report["skipped"] == sorted(tf1_checkpoint.HEAD_VARIABLES)
  assert report["ignored"] == sorted(
      [f"{n}/{s}" for n in SHAPES for s in ("adam_m", "adam_v")] +
      ["global_step"])
  np.testing.assert_array_equal(
      encoder.transformer_layers[2]._attention_layer._query_dense.kernel  # pylint: disable=protected-access
      .numpy(),
      VALUES["bert/encoder/layer_2/attention/self/query/kernel"].reshape(
          32, 4, 8))


def test_pre_ln_encoder_is_refused():
  """Same names and shapes as TF1's Post-LN: only this check tells them apart."""
  config = tf1_checkpoint.encoder_config_from_bert_config(
      dict(CONFIG, use_running_mean=False))
  config.norm_first = True
  with pytest.raises(ValueError, match="is Post-LN; the encoder has "
                     "norm_first=True"):
    tf1_checkpoint.encoder_variable_map(_built_encoder(config))


@pytest.fixture(scope="module")
def fresh_encoder():
  return _built_encoder(tf1_checkpoint.encoder_config_from_bert_config(
      dict(CONFIG, use_running_mean=False)))


def _assert_raises_and_untouched(encoder, prefix, *fragments):
  before = [w.numpy().copy() for w in encoder.weights]
  with pytest.raises(errors.CheckpointMismatchError) as info:
    tf1_checkpoint.load_tf1_weights(
        prefix, tf1_checkpoint.encoder_variable_map(encoder),
        skippable=tf1_checkpoint.HEAD_VARIABLES)
  for fragment in fragments:
    assert fragment in str(info.value)
  for old, weight in zip(before, encoder.weights):
    np.testing.assert_array_equal(old, weight.numpy())


def test_missing_variable_raises(tmp_path, fresh_encoder):
  name = "bert/encoder/layer_1/attention/self/key/bias"
  prefix = ref.write_tf1_checkpoint(str(tmp_path), VALUES, drop=[name])
  _assert_raises_and_untouched(fresh_encoder, prefix,
                               f"{name} (expected shape [32])",
                               "Missing from the checkpoint (1)")


def test_unexpected_variable_raises(tmp_path, fresh_encoder):
  name = "bert/encoder/layer_3/output/dense/bias"
  prefix = ref.write_tf1_checkpoint(
      str(tmp_path), VALUES, extra={name: np.zeros([32], np.float32)})
  _assert_raises_and_untouched(fresh_encoder, prefix,
                               f"{name} (shape [32])",
                               "unused by the model (1)")


def test_shape_mismatch_raises(tmp_path, fresh_encoder):
  name = "bert/encoder/layer_0/intermediate/dense/kernel"
  values = dict(VALUES, **{name: np.zeros([32, 50], np.float32)})
  prefix = ref.write_tf1_checkpoint(str(tmp_path), values)
  _assert_raises_and_untouched(fresh_encoder, prefix,
                               f"{name}: checkpoint [32, 50], model [32, 48]")


def test_pretrainer_needs_heads(tmp_path):
  encoder_only = ref.random_values(ref.tf1_variable_shapes(CONFIG, False))
  prefix = ref.write_tf1_checkpoint(str(tmp_path), encoder_only, CONFIG)
  with pytest.raises(errors.CheckpointMismatchError,
                     match="cls/seq_relationship/output_weights"):
    tf1_checkpoint.pretrainer_from_tf1_checkpoint(
        prefix, os.path.join(str(tmp_path), "bert_config.json"))


@pytest.mark.parametrize("change,fragment", [
    (dict(hidden_size=None), "lacks the required key 'hidden_size'"),
    (dict(use_runing_mean=True), "unknown key(s) ['use_runing_mean']"),
    (dict(num_hidden_layers="3"), "key 'num_hidden_layers' must be a positive"),
    (dict(hidden_act="swish"), "key 'hidden_act' must be one of"),
    (dict(use_running_mean=1), "key 'use_running_mean' must be true or false"),
    (dict(hidden_dropout_prob=1.5), "key 'hidden_dropout_prob' must be in"),
    (dict(num_attention_heads=5), "is not divisible by num_attention_heads=5"),
])
def test_bad_bert_config(tmp_path, change, fragment):
  config = {k: v for k, v in dict(CONFIG, **change).items() if v is not None}
  path = _write_config(tmp_path, config)
  with pytest.raises(ValueError) as info:
    tf1_checkpoint.read_bert_config(path)
  assert fragment in str(info.value)
  assert path in str(info.value)


def test_bad_files(tmp_path, tf1_dir):
  prefix, config_file = tf1_dir
  not_json = os.path.join(str(tmp_path), "bad.json")
  with open(not_json, "w") as f:
    f.write("{vocab_size: 3")
  with pytest.raises(ValueError, match="is not valid JSON"):
    tf1_checkpoint.read_bert_config(not_json)
  with pytest.raises(FileNotFoundError, match="nope.json"):
    tf1_checkpoint.read_bert_config(os.path.join(str(tmp_path), "nope.json"))
  with pytest.raises(ValueError, match="model.ckpt-7.index"):
    tf1_checkpoint.encoder_from_tf1_checkpoint(prefix[:-4] + "7", config_file)
  tf2_prefix = tf.train.Checkpoint(v=tf.Variable(1.0)).write(
      os.path.join(str(tmp_path), "tf2", "ckpt"))
  with pytest.raises(ValueError, match="encoder_from_tf2_checkpoint"):
    tf1_checkpoint.encoder_from_tf1_checkpoint(tf2_prefix, config_file)
