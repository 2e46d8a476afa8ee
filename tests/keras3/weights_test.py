"""tf_keras RealFormerEncoder runs <-> RealFormerBackbone (weights.py)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import weights
from tests.helpers import keras3_encoders as utils
from tests.helpers import keras3_layer_checks as layer_checks


def _tf_keras_encoder(seed=5, **changes):
  encoder = encoders.build_realformer_encoder(
      encoders.RealFormerEncoderConfig(**{**utils.TINY_TF_KERAS, **changes}))
  encoder(utils.tf_keras_inputs(utils.backbone_inputs()))
  return utils.randomize(encoder, seed)


def _tf_keras_outputs(encoder, inputs):
  out = encoder(utils.tf_keras_inputs(inputs))
  return {k: out[k].numpy() for k in ("sequence_output", "pooled_output")}


def _write_run(run_dir, encoder, **encoder_fields):
  """A model dir as train.py writes it: params.yaml and a checkpoint keeping
  the encoder where BertPretrainerV2 does (`model/encoder_network`)."""
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  params.override({"task": {"model": {"encoder": {"any": {
      **utils.TINY_TF_KERAS, **encoder_fields}}}}})
  os.makedirs(run_dir)
  train_utils.serialize_config(params, run_dir)
  model = tf.train.Checkpoint(encoder_network=encoder)
  return tf.train.CheckpointManager(tf.train.Checkpoint(model=model), run_dir,
                                    max_to_keep=1).save(checkpoint_number=3)


@pytest.mark.parametrize("mode,norm_first", [("sum", False), ("none", False),
                                             ("sum", True), ("none", True)])
def test_tf_keras_encoder_round_trip(mode, norm_first):
  encoder = _tf_keras_encoder(residual_attention=mode, norm_first=norm_first)
  inputs = utils.backbone_inputs()
  expected = _tf_keras_outputs(encoder, inputs)
  backbone = weights.from_tf_keras_encoder(encoder)
  assert (backbone.residual_attention, backbone.normalize_first,
          backbone.use_final_layer_norm) == (mode, norm_first, norm_first)
  assert backbone.activation == "gelu_approximate"
  utils.assert_outputs_close(utils.to_numpy(backbone(inputs)), expected)
  back = weights.to_tf_keras_encoder(backbone)
  utils.assert_outputs_close(_tf_keras_outputs(back, inputs), expected)


def test_load_run_and_save_run(tmp_path):
  encoder = _tf_keras_encoder(residual_attention="mean")
  inputs = utils.backbone_inputs(seed=2)
  expected = _tf_keras_outputs(encoder, inputs)
  run_dir = os.path.join(tmp_path, "run")
  prefix = _write_run(run_dir, encoder, residual_attention="mean")
  for path in (run_dir, prefix):  # The latest checkpoint, or that one.
    backbone = weights.load_run(path)
    assert backbone.residual_attention == "mean"
    utils.assert_outputs_close(utils.to_numpy(backbone(inputs)), expected)

  out_dir = os.path.join(tmp_path, "k3")
  assert weights.save_run(backbone, out_dir) == os.path.join(out_dir, "ckpt-1")
  assert sorted(os.listdir(out_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml"]
  # What Model Garden fine-tuning restores (encoder + GLUE's pooler) ...
  config = weights.run_encoder_config(out_dir)
  assert config.residual_attention == "mean"
  restored = encoders.build_realformer_encoder(config)
  restored(utils.tf_keras_inputs(inputs))
  # As fine-tuning's `initialize` does; asserts every encoder variable read.
  assert tf2_checkpoint.load_encoder_weights(out_dir, restored,
                                             "encoder") == "encoder"
  utils.assert_outputs_close(_tf_keras_outputs(restored, inputs), expected)
  reader = tf.train.load_checkpoint(out_dir)
  np.testing.assert_array_equal(
      reader.get_tensor("next_sentence..pooler_dense/kernel/.ATTRIBUTES/"
                        "VARIABLE_VALUE"), encoder.pooler_layer.kernel.numpy())
  # ... and back into Keras 3, with "none" on request.
  none = weights.load_run(out_dir, residual_attention="none")
  assert none.residual_attention == "none"
  for a, b in zip(none.weights, backbone.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.skipif(layer_checks.in_backend_rerun(),
                    reason="TF checkpoints and tf_keras only: the same under "
                    "every Keras backend")
def test_errors_and_overwrite(tmp_path):
  encoder = _tf_keras_encoder()
  run_dir = os.path.join(tmp_path, "run")
  _write_run(run_dir, encoder)
  with pytest.raises(errors.CheckpointMismatchError,
                     match=r"(?s)Shape mismatches.*checkpoint \[16, 32\], "
                     r"model \[16, 40\]"):
    weights.load_run(run_dir, dict(utils.TINY_TF_KERAS, intermediate_size=40))
  bare = os.path.join(tmp_path, "bare")
  tf.train.Checkpoint(encoder=encoder).save(os.path.join(bare, "ckpt"))
  with pytest.raises(ValueError, match="pass encoder_config="):
    weights.load_run(bare)
  assert weights.load_run(bare, utils.TINY_TF_KERAS).num_layers == 2
  with pytest.raises(ValueError, match="embedding projection"):
    weights.backbone_kwargs(encoders.RealFormerEncoderConfig(
        **utils.TINY_TF_KERAS, embedding_size=8))
  exact = backbone_lib.RealFormerBackbone(**utils.TINY,
                                          activation="gelu")
  with pytest.raises(ValueError, match="exact GELU"):
    weights.to_tf_keras_encoder(exact)
  with pytest.raises(FileExistsError, match="overwrite=True"):
    weights.save_run(exact, run_dir)
  assert os.path.exists(os.path.join(run_dir, "params.yaml"))
  # overwrite=True replaces the directory whole, once the new one is written.
  with pytest.raises(ValueError, match="exact GELU"):
    weights.save_run(exact, run_dir, overwrite=True)
  assert os.path.exists(os.path.join(run_dir, "params.yaml"))
  none = backbone_lib.RealFormerBackbone(**utils.TINY,
                                         residual_attention="none")
  weights.save_run(none, run_dir, overwrite=True)
  assert sorted(os.listdir(run_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml"]
  assert weights.run_encoder_config(run_dir).residual_attention == "none"
