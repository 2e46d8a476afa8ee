"""Out-of-range config values are refused, naming the dotted key and value."""

import dataclasses
import re

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
    # Issue 38 item 10: YAML's .nan and .inf are floats no range check
    # refuses (`nan <= 0` is False).
    (yaml.safe_load("trainer: {loss_upper_bound: .inf, optimizer_config: "
                    "{learning_rate: {polynomial: {initial_learning_rate: "
                    ".nan}}}}"),
     ["trainer.loss_upper_bound=inf must be a finite number",
      "trainer.optimizer_config.learning_rate.polynomial."
      "initial_learning_rate=nan must be a finite number"]),
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


_ENCODER = "task.model.encoder.any"


def test_every_bad_number_is_named_one_a_line():
  """Issue 46 item 4: `hidden_size=0` or a learning rate of 1e300 (inf in
  float32) passed, built the quickstart's data, wrote params.yaml, then
  failed inside Keras; 1e-50 is 0 in float32."""
  params = _quickstart({
      "task": {"model": {"encoder": {"any": {
          "hidden_size": 0, "num_layers": 0, "num_attention_heads": -2,
          "intermediate_size": 0, "vocab_size": 0, "norm_epsilon": -1e-12}},
                         "cls_heads": [{"num_classes": 0, "inner_dim": 64,
                                        "name": "next_sentence"}]},
               "train_data": {"seq_length": 0, "shuffle_buffer_size": 0}},
      "trainer": {"optimizer_config": {
          "learning_rate": {"polynomial": {"initial_learning_rate": 1e300}},
          "optimizer": {"adamw": {"epsilon": 1e-50, "beta_1": 1e-50}}}},
      "runtime": {"num_packs": 0}})
  with pytest.raises(ValueError) as e:
    value_checks.check_values(params, trains=True, evaluates=True,
                              data_keys=_DATA)
  assert str(e.value).splitlines() == [
      f"Config values out of range: {_ENCODER}.vocab_size=0 must be "
      "positive;",
      f"  {_ENCODER}.hidden_size=0 must be positive;",
      f"  {_ENCODER}.num_layers=0 must be positive;",
      f"  {_ENCODER}.num_attention_heads=-2 must be positive;",
      f"  {_ENCODER}.intermediate_size=0 must be positive;",
      f"  {_ENCODER}.norm_epsilon=-1e-12 must be >= 0;",
      "  task.model.cls_heads[0].num_classes=0 must be positive;",
      "  task.train_data.shuffle_buffer_size=0 must be positive;",
      "  task.train_data.seq_length=0 must be positive;",
      f"  {_POLY}.initial_learning_rate=1e+300 must be a finite number in "
      "float32 (at most 3.4e+38);",
      "  runtime.num_packs=0 must be positive."]
  # A value that only float32 makes bad says so.
  params = _quickstart(_optimizer(learning_rate={"polynomial": {
      "initial_learning_rate": 1e-50}}))
  with pytest.raises(ValueError, match=re.escape(
      "initial_learning_rate=1e-50 (float32: 0) must be positive (a negative "
      "rate trains as gradient ascent, zero not at all).")):
    value_checks.check_values(params, trains=True, evaluates=True,
                              data_keys=_DATA)


def test_every_number_is_finite_whatever_the_mode_reads():
  """A list's items too; the trainer's keys in an eval mode too (Model
  Garden builds the optimizer for every mode)."""
  params = _quickstart(_optimizer(learning_rate={
      "type": "stepwise", "stepwise": {"boundaries": [10],
                                       "values": [0.1, float("inf")]}}))
  with pytest.raises(ValueError, match=re.escape(
      f"{_OPT}.learning_rate.stepwise.values[1]=inf must be a finite "
      "number.")):
    value_checks.check_values(params, trains=False, evaluates=True,
                              data_keys=["task.validation_data"])


@pytest.mark.parametrize("name", sorted(registry.EXPERIMENTS))
def test_model_gardens_defaults_of_every_schedule_and_optimizer_pass(name):
  """The rules by name refuse no default of any branch a config can choose
  (`prefetch_buffer_size=-1` is tf.data's AUTOTUNE)."""
  checked = 0
  for part in ("learning_rate", "warmup", "optimizer"):
    one_of = getattr(exp_factory.get_exp_config(name).trainer.optimizer_config,
                     part)
    for choice in [f.name for f in dataclasses.fields(one_of)
                   if f.name != "type"]:
      params = exp_factory.get_exp_config(name)
      params.override({
          "trainer": {"train_steps": 10**6, "optimizer_config": {
              part: {"type": choice},
              "learning_rate": {"polynomial": {"decay_steps": 10**6}}}},
          "task": {"train_data": {"prefetch_buffer_size": -1}}})
      value_checks.check_values(params, trains=True, evaluates=True,
                                data_keys=_DATA)
      checked += 1
  assert checked >= 24


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
  # Lengths and ranges in one error.
  params.override({"task": {"model": {"encoder": {"any": {
      "dropout_rate": 2.0}}}}})
  with pytest.raises(ValueError) as e:
    value_checks.validate_config(params, "train")
  assert str(e.value).splitlines() == [
      f"Config values out of range: {_ENCODER}.dropout_rate=2 must be in "
      "[0, 1);",
      "  task.train_data.seq_length=128 exceeds "
      f"{_ENCODER}.max_position_embeddings=64: shorten the sequences or "
      "enlarge the position table."]


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
