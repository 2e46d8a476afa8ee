"""`keras3_bridge.load_masked_lm`: a run's pre-trained MLM head in Keras 3.

Issue 39 item 6: `load_run` gave the backbone only, so a masked LM built
from a run started with a fresh head. The run here is what train.py writes
(its `params.yaml`; a checkpoint with the pre-trainer's `checkpoint_items`
beside `model`), from Model Garden's own `MaskedLMTask.build_model`, every
weight drawn at random so a head that was not loaded, or loaded with
keras-hub's exact GELU and epsilon, cannot pass.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from official.nlp.tasks import masked_lm as mg_masked_lm
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import keras3_bridge as bridge
from realformer_tf.checkpoints import keras3_configs
from realformer_tf.configs import experiments
from realformer_tf.keras3 import masked_lm as masked_lm_lib
from tests.helpers import keras3_encoders as utils
from tests.helpers import kill_writer

_POSITIONS = np.array([[1, 3, 4], [0, 2, 2]], "int32")


def _write_pretraining_run(run_dir, mlm_activation="gelu"):
  """A train.py pre-training run of the tiny encoder: (params, pretrainer)."""
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  params.override({"task": {"model": {
      "mlm_activation": mlm_activation,
      "encoder": {"any": utils.TINY_TF_KERAS}}}})
  pretrainer = mg_masked_lm.MaskedLMTask(params.task).build_model()
  pretrainer(pretrainer.inputs)
  utils.randomize(pretrainer, seed=3)
  os.makedirs(run_dir)
  train_utils.serialize_config(params, run_dir)
  checkpoint = tf.train.Checkpoint(model=pretrainer,
                                   **pretrainer.checkpoint_items)
  tf.train.CheckpointManager(checkpoint, run_dir, max_to_keep=1).save(
      checkpoint_number=7)
  return pretrainer


def _keras3_inputs():
  inputs = utils.backbone_inputs(seed=4)
  return dict(inputs, mask_positions=_POSITIONS)


def _tf_keras_logits(pretrainer):
  inputs = utils.tf_keras_inputs(utils.backbone_inputs(seed=4))
  out = pretrainer(dict(inputs, masked_lm_positions=_POSITIONS))
  return out["mlm_logits"].numpy()


@pytest.mark.parametrize("mlm_activation,keras3_name",
                         [("gelu", "gelu_approximate"), ("relu", "relu")])
def test_logits_are_the_pretrainers(tmp_path, mlm_activation, keras3_name):
  run = os.path.join(tmp_path, "run")
  pretrainer = _write_pretraining_run(run, mlm_activation)
  expected = _tf_keras_logits(pretrainer)
  lm = bridge.load_masked_lm(run)
  assert isinstance(lm, masked_lm_lib.RealFormerMaskedLM)
  assert (lm.head_activation, lm.head_layer_norm_epsilon) == (keras3_name,
                                                              1e-12)
  got = keras.ops.convert_to_numpy(lm(_keras3_inputs()))
  assert got.shape == expected.shape == (2, 3, 50)
  np.testing.assert_allclose(got, expected, atol=2e-5, rtol=1e-5)
  # The test can fail: keras-hub's head (exact GELU, epsilon 1e-5) with the
  # same weights gives other logits, and so does a fresh head.
  keras_hub_head = masked_lm_lib.RealFormerMaskedLM(lm.backbone)
  for a, b in zip(keras_hub_head.masked_lm_head.weights,
                  lm.masked_lm_head.weights):
    a.assign(b)
  if mlm_activation == "gelu":
    assert np.abs(keras.ops.convert_to_numpy(
        keras_hub_head(_keras3_inputs())) - expected).max() > 1e-4
  fresh = masked_lm_lib.RealFormerMaskedLM(bridge.load_run(run))
  assert np.abs(keras.ops.convert_to_numpy(fresh(_keras3_inputs()))
                - expected).max() > 1e-2
  # The head survives a `.keras` round trip with its activation and epsilon.
  path = os.path.join(tmp_path, "lm.keras")
  lm.save(path)
  restored = keras.saving.load_model(path)
  assert (restored.head_activation,
          restored.head_layer_norm_epsilon) == (keras3_name, 1e-12)
  np.testing.assert_array_equal(
      keras.ops.convert_to_numpy(restored(_keras3_inputs())), got)


def test_a_pretrainer_saved_whole_has_its_head_under_model(tmp_path):
  """`tf.train.Checkpoint(model=pretrainer)` alone: the encoder at
  `model/encoder_network`, the head found beside it at `model/masked_lm`."""
  run = os.path.join(tmp_path, "run")
  pretrainer = _write_pretraining_run(run)
  whole = os.path.join(tmp_path, "whole")
  prefix = tf.train.Checkpoint(model=pretrainer).write(
      os.path.join(whole, "ckpt-1"))
  lm = bridge.load_masked_lm(prefix, keras3_configs.run_encoder_config(run),
                             encoder_path="model/encoder_network")
  # The eager pre-trainer still runs after the load (its shapes-only
  # tf_keras models, built in a `tf.Graph`, left every eager tf_keras model
  # of the process "in an invalid state": `shapes_only_graph`).
  np.testing.assert_allclose(
      keras.ops.convert_to_numpy(lm(_keras3_inputs())),
      _tf_keras_logits(pretrainer), atol=2e-5, rtol=1e-5)


def test_an_encoder_only_checkpoint_is_refused_naming_load_run(tmp_path):
  run = os.path.join(tmp_path, "run")
  _write_pretraining_run(run)
  encoder_only = os.path.join(tmp_path, "encoder_only")
  bridge.save_run(bridge.load_run(run), encoder_only)
  with pytest.raises(errors.CheckpointMismatchError,
                     match=r"No masked LM head found in checkpoint .*ckpt-1.* "
                     r"at 'masked_lm'; its top-level objects are \['encoder',"
                     r".*RealFormerMaskedLM\(load_run\(\.\.\.\)\)"):
    bridge.load_masked_lm(encoder_only)


def test_a_head_of_another_size_names_its_variables(tmp_path):
  """Encoder and head come from one checkpoint, checked together: a head
  whose transform has another width is named, nothing is built from it."""
  run = os.path.join(tmp_path, "run")
  pretrainer = _write_pretraining_run(run)
  bad = tf.train.Checkpoint(
      encoder=pretrainer.encoder_network,
      masked_lm=tf.train.Checkpoint(dense=tf.train.Checkpoint(
          kernel=tf.Variable(tf.zeros([16, 8])))))
  prefix = bad.write(os.path.join(tmp_path, "bad", "ckpt-1"))
  with pytest.raises(errors.CheckpointMismatchError,
                     match=r"(?s)does not match the masked LM head.*"
                     r"masked_lm/dense/kernel.*\[16, 8\].*\[16, 16\]"):
    bridge.load_masked_lm(prefix, keras3_configs.run_encoder_config(run))


_ON_JAX = """
import sys
import keras
import numpy as np
from realformer_tf.checkpoints import keras3_bridge as bridge
lm = bridge.load_masked_lm(sys.argv[1])
inputs = {k: np.asarray(v) for k, v in np.load(sys.argv[2]).items()}
np.save(sys.argv[3], keras.ops.convert_to_numpy(lm(inputs)))
print(keras.backend.backend())
"""


def test_logits_on_jax(tmp_path):
  run = os.path.join(tmp_path, "run")
  expected = _tf_keras_logits(_write_pretraining_run(run))
  inputs, out = tmp_path / "inputs.npz", tmp_path / "logits.npy"
  np.savez(inputs, **_keras3_inputs())
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
             PYTHONPATH=kill_writer.REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             CUDA_VISIBLE_DEVICES="")
  result = subprocess.run(
      [sys.executable, "-c", _ON_JAX, run, str(inputs), str(out)],
      cwd=kill_writer.REPO_ROOT, env=env, capture_output=True, text=True,
      timeout=600, check=False)
  assert result.returncode == 0 and result.stdout.strip() == "jax", (
      result.stdout + result.stderr)[-4000:]
  np.testing.assert_allclose(np.load(out), expected, atol=2e-5, rtol=1e-5)
