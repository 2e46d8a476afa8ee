"""The converter CLI end to end, consumed by Model Garden tasks' `initialize`."""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf
import yaml

from official.core import exp_factory
from official.core import task_factory
from official.core import train_utils
from official.modeling import hyperparams
from official.nlp.data import question_answering_dataloader
from official.nlp.tasks import masked_lm
from official.nlp.tasks import question_answering
from realformer_tf.checkpoints import convert
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from tests.helpers import file_trees
from tests.helpers import kill_writer
from tests.helpers import tf1_reference as ref
from tests.helpers import watchdog

CONFIG = ref.TINY_CONFIG
VALUES = ref.random_values(ref.tf1_variable_shapes(CONFIG), seed=3)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class _Flags(dict):
  """The attributes `train_utils.parse_configuration` reads from FLAGS."""
  __getattr__ = dict.__getitem__


@pytest.fixture(scope="module")
def tf1_dir(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("tf1"))
  prefix = ref.write_tf1_checkpoint(directory, VALUES, CONFIG)
  return prefix, os.path.join(directory, "bert_config.json")


def _inputs():
  ids, mask, types = ref.example_inputs(CONFIG)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


def _reference():
  inputs = _inputs()
  return ref.numpy_forward(VALUES, CONFIG, inputs["input_word_ids"],
                           inputs["input_mask"], inputs["input_type_ids"])


