"""realformer/glue and the per-task YAMLs, loaded the way train.py loads them."""
import math
import os

import pytest

from official.core import exp_factory
from official.core import train_utils
from official.modeling import hyperparams
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import finetuning
from realformer_tf.data import glue_tasks
from realformer_tf.data import schedule

EXPECTED = {
    # task: (num_classes, label_type, published train size, metric keys)
    "cola": (2, "int", 8551, ["matthews_corrcoef"]),
    "sst2": (2, "int", 67349, ["accuracy"]),
    "mrpc": (2, "int", 3668, ["f1", "accuracy"]),
    "stsb": (1, "float", 5749, ["pearson", "spearman"]),
    "qqp": (2, "int", 363846, ["f1", "accuracy"]),
    "mnli": (3, "int", 392702, ["accuracy"]),
    "qnli": (2, "int", 104743, ["accuracy"]),
    "rte": (2, "int", 2490, ["accuracy"]),
}


class _Flags(dict):
  """The attributes `train_utils.parse_configuration` reads from FLAGS."""
  __getattr__ = dict.__getitem__


def test_one_yaml_per_paper_task():
  names = sorted(f[:-5] for f in os.listdir(finetuning.GLUE_YAML_DIR)
                 if f.endswith(".yaml"))
  assert names == sorted(EXPECTED) == sorted(glue_tasks.GLUE_TASKS)
  assert "wnli" not in names


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_yaml_loads_like_train_py(task):
  num_classes, label_type, size, metrics = EXPECTED[task]
  params = train_utils.parse_configuration(_Flags(
      experiment="realformer/glue",
      config_file=[finetuning.glue_yaml_path(task)],
      params_override="task.init_checkpoint=/ckpt", tpu=""),
      print_return=False)
  # The same through exp_factory + override_params_dict (strict).
  config = exp_factory.get_exp_config(finetuning.GLUE)
  config = hyperparams.override_params_dict(
      config, finetuning.glue_yaml_path(task), is_strict=True)
  config.override({"task": {"init_checkpoint": "/ckpt"}})
  for key in ("task", "trainer"):
    assert config.as_dict()[key] == params.as_dict()[key]

  t = params.task
  assert t.name == finetuning.GLUE and t.glue_task == task
  assert t.init_checkpoint == "/ckpt" and t.init_cls_pooler
  # Progress at least twice in the shortest run (RTE: 234 steps).
  assert params.trainer.steps_per_loop * 2 <= params.trainer.train_steps
  assert params.trainer.summary_interval % params.trainer.steps_per_loop == 0
  assert t.model.num_classes == num_classes
  assert not t.model.use_encoder_pooler
  assert t.model.encoder.type == "any"
  assert t.model.encoder.any.dropout_rate == 0.1
  assert t.model.encoder.any.attention_dropout_rate == 0.1
  assert t.model.encoder.any.residual_attention == "sum"
  assert t.train_data.label_type == t.validation_data.label_type == label_type
  assert t.train_data.global_batch_size == 32
  assert t.train_data.seq_length == t.validation_data.seq_length == 128
  assert not t.validation_data.drop_remainder
  assert t.train_data.input_path == f"GLUE_DATA_DIR/{task}_train.tf_record"
  if task == "mnli":
    assert t.validation_data.split_names == ["matched", "mismatched"]
    assert t.validation_data.input_path == (
        "GLUE_DATA_DIR/mnli_dev_matched.tf_record,"
        "GLUE_DATA_DIR/mnli_dev_mismatched.tf_record")
  else:
    assert not t.validation_data.split_names
    assert t.validation_data.input_path == f"GLUE_DATA_DIR/{task}_dev.tf_record"
  assert list(glue_tasks.get_task(task).metrics) == metrics

  # 3 epochs at batch 32 with 10% warm-up, decaying to 0 at the last step.
  steps = math.ceil(3 * size / 32)
  assert schedule.train_steps(size, 3, 32) == steps
  assert params.trainer.train_steps == steps
  opt = params.trainer.optimizer_config
  assert opt.optimizer.type == "adamw"
  assert opt.optimizer.adamw.weight_decay_rate == 0.01
  assert opt.learning_rate.polynomial.initial_learning_rate == 2e-5
  assert opt.learning_rate.polynomial.end_learning_rate == 0.0
  assert opt.learning_rate.polynomial.decay_steps == steps
  assert opt.warmup.polynomial.warmup_steps == int(0.1 * steps)
  assert params.trainer.validation_steps == -1


def test_params_yaml_round_trip(tmp_path):
  config = finetuning.load_glue_config(
      "mnli", params_override="task.model.encoder.any.residual_attention=none")
  train_utils.serialize_config(config, str(tmp_path))
  rebuilt = run_directory.load_experiment_config(str(tmp_path))
  assert rebuilt.as_dict() == config.as_dict()
  assert rebuilt.task.validation_data.split_names == ["matched", "mismatched"]


def test_wrong_task_in_overrides():
  with pytest.raises(ValueError, match="task.glue_task='cola' after the "
                     "overrides, but the task is 'mrpc'"):
    finetuning.load_glue_config("mrpc", params_override="task.glue_task=cola")
  with pytest.raises(ValueError, match="Unknown GLUE task 'wnli'"):
    finetuning.glue_yaml_path("wnli")
