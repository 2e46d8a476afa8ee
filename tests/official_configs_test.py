"""Every YAML in official_configs/ (models, pre-training, runtime) parses as train.py parses it."""

import glob
import os

import pytest

from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from realformer_tf.training import train_lib
from tests.helpers import train_runs as utils

CONFIGS = os.path.join(utils.REPO_ROOT, "official_configs")
MODELS = os.path.join(CONFIGS, "models")

# Paper Table 1: layers, hidden, heads, feed-forward; residual attention.
TABLE_1 = {
    "bert_small": (4, 512, 8, 2048, "sum"),
    "bert_base": (12, 768, 12, 3072, "sum"),
    "bert_large": (24, 1024, 16, 4096, "sum"),
    "bert_xlarge": (36, 1536, 24, 6144, "mean"),
}
PRETRAIN_YAMLS = ("pretrain_paper.yaml", "pretrain_paper_xlarge.yaml",
                  "pretrain_paper_lr2e-4.yaml")
RUNTIME_YAMLS = ("tpu.yaml", "gpu.yaml", "multi_worker.yaml", "cpu.yaml")


def parse(*config_files, params_override="",
          experiment=experiments.PRETRAINING):
  """train.py's parsing path: Model Garden's flags -> ExperimentParser."""
  options = train_utils.ParseConfigOptions(
      experiment=experiment, config_file=list(config_files),
      params_override=params_override)
  return train_lib.parse_configuration(options)


def model_yaml(name):
  return os.path.join(MODELS, f"{name}.yaml")


def test_every_pretraining_yaml_is_covered():
  """New files in these folders must be added to the tests below."""
  found = {os.path.relpath(p, CONFIGS) for p in
           glob.glob(os.path.join(CONFIGS, "models", "*.yaml")) +
           glob.glob(os.path.join(CONFIGS, "runtime", "*.yaml")) +
           glob.glob(os.path.join(CONFIGS, "experiments", "pretrain_*.yaml"))}
  covered = ({f"models/{m}.yaml" for m in TABLE_1} |
             {f"models/arch_{a}.yaml" for a in ("post_ln", "pre_ln",
                                                "realformer")} |
             {f"runtime/{r}" for r in RUNTIME_YAMLS} |
             {f"experiments/{e}" for e in PRETRAIN_YAMLS})
  assert found == covered


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_model_sizes_match_table_1(name):
  params = parse(model_yaml(name))
  layers, hidden, heads, ffn, residual = TABLE_1[name]
  assert params.task.model.encoder.type == "any"
  enc = params.task.model.encoder.any
  assert (enc.num_layers, enc.hidden_size, enc.num_attention_heads,
          enc.intermediate_size) == (layers, hidden, heads, ffn)
  assert enc.residual_attention == residual
  assert not enc.norm_first
  (nsp,) = params.task.model.cls_heads
  assert (nsp.name, nsp.inner_dim, nsp.num_classes) == (
      "next_sentence", hidden, 2)


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_architecture_files_select_post_ln_pre_ln_realformer(name):
  residual = TABLE_1[name][4]
  expected = {
      "post_ln": ("none", False, None),
      "pre_ln": ("none", True, True),
      "realformer": (residual, False, None),
  }
  for arch, values in expected.items():
    params = parse(model_yaml(name), model_yaml(f"arch_{arch}"))
    enc = params.task.model.encoder.any
    assert (enc.residual_attention, enc.norm_first,
            enc.final_layer_norm) == values, arch
    assert enc.hidden_size == TABLE_1[name][1]  # Size kept.


def test_params_override_equivalent_of_architecture_files():
  by_file = parse(model_yaml("bert_base"), model_yaml("arch_pre_ln"))
  by_flag = parse(
      model_yaml("bert_base"),
      params_override=("task.model.encoder.any.residual_attention=none,"
                       "task.model.encoder.any.norm_first=true,"
                       "task.model.encoder.any.final_layer_norm=true"))
  assert by_file.task.model.as_dict() == by_flag.task.model.as_dict()


