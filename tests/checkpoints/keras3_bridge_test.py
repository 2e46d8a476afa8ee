"""tf_keras RealFormerEncoder runs <-> RealFormerBackbone (keras3_bridge.py):
round trips, runs and their damaged or half-swapped directories."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import keras3_bridge as bridge
from realformer_tf.checkpoints import keras3_configs
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.keras3 import backbone as backbone_lib
from tests.helpers import file_trees
from tests.helpers import keras3_encoders as utils
from tests.helpers import kill_writer


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
  backbone = bridge.from_tf_keras_encoder(encoder)
  assert (backbone.residual_attention, backbone.normalize_first,
          backbone.use_final_layer_norm) == (mode, norm_first, norm_first)
  assert backbone.activation == "gelu_approximate"
  utils.assert_outputs_close(utils.to_numpy(backbone(inputs)), expected)
  back = bridge.to_tf_keras_encoder(backbone)
  utils.assert_outputs_close(_tf_keras_outputs(back, inputs), expected)


def test_load_run_and_save_run(tmp_path):
  encoder = _tf_keras_encoder(residual_attention="mean")
  inputs = utils.backbone_inputs(seed=2)
  expected = _tf_keras_outputs(encoder, inputs)
  run_dir = os.path.join(tmp_path, "run")
  prefix = _write_run(run_dir, encoder, residual_attention="mean")
  for path in (run_dir, prefix):  # The latest checkpoint, or that one.
    backbone = bridge.load_run(path)
    assert backbone.residual_attention == "mean"
    utils.assert_outputs_close(utils.to_numpy(backbone(inputs)), expected)

  out_dir = os.path.join(tmp_path, "k3")
  assert bridge.save_run(backbone, out_dir) == os.path.join(out_dir, "ckpt-1")
  assert sorted(os.listdir(out_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml"]
  # What Model Garden fine-tuning restores (encoder + GLUE's pooler) ...
  config = keras3_configs.run_encoder_config(out_dir)
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
  none = bridge.load_run(out_dir, residual_attention="none")
  assert none.residual_attention == "none"
  for a, b in zip(none.weights, backbone.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_errors_and_overwrite(tmp_path):
  encoder = _tf_keras_encoder()
  run_dir = os.path.join(tmp_path, "run")
  _write_run(run_dir, encoder)
  with pytest.raises(errors.CheckpointMismatchError,
                     match=r"(?s)Shape mismatches.*checkpoint \[16, 32\], "
                     r"model \[16, 40\]"):
    bridge.load_run(run_dir, dict(utils.TINY_TF_KERAS, intermediate_size=40))
  bare = os.path.join(tmp_path, "bare")
  tf.train.Checkpoint(encoder=encoder).save(os.path.join(bare, "ckpt"))
  with pytest.raises(ValueError, match="pass encoder_config="):
    bridge.load_run(bare)
  assert bridge.load_run(bare, utils.TINY_TF_KERAS).num_layers == 2
  with pytest.raises(ValueError, match="embedding projection"):
    keras3_configs.backbone_kwargs(encoders.RealFormerEncoderConfig(
        **utils.TINY_TF_KERAS, embedding_size=8))
  exact = backbone_lib.RealFormerBackbone(**utils.TINY,
                                          activation="gelu")
  with pytest.raises(ValueError, match="exact GELU"):
    bridge.to_tf_keras_encoder(exact)
  with pytest.raises(FileExistsError, match="overwrite=True"):
    bridge.save_run(exact, run_dir)
  assert os.path.exists(os.path.join(run_dir, "params.yaml"))
  with pytest.raises(ValueError, match="exact GELU"):
    bridge.save_run(exact, os.path.join(tmp_path, "fresh"))
  assert not os.path.exists(os.path.join(tmp_path, "fresh"))
  # overwrite=True replaces a converted directory whole, once the new one
  # is written.
  none = backbone_lib.RealFormerBackbone(**utils.TINY,
                                         residual_attention="none")
  converted = os.path.join(tmp_path, "converted")
  bridge.save_run(exact_free(), converted)
  bridge.save_run(none, converted, overwrite=True)
  assert sorted(os.listdir(converted)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml"]
  assert keras3_configs.run_encoder_config(
      converted).residual_attention == "none"


def exact_free():
  return backbone_lib.RealFormerBackbone(**utils.TINY)


def test_overwrite_refuses_a_train_py_run_and_its_parent(tmp_path):
  """38.3: `save_run(load_run(D), D, overwrite=True)` on a train.py run D
  (params.yaml, ckpt-3, train.lock) is refused naming what D holds, and so
  is D's parent; both are left byte for byte as they were."""
  run_dir = os.path.join(tmp_path, "runs", "run")
  _write_run(run_dir, _tf_keras_encoder())
  open(os.path.join(run_dir, "train.lock"), "w").close()
  parent = os.path.dirname(run_dir)
  before = file_trees.files_under(parent)
  backbone = bridge.load_run(run_dir)
  with pytest.raises(FileExistsError, match=(
      r"run is a train.py run directory \(it holds params.yaml, "
      r"train.lock\): ckpt-3.data-00000-of-00001, ckpt-3.index, "
      r"params.yaml, train.lock are not part of a converted checkpoint")):
    bridge.save_run(backbone, run_dir, overwrite=True)
  with pytest.raises(FileExistsError,
                     match=r"runs is not a converted checkpoint.*: run is "
                     "not part of"):
    bridge.save_run(backbone, parent, overwrite=True)
  assert file_trees.files_under(parent) == before
  assert sorted(os.listdir(tmp_path)) == ["runs"]


