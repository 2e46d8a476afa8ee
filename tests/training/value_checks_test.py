"""Out-of-range config values are refused, naming the dotted key and value."""

import pytest
import yaml

from official.core import exp_factory
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.training import value_checks

_OPT = "trainer.optimizer_config"
_POLY = f"{_OPT}.learning_rate.polynomial"
_DATA = ["task.train_data", "task.validation_data"]


def _quickstart(overrides):
  params = exp_factory.get_exp_config("realformer/quickstart")
  params.override(overrides, is_strict=True)
  return params


def _trainer(**fields):
  return {"trainer": fields}


def _optimizer(**fields):
  return _trainer(optimizer_config=fields)


@pytest.mark.parametrize("overrides, fragments", [
    (_optimizer(learning_rate={"polynomial": {"initial_learning_rate": -1e-3}}),
     [f"{_POLY}.initial_learning_rate=-0.001 must be positive"]),
    (_optimizer(learning_rate={"polynomial": {"initial_learning_rate": 0.0}}),
     [f"{_POLY}.initial_learning_rate=0 must be positive"]),
    (_optimizer(learning_rate={"type": "constant",
                               "constant": {"learning_rate": -0.1}}),
     [f"{_OPT}.learning_rate.constant.learning_rate=-0.1 must be positive"]),
    (_optimizer(learning_rate={"polynomial": {
        "initial_learning_rate": 1e-3, "end_learning_rate": 0.01}}),
     [f"{_POLY}.end_learning_rate=0.01 must be in [0, "
      "initial_learning_rate=0.001]"]),
    (_optimizer(learning_rate={"polynomial": {"decay_steps": -5}}),
     [f"{_POLY}.decay_steps=-5 must be positive"]),
    (_optimizer(warmup={"polynomial": {"warmup_steps": 3000}}),
     [f"{_OPT}.warmup.polynomial.warmup_steps=3000 is longer than the run "
      "(trainer.train_steps=2500)"]),
    (_optimizer(warmup={"polynomial": {"warmup_steps": -1}}),
     [f"{_OPT}.warmup.polynomial.warmup_steps=-1 must be >= 0"]),
    (_optimizer(optimizer={"adamw": {"weight_decay_rate": -0.01}}),
     [f"{_OPT}.optimizer.adamw.weight_decay_rate=-0.01 must be >= 0"]),
    (_optimizer(optimizer={"adamw": {"beta_1": 1.0, "beta_2": -0.5}}),
     [f"{_OPT}.optimizer.adamw.beta_1=1 must be in [0, 1)",
      f"{_OPT}.optimizer.adamw.beta_2=-0.5 must be in [0, 1)"]),
    (_optimizer(optimizer={"type": "sgd", "sgd": {"momentum": 1.5}}),
     [f"{_OPT}.optimizer.sgd.momentum=1.5 must be in [0, 1]"]),
    ({"task": {"model": {"encoder": {"any": {"dropout_rate": 1.0,
                                             "attention_dropout_rate": -0.1}},
                         "cls_heads": [{"dropout_rate": 2.0, "inner_dim": 64,
                                        "num_classes": 2,
                                        "name": "next_sentence"}]}}},
     ["task.model.encoder.any.dropout_rate=1 must be in [0, 1)",
      "task.model.encoder.any.attention_dropout_rate=-0.1 must be in [0, 1)",
      "task.model.cls_heads[0].dropout_rate=2 must be in [0, 1)"]),
    (_trainer(train_steps=0), ["trainer.train_steps=0 must be positive"]),
    (_trainer(steps_per_loop=-1, summary_interval=0, checkpoint_interval=-5,
              max_to_keep=-1),
     ["trainer.steps_per_loop=-1 must be positive",
      "trainer.summary_interval=0 must be positive",
      "trainer.checkpoint_interval=-5 must be >= 0 (0: no checkpoints)",
      "trainer.max_to_keep=-1 must be >= 0 (0: keep all)"]),
    (_trainer(validation_steps=0),
     ["trainer.validation_steps=0 must be positive, or -1"]),
    ({"task": {"train_data": {"global_batch_size": 0,
                              "max_predictions_per_seq": 0},
               "validation_data": {"global_batch_size": -8}}},
     ["task.train_data.global_batch_size=0 must be positive",
      "task.train_data.max_predictions_per_seq=0 must be positive",
      "task.validation_data.global_batch_size=-8 must be positive"]),
    ({"runtime": {"mixed_precision_dtype": "mixed_float16"}},
     ["runtime.mixed_precision_dtype='mixed_float16' is not one of float32, "
      "float16, bfloat16"]),
    ({"runtime": {"loss_scale": "static"}},
     ["runtime.loss_scale='static' must be 'dynamic' or a positive number"]),
])
def test_nonsense_values_are_named(overrides, fragments):
  with pytest.raises(ValueError) as e:
    value_checks.check_values(_quickstart(overrides), trains=True,
                              evaluates=True, data_keys=_DATA)
  message = str(e.value)
  assert message.startswith("Config values out of range: ")
  for fragment in fragments:
    assert fragment in message, message