@pytest.mark.parametrize("recipe", PRETRAIN_YAMLS)
def test_paper_pretraining_recipes(recipe):
  size = "bert_xlarge" if "xlarge" in recipe else "bert_base"
  params = parse(model_yaml(size),
                 os.path.join(CONFIGS, "experiments", recipe))
  task, trainer = params.task, params.trainer
  for data in (task.train_data, task.validation_data):
    assert data.seq_length == 512
    assert data.max_predictions_per_seq == 80
    assert data.use_next_sentence_label
    assert data.global_batch_size == (256 if "xlarge" in recipe else 512)
  assert task.train_data.is_training and not task.validation_data.is_training
  assert task.scale_loss  # Mean, not summed, replica gradients.
  enc = task.model.encoder.any
  assert (enc.vocab_size, enc.max_position_embeddings) == (30522, 512)
  assert enc.dropout_rate == enc.attention_dropout_rate == 0.1
  assert enc.residual_attention == TABLE_1[size][4]  # Recipe keeps the size.
  assert trainer.train_steps == 1000000
  opt = trainer.optimizer_config
  assert opt.optimizer.type == "adamw"
  assert opt.optimizer.adamw.weight_decay_rate == 0.01
  assert set(opt.optimizer.adamw.exclude_from_weight_decay) >= {
      "LayerNorm", "layer_norm", "bias"}
  lr = opt.learning_rate.polynomial
  assert lr.initial_learning_rate == (2e-4 if "2e-4" in recipe else 1e-4)
  assert (lr.decay_steps, lr.end_learning_rate, lr.power) == (1000000, 0.0,
                                                              1.0)
  assert opt.warmup.polynomial.warmup_steps == 10000
  assert trainer.summary_interval % trainer.steps_per_loop == 0


def test_lr_variant_differs_only_in_learning_rate():
  base = parse(os.path.join(CONFIGS, "experiments", "pretrain_paper.yaml"))
  lr2 = parse(os.path.join(CONFIGS, "experiments",
                           "pretrain_paper_lr2e-4.yaml"))
  lr2.override({"trainer": {"optimizer_config": {"learning_rate": {
      "polynomial": {"initial_learning_rate": 1e-4}}}}})
  assert base.as_dict() == lr2.as_dict()


@pytest.mark.parametrize("runtime,expected", [
    ("tpu.yaml", dict(distribution_strategy="tpu",
                      mixed_precision_dtype="bfloat16")),
    ("gpu.yaml", dict(distribution_strategy="mirrored",
                      mixed_precision_dtype="float16", loss_scale="dynamic")),
    ("multi_worker.yaml", dict(distribution_strategy="multi_worker_mirrored")),
    ("cpu.yaml", dict(distribution_strategy="one_device", num_gpus=0,
                      mixed_precision_dtype="float32")),
])
def test_runtime_files(runtime, expected):
  params = parse(model_yaml("bert_small"),
                 os.path.join(CONFIGS, "experiments", "pretrain_paper.yaml"),
                 os.path.join(CONFIGS, "runtime", runtime))
  for key, value in expected.items():
    assert getattr(params.runtime, key) == value, key


def test_later_config_file_overrides_earlier():
  params = parse(model_yaml("bert_large"), model_yaml("bert_small"))
  assert params.task.model.encoder.any.num_layers == 4
  params = parse(model_yaml("bert_small"), model_yaml("bert_large"),
                 params_override="task.model.encoder.any.num_layers=3")
  assert params.task.model.encoder.any.num_layers == 3


def test_unknown_key_in_yaml_names_file_and_key(tmp_path):
  bad = utils.write_yaml(str(tmp_path / "bad.yaml"), {
      "task": {"model": {"encoder": {"type": "any", "any": {
          "hidden_sise": 64}}}}})
  with pytest.raises(ValueError) as e:
    parse(model_yaml("bert_small"), bad)
  message = str(e.value)
  assert f"--config_file={bad}" in message
  assert "task.model.encoder.any.hidden_sise" in message
  assert "hidden_size" in message  # Lists the valid fields.


def test_unknown_key_in_params_override_is_named():
  with pytest.raises(ValueError, match=r"trainer\.train_stepz"):
    parse(params_override="trainer.train_stepz=5")


def test_missing_and_malformed_config_files_are_named(tmp_path):
  missing = str(tmp_path / "nope.yaml")
  with pytest.raises(ValueError, match="nope.yaml: file not found"):
    parse(missing)
  broken = tmp_path / "broken.yaml"
  broken.write_text("task: [unclosed\n")
  with pytest.raises(ValueError, match="broken.yaml: not valid YAML"):
    parse(str(broken))


def test_bad_value_names_file(tmp_path):
  bad = utils.write_yaml(str(tmp_path / "bad_value.yaml"), {
      "task": {"model": {"encoder": {"type": "any", "any": {
          "residual_attention": "sometimes"}}}}})
  params = parse(bad)  # Parsed as given; the run plan's value rules refuse it.
  with pytest.raises(ValueError, match="sometimes"):
    plan_rules.check(run_plan.derive(params, "train", str(tmp_path / "run")))
  assert not os.path.exists(tmp_path / "run")


def test_unknown_experiment_lists_registered_ones():
  with pytest.raises(ValueError) as e:
    parse(experiment="realformer/pretrainnig")
  message = str(e.value)
  assert "realformer/pretrainnig" in message
  assert experiments.PRETRAINING in message
  assert experiments.QUICKSTART in message