def save_tiny_run(output_dir, overwrite=False, residual_attention="sum"):
  """`kill_writer`'s target: `save_run` of a tiny backbone."""
  backbone = backbone_lib.RealFormerBackbone(
      **utils.TINY, residual_attention=residual_attention)
  return bridge.save_run(backbone, output_dir, overwrite=overwrite)


def _files(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


def _two_checkpoints(run_dir):
  """A run with ckpt-3 (returned: its encoder's outputs) and a newer ckpt-4
  holding other weights (returned: its prefix)."""
  inputs = utils.backbone_inputs(seed=2)
  first = _tf_keras_encoder(seed=5)
  expected = _tf_keras_outputs(first, inputs)
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  params.override(
      {"task": {"model": {"encoder": {"any": utils.TINY_TF_KERAS}}}})
  os.makedirs(run_dir)
  train_utils.serialize_config(params, run_dir)
  model = tf.train.Checkpoint(encoder_network=first)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model),
                                       run_dir, max_to_keep=2)
  manager.save(checkpoint_number=3)
  utils.randomize(first, seed=9)
  return inputs, expected, manager.save(checkpoint_number=4)


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_load_run_falls_back_past_a_damaged_latest_checkpoint(
    tmp_path, caplog, damage):
  run_dir = os.path.join(tmp_path, "run")
  inputs, expected, latest = _two_checkpoints(run_dir)
  data = latest + ".data-00000-of-00001"
  size = os.path.getsize(data)
  with open(data, "r+b") as f:
    if damage == "truncated":  # Caught by its size, before any read.
      f.truncate(size // 2)
    else:  # Whole length, a tensor's checksum fails when it is read.
      f.seek(size // 2)
      byte = f.read(1)
      f.seek(size // 2)
      f.write(bytes([byte[0] ^ 0xFF]))
  with caplog.at_level("WARNING"):
    backbone = bridge.load_run(run_dir)
  utils.assert_outputs_close(utils.to_numpy(backbone(inputs)), expected)
  assert f"skipped unreadable newer checkpoints ({latest}" in caplog.text
  assert "using " + latest[:-1] + "3" in caplog.text
  # The damaged one named alone is an error naming it and what is wrong.
  with pytest.raises(ValueError, match=r"ckpt-4' is not (a )?readable.*" +
                     ("truncated" if damage == "truncated" else "Checksum")):
    bridge.load_run(latest)


def test_a_keras_file_is_named_for_what_it_is(tmp_path):
  path = str(tmp_path / "model.keras")
  with open(path, "wb") as f:
    f.write(b"PK\x03\x04" + b"\0" * 100)  # A zip's start, no directory.
  with pytest.raises(ValueError, match=r"model.keras \(104 bytes\) is not a "
                     r"complete \.keras file.*killed part way"):
    bridge.load_run(path)


# Items 6 and 7 of issue 30 on the JAX backend: the bridge reads and writes
# TF checkpoints beside a Keras 3 backbone of any backend.
_ON_JAX = """
import os, shutil, subprocess, sys
import keras
import tensorflow as tf
from realformer_tf.checkpoints import keras3_bridge as bridge
from realformer_tf.keras3 import backbone as backbone_lib
from tests.helpers import file_trees
from tests.helpers import keras3_encoders as utils
assert keras.config.backend() == "jax"
d = sys.argv[1]
out = os.path.join(d, "k3")
backbone = utils.randomize(backbone_lib.RealFormerBackbone(**utils.TINY))
bridge.save_run(backbone, out)
pid = int(subprocess.run(
    [sys.executable, "-c", "import os; print(os.getpid())"],
    capture_output=True, text=True).stdout)
os.rename(out, f"{out}.old-{pid}")  # As a kill between the two renames.
shutil.copytree(f"{out}.old-{pid}", f"{out}.tmp-{pid}")
file_trees.claim_as_ours(f"{out}.old-{pid}", pid)
file_trees.claim_as_ours(f"{out}.tmp-{pid}", pid)
try:
  bridge.load_run(out)
  raise SystemExit("no error")
except ValueError as e:
  assert f"k3.old-{pid} holds it" in str(e), e
bridge.save_run(backbone, out, overwrite=True)
assert os.listdir(d) == ["k3"], os.listdir(d)
inputs = utils.backbone_inputs()
expected = utils.to_numpy(backbone(inputs))
newer = tf.train.Checkpoint(encoder=bridge.to_tf_keras_encoder(
    utils.randomize(backbone_lib.RealFormerBackbone(**utils.TINY), 7))).write(
        os.path.join(out, "ckpt-2"))
tf.compat.v1.train.update_checkpoint_state(
    out, newer, all_model_checkpoint_paths=[os.path.join(out, "ckpt-1"), newer])
data = newer + ".data-00000-of-00001"
with open(data, "r+b") as f:
  f.truncate(os.path.getsize(data) // 2)
utils.assert_outputs_close(utils.to_numpy(bridge.load_run(out)(inputs)),
                           expected)
print("ok")
"""


def test_killed_swap_and_damaged_latest_on_jax(tmp_path):
  env = dict(os.environ, KERAS_BACKEND="jax",
             PYTHONPATH=kill_writer.REPO_ROOT, JAX_PLATFORMS="cpu",
             TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  result = subprocess.run([sys.executable, "-c", _ON_JAX, str(tmp_path)],
                          cwd=kill_writer.REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600,
                          check=False)
  assert result.returncode == 0 and result.stdout.strip().endswith("ok"), (
      result.stdout + result.stderr)[-4000:]


def test_save_run_keeps_a_users_look_alikes(tmp_path):
  """38.4: `mymodel.old-20240101/` and `mymodel.tmp-20240102/` (a user's
  dated copies, named like our leftovers but without our owner record)
  survive `save_run(..., mymodel, overwrite=True)` byte for byte."""
  out = os.path.join(tmp_path, "mymodel")
  save_tiny_run(out)
  copies = [f"{out}.old-20240101", f"{out}.tmp-20240102"]
  for copy in copies:
    shutil.copytree(out, copy)
  before = {copy: file_trees.files_under(copy) for copy in copies}
  save_tiny_run(out, overwrite=True, residual_attention="mean")
  assert {copy: file_trees.files_under(copy) for copy in copies} == before
  assert sorted(os.listdir(tmp_path)) == [
      "mymodel", "mymodel.old-20240101", "mymodel.tmp-20240102"]
  assert keras3_configs.run_encoder_config(out).residual_attention == "mean"