@pytest.mark.parametrize("overrides", [
    {},
    _optimizer(warmup={"polynomial": {"warmup_steps": 2500}}),  # = the run.
    _optimizer(optimizer={"adamw": {"weight_decay_rate": 0.0}}),
    {"runtime": {"mixed_precision_dtype": "bfloat16", "loss_scale": 128}},
    {"runtime": {"mixed_precision_dtype": "float16",
                 "loss_scale": "dynamic"}},
    _trainer(checkpoint_interval=0, max_to_keep=0, validation_steps=-1),
    {"task": {"model": {"encoder": {"any": {"dropout_rate": 0.0}}}}},
])
def test_sensible_values_pass(overrides):
  value_checks.check_values(_quickstart(overrides), trains=True,
                            evaluates=True, data_keys=_DATA)


def test_training_keys_are_not_checked_for_evaluation():
  params = _quickstart(_trainer(train_steps=0, validation_steps=0))
  value_checks.check_values(params, trains=False, evaluates=False,
                            data_keys=["task.train_data"])
  with pytest.raises(ValueError, match=r"^Config values out of range: "
                     r"trainer.validation_steps=0 must be positive"):
    value_checks.check_values(params, trains=False, evaluates=True,
                              data_keys=["task.validation_data"])


@pytest.mark.parametrize("overrides,fragments", [
    ({"trainer": {"train_steps": 1.5}},
     ["trainer.train_steps=1.5 must be an int, not float"]),
    ({"trainer": {"train_steps": "abc"}},
     ["trainer.train_steps='abc' must be an int, not str"]),
    ({"trainer": {"steps_per_loop": 2.0},
      "task": {"model": {"encoder": {"any": {"hidden_size": "64"}}}}},
     ["task.model.encoder.any.hidden_size='64' must be an int",
      "trainer.steps_per_loop=2.0 must be an int"]),
    ({"task": {"train_data": {"global_batch_size": True}}},
     ["task.train_data.global_batch_size=True must be an int, not bool"]),
    ({"trainer": {"loss_upper_bound": "big"}},
     ["trainer.loss_upper_bound='big' must be a float, not str"]),
    ({"trainer": {"train_steps": {"x": 1}}},  # --params_override=...x=1
     ["trainer.train_steps must be an int, not the mapping {'x': 1}"]),
    # Issue 38 item 10: YAML's .nan and .inf are floats no range check
    # refuses (`nan <= 0` is False).
    (yaml.safe_load("trainer: {loss_upper_bound: .inf, optimizer_config: "
                    "{learning_rate: {polynomial: {initial_learning_rate: "
                    ".nan}}}}"),
     ["trainer.loss_upper_bound=inf must be a finite number",
      "trainer.optimizer_config.learning_rate.polynomial."
      "initial_learning_rate=nan must be a finite number"]),
])
def test_mistyped_fields_are_named(overrides, fragments):
  params = exp_factory.get_exp_config("realformer/quickstart")
  params.override(overrides, is_strict=True)
  with pytest.raises(ValueError) as e:
    value_checks.validate_field_types(params)
  for fragment in fragments:
    assert fragment in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["realformer/pretraining",
                                  "realformer/quickstart", "realformer/glue",
                                  "realformer/squad"])
def test_registered_experiments_are_well_typed(name):
  params = exp_factory.get_exp_config(name)
  params.override({"trainer": {"loss_upper_bound": 10}})  # int for a float.
  value_checks.validate_field_types(params)


def test_validate_config_needs_no_input_files():
  params = exp_factory.get_exp_config("realformer/quickstart")
  params.override({"task": {"train_data": {"seq_length": 128}}})
  with pytest.raises(ValueError, match=r"task.train_data.seq_length=128 "
                     r"exceeds .*max_position_embeddings=64"):
    value_checks.validate_config(params, "train")


def test_batch_sizes_must_split_over_replicas():
  # The paper recipe's batches (pretrain_paper.yaml), 2 hosts x 4 TPU cores.
  params = exp_factory.get_exp_config("realformer/pretraining")
  params.override({"task": {"train_data": {"global_batch_size": 512},
                            "validation_data": {"global_batch_size": 512}},
                   "runtime": {"distribution_strategy": "tpu"}})
  value_checks.validate_batch_sizes(params, "train_and_eval", 8)
  with pytest.raises(ValueError, match=r"global_batch_size=512 is not "
                     r"divisible by the 3 replicas"):
    value_checks.validate_batch_sizes(params, "train", 3)