def test_cli_with_heads_restores_into_masked_lm_task(tf1_dir, tmp_path):
  prefix, config_file = tf1_dir
  output_dir = os.path.join(str(tmp_path), "out")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  result = watchdog.run(
      [sys.executable, "-m", "realformer_tf.checkpoints.convert",
       f"--tf1_checkpoint={prefix}", f"--bert_config_file={config_file}",
       f"--output_dir={output_dir}", "--with_pretraining_heads"],
      cwd=REPO_ROOT, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(output_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml", "pretrainer.yaml"]

  # As train.py: --experiment=realformer/pretraining --config_file=...
  config = exp_factory.get_exp_config(experiments.PRETRAINING)
  config = hyperparams.override_params_dict(
      config, os.path.join(output_dir, "pretrainer.yaml"), is_strict=True)
  config.override({"task": {"init_checkpoint": output_dir}})
  assert config.task.model.encoder.any.residual_attention == "sum"
  assert config.task.model.cls_heads[0].inner_dim == CONFIG["hidden_size"]
  task = masked_lm.MaskedLMTask(config.task)
  model = task.build_model()
  # Restores encoder, masked_lm and the NSP pooler_dense; the heads are built
  # on the first call and get their values then (deferred restore), as in
  # Model Garden's trainer.
  task.initialize(model)
  positions = np.array([[1, 2], [0, 4], [3, 1]], np.int32)
  _ = model(dict(_inputs(), masked_lm_positions=positions))
  np.testing.assert_array_equal(model.masked_lm.bias.numpy(),
                                VALUES["cls/predictions/output_bias"])
  np.testing.assert_array_equal(
      model.classification_heads[0].dense.kernel.numpy(),
      VALUES["bert/pooler/dense/kernel"])
  # MaskedLMTask leaves the NSP logits layer alone; the `model` item has it.
  tf.train.Checkpoint(model=model).read(
      tf.train.latest_checkpoint(output_dir)).assert_existing_objects_matched()
  outputs = model(dict(_inputs(), masked_lm_positions=positions))
  sequence, pooled = _reference()
  np.testing.assert_allclose(outputs["sequence_output"].numpy(), sequence,
                             rtol=0, atol=1e-5)
  np.testing.assert_allclose(
      outputs["mlm_logits"].numpy(),
      ref.numpy_mlm_logits(VALUES, sequence, positions), rtol=1e-6, atol=1e-5)
  np.testing.assert_allclose(outputs["next_sentence"].numpy(),
                             ref.numpy_nsp_logits(VALUES, pooled), rtol=0,
                             atol=1e-5)


def test_encoder_checkpoint_restores_into_finetuning_tasks(tf1_dir, tmp_path):
  prefix, config_file = tf1_dir
  output_dir = os.path.join(str(tmp_path), "out")
  path = convert.convert_tf1_checkpoint(prefix, config_file, output_dir)
  assert sorted(os.listdir(output_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml"]
  encoder_yaml = os.path.join(output_dir, "encoder.yaml")
  with open(encoder_yaml) as f:
    fields = yaml.safe_load(f)["task"]["model"]["encoder"]
  assert fields["type"] == "any"
  assert fields["any"] == dict(
      encoders.RealFormerEncoderConfig().as_dict(),
      vocab_size=40, hidden_size=32, num_layers=3, num_attention_heads=4,
      intermediate_size=48, max_position_embeddings=24, type_vocab_size=2,
      final_layer_norm=False)

  # realformer/glue (init_cls_pooler=true) as train.py loads it.
  params = train_utils.parse_configuration(_Flags(
      experiment=finetuning.GLUE,
      config_file=[finetuning.glue_yaml_path("mrpc"), encoder_yaml],
      params_override=f"task.init_checkpoint={output_dir}", tpu=""),
                                           print_return=False)
  assert params.task.init_cls_pooler
  task = task_factory.get_task(params.task)
  model = task.build_model()
  task.initialize(model)
  outputs = model.checkpoint_items["encoder"](_inputs())
  sequence, pooled = _reference()
  np.testing.assert_allclose(outputs["sequence_output"].numpy(), sequence,
                             rtol=0, atol=1e-5)
  np.testing.assert_allclose(outputs["pooled_output"].numpy(), pooled,
                             rtol=0, atol=1e-5)
  np.testing.assert_array_equal(
      model.checkpoint_items["sentence_prediction.pooler_dense"].kernel
      .numpy(), VALUES["bert/pooler/dense/kernel"])

  # Model Garden's QuestionAnsweringTask (inherited Task.initialize).
  qa_config = question_answering.QuestionAnsweringConfig(
      model=question_answering.ModelConfig(encoder=encoders.encoder_config()),
      validation_data=question_answering_dataloader.QADataConfig())
  qa_config = hyperparams.override_params_dict(
      qa_config, {"init_checkpoint": path,
                  "model": yaml.safe_load(open(encoder_yaml))["task"]["model"]},
      is_strict=True)
  qa_task = question_answering.QuestionAnsweringTask(qa_config)
  qa_model = qa_task.build_model()
  qa_task.initialize(qa_model)
  np.testing.assert_array_equal(
      qa_model.checkpoint_items["encoder"].get_embedding_table().numpy(),
      VALUES["bert/embeddings/word_embeddings"])

  # And back through the TF2 loader.
  encoder = tf2_checkpoint.encoder_from_tf2_checkpoint(
      output_dir, encoders.RealFormerEncoderConfig(**fields["any"]))
  np.testing.assert_allclose(encoder(_inputs())["sequence_output"].numpy(),
                             sequence, rtol=0, atol=1e-5)


def test_refuses_bad_inputs_before_writing(tf1_dir, tmp_path):
  prefix, config_file = tf1_dir
  output_dir = os.path.join(str(tmp_path), "out")
  os.makedirs(output_dir)
  with open(os.path.join(output_dir, "notes.txt"), "w") as f:
    f.write("keep me")
  with pytest.raises(FileExistsError, match="is not empty.*--overwrite"):
    convert.convert_tf1_checkpoint(prefix, config_file, output_dir)
  assert os.listdir(output_dir) == ["notes.txt"]

  # Wrong config for the checkpoint: layer_2 is unused.
  two_layers = os.path.join(str(tmp_path), "two_layers.json")
  with open(two_layers, "w") as f:
    json.dump(dict(CONFIG, num_hidden_layers=2), f)
  fresh = os.path.join(str(tmp_path), "fresh")
  with pytest.raises(errors.CheckpointMismatchError,
                     match="bert/encoder/layer_2/output/dense/kernel"):
    convert.convert_tf1_checkpoint(prefix, two_layers, fresh)
  bad = os.path.join(str(tmp_path), "bad.json")
  with open(bad, "w") as f:
    f.write('{"vocab_size": 40}')
  with pytest.raises(ValueError, match="lacks the required key 'hidden_size'"):
    convert.convert_tf1_checkpoint(prefix, bad, fresh)
  with pytest.raises(ValueError, match="residual_attention must be one of"):
    convert.convert_tf1_checkpoint(prefix, config_file, fresh, "max")
  assert not os.path.exists(fresh)

  # --overwrite replaces the converter's own files and keeps others.
  with open(os.path.join(output_dir, "pretrainer.yaml"), "w") as f:
    f.write("stale")
  convert.convert_tf1_checkpoint(prefix, config_file, output_dir,
                                 residual_attention="mean", overwrite=True)
  assert sorted(os.listdir(output_dir)) == [
      "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "encoder.yaml", "notes.txt"]
  with open(os.path.join(output_dir, "encoder.yaml")) as f:
    assert yaml.safe_load(f)["task"]["model"]["encoder"]["any"][
        "residual_attention"] == "mean"


def _files(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


def test_killed_overwrite_leaves_the_previous_outputs(tf1_dir, tmp_path):
  """--overwrite SIGKILLed between setting the old output_dir aside and
  renaming the new one in (neither at output_dir): the next run restores the
  previous outputs byte for byte; then --overwrite replaces them whole."""
  prefix, config_file = tf1_dir
  output_dir = str(tmp_path / "out")
  convert.convert_tf1_checkpoint(prefix, config_file, output_dir,
                                 residual_attention="sum")
  with open(os.path.join(output_dir, "notes.txt"), "w") as f:
    f.write("keep me")
  before = _files(output_dir)
  kill_writer.run_killed(
      1, "realformer_tf.checkpoints.convert", "convert_tf1_checkpoint",
      tf1_checkpoint_path=prefix, bert_config_file=config_file,
      output_dir=output_dir, residual_attention="mean", overwrite=True)
  assert sorted(re.sub(r"-\d+", "-PID", name)
                for name in os.listdir(tmp_path)) == [
                    "out.old-PID", "out.old-PID.owner", "out.tmp-PID",
                    "out.tmp-PID.owner"]

  with pytest.raises(FileExistsError, match="not empty"):
    convert.convert_tf1_checkpoint(prefix, config_file, output_dir)
  assert os.listdir(tmp_path) == ["out"]
  assert _files(output_dir) == before
  assert run_directory.resolve_checkpoint(output_dir, "x").endswith("ckpt-1")

  convert.convert_tf1_checkpoint(prefix, config_file, output_dir,
                                 residual_attention="mean", overwrite=True)
  assert os.listdir(tmp_path) == ["out"]
  after = _files(output_dir)
  assert after.keys() == before.keys() and after["notes.txt"] == b"keep me"
  assert yaml.safe_load(after["encoder.yaml"])["task"]["model"]["encoder"][
      "any"]["residual_attention"] == "mean"


def test_truncated_checkpoint_is_named(tf1_dir, tmp_path):
  """Not a bare `IndexError: Read less bytes than requested`: the data
  file's size is checked against its index before any tensor is read."""
  prefix, config_file = tf1_dir
  copy = os.path.join(str(tmp_path), os.path.basename(prefix))
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copy(prefix + suffix, copy + suffix)
  output_dir = os.path.join(str(tmp_path), "out")
  with open(copy + ".data-00000-of-00001", "r+b") as f:
    f.truncate(100)
  with pytest.raises(ValueError, match=re.escape(repr(copy)) +
                     " is not a readable checkpoint: .*data-\\* hold 100 "
                     "bytes, less than the .* bytes of tensors its index "
                     r"lists \(truncated\)"):
    convert.convert_tf1_checkpoint(copy, config_file, output_dir)
  with open(copy + ".index", "r+b") as f:
    f.truncate(10)
  with pytest.raises(ValueError, match="tf1_checkpoint=.*not a readable"):
    convert.convert_tf1_checkpoint(copy, config_file, output_dir)
  assert not os.path.exists(output_dir)


def test_overwrite_refuses_a_train_py_run_and_its_parent(tf1_dir, tmp_path):
  """38.3: --overwrite into a train.py run (params.yaml, train.lock,
  ckpt-100), into a bucket copy of one (ckpt-100 without params.yaml) or
  into a folder holding a run is refused naming what is there; nothing
  changes."""
  prefix, config_file = tf1_dir
  run_dir = tmp_path / "runs" / "run"
  run_dir.mkdir(parents=True)
  for name in ("params.yaml", "train.lock", "checkpoint", "ckpt-100.index"):
    (run_dir / name).write_text(name)
  copy = tmp_path / "copy"
  copy.mkdir()
  (copy / "ckpt-100.index").write_text("index")
  before = file_trees.files_under(tmp_path)
  for output_dir, match in (
      (run_dir, r"run is a train.py run directory \(it holds params.yaml, "
       r"train.lock\): ckpt-100.index, params.yaml, train.lock are not "),
      (run_dir.parent, r"runs is not a converted checkpoint: run is not "),
      (copy, r"copy is not a converted checkpoint: ckpt-100.index is not "
       r".*ckpt-1\)\.$")):
    with pytest.raises(FileExistsError, match=match):
      convert.convert_tf1_checkpoint(prefix, config_file, str(output_dir),
                                     residual_attention="sum", overwrite=True)
  assert file_trees.files_under(tmp_path) == before
