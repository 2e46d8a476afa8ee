"""Loads official RealFormer / Google BERT TF1 checkpoints into TF2 models.

Every TF1 variable is mapped onto a `RealFormerEncoder` (and optionally a
`BertPretrainerV2`), the whole checkpoint checked before any assignment.
"""

import json
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from official.legacy.bert import configs as legacy_bert_configs
from official.nlp.configs import bert as bert_configs
from official.nlp.modeling import models as mg_models
from official.nlp.tasks import masked_lm
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import encoders
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import encoder as encoder_lib

# TF1's pre-training heads (MLM, NSP): skipped when loading an encoder.
HEAD_VARIABLES = (
    "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
    "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
)

# Model Garden's NSP head name (`init_cls_pooler` reads its pooler_dense).
NSP_HEAD_NAME = "next_sentence"

# bert_config.json key (as TF1 `modeling.py` reads it) -> our encoder field.
_ENCODER_FIELDS = dict(
    vocab_size="vocab_size", hidden_size="hidden_size",
    num_hidden_layers="num_layers", num_attention_heads="num_attention_heads",
    hidden_act="hidden_activation", intermediate_size="intermediate_size",
    hidden_dropout_prob="dropout_rate",
    attention_probs_dropout_prob="attention_dropout_rate",
    max_position_embeddings="max_position_embeddings",
    type_vocab_size="type_vocab_size", initializer_range="initializer_range")
# RealFormer's addition: softmax over the running mean of the scores.
_KNOWN_KEYS = tuple(_ENCODER_FIELDS) + ("use_running_mean",)
# `BertConfig` gives these BERT-base defaults, which would load a checkpoint
# of another size into the wrong model; the others get its (TF1's) defaults.
_REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers",
                  "num_attention_heads", "intermediate_size")
# Metadata of some released BERT configs that TF1 `modeling.py` never reads.
_IGNORED_BERT_CONFIG_KEYS = ("directionality", "pooler_fc_size",
                             "pooler_num_attention_heads",
                             "pooler_num_fc_layers", "pooler_size_per_head",
                             "pooler_type")
# TF1 `get_activation` names, ours too ("gelu": tanh approximation on both).
_ACTIVATIONS = ("gelu", "relu", "tanh", "linear")
_FLOAT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob",
               "initializer_range")
# (keys, test of the value, what it must be); bool is not a number here.
_VALUE_CHECKS = (
    (_REQUIRED_KEYS + ("max_position_embeddings", "type_vocab_size"),
     lambda v: type(v) is int and v > 0, "a positive integer"),
    (_FLOAT_KEYS[:2], lambda v: type(v) in (int, float) and 0 <= v < 1,
     "in [0, 1)"),
    (_FLOAT_KEYS[2:], lambda v: type(v) in (int, float) and v > 0,
     "a number > 0"),
    (("use_running_mean",), lambda v: isinstance(v, bool), "true or false"),
    (("hidden_act",), lambda v: isinstance(v, str) and v.lower() in
     _ACTIVATIONS, f"one of {list(_ACTIVATIONS)} (as TF1's get_activation)"),
)


def read_bert_config(bert_config_file: str) -> Dict[str, Any]:
  """A TF1 `bert_config.json`, validated (errors name the file and key),
  with TF1's defaults filled in."""
  where = f"bert_config_file {bert_config_file!r}"
  if not tf.io.gfile.exists(bert_config_file):
    raise FileNotFoundError(f"{where} does not exist.")
  with tf.io.gfile.GFile(bert_config_file, "r") as f:
    try:
      raw = json.loads(f.read())
    except json.JSONDecodeError as e:
      raise ValueError(f"{where} is not valid JSON: {e}") from e
  if not isinstance(raw, dict):
    raise ValueError(f"{where} must hold a JSON object, got "
                     f"{type(raw).__name__}.")
  unknown = sorted(set(raw) - set(_KNOWN_KEYS) - set(_IGNORED_BERT_CONFIG_KEYS))
  if unknown:
    raise ValueError(
        f"{where} has unknown key(s) {unknown}; known keys: "
        f"{sorted(_KNOWN_KEYS)} (ignored metadata: "
        f"{list(_IGNORED_BERT_CONFIG_KEYS)}).")
  for key in _REQUIRED_KEYS:
    if key not in raw:
      raise ValueError(f"{where} lacks the required key {key!r}.")
  defaults = legacy_bert_configs.BertConfig.from_dict(raw).to_dict()
  config = dict({k: defaults[k] for k in _ENCODER_FIELDS},
                use_running_mean=raw.get("use_running_mean", False))
  for keys, is_valid, what in _VALUE_CHECKS:
    for key in keys:
      if not is_valid(config[key]):
        raise ValueError(f"{where} key {key!r} must be {what}, got "
                         f"{config[key]!r}.")
  config.update({key: float(config[key]) for key in _FLOAT_KEYS},
                hidden_act=config["hidden_act"].lower())
  utils.check_heads_divide(config["hidden_size"], config["num_attention_heads"],
                           f"{where} hidden_size")
  return config


def encoder_config_from_bert_config(
    bert_config: Mapping[str, Any],
    residual_attention: Optional[str] = None
) -> encoders.RealFormerEncoderConfig:
  """The `RealFormerEncoderConfig` (Post-LN, epsilon 1e-12, as TF1 BERT) of
  `read_bert_config`'s output; `residual_attention` None follows
  `use_running_mean` ("mean" if true, else "sum")."""
  from_config = "mean" if bert_config["use_running_mean"] else "sum"
  if residual_attention not in (None, from_config):
    ra.validate_residual_attention(residual_attention)
    logging.warning(
        "residual_attention=%r overrides %r implied by use_running_mean=%s "
        "in the bert config.", residual_attention, from_config,
        bert_config["use_running_mean"])
  return encoders.RealFormerEncoderConfig(
      **{field: bert_config[key] for key, field in _ENCODER_FIELDS.items()},
      residual_attention=residual_attention or from_config,
      norm_first=False, final_layer_norm=False, norm_epsilon=1e-12)


def pretrainer_config_from_bert_config(
    bert_config: Mapping[str, Any],
    residual_attention: Optional[str] = None) -> bert_configs.PretrainerConfig:
  """A Model Garden `PretrainerConfig` matching TF1 BERT's pre-training heads
  (MLM with the TF1 activation; NSP with a tanh pooler, no dropout)."""
  return bert_configs.PretrainerConfig(
      encoder=encoders.encoder_config(**encoder_config_from_bert_config(
          bert_config, residual_attention).as_dict()),
      cls_heads=[
          bert_configs.ClsHeadConfig(
              inner_dim=bert_config["hidden_size"], num_classes=2,
              activation="tanh", dropout_rate=0.0,
              name=NSP_HEAD_NAME)
      ],
      mlm_activation=bert_config["hidden_act"],
      mlm_initializer_range=bert_config["initializer_range"])


# TF1 name -> (TF1 shape, [(TF2 variable, TF1 value -> TF2 value)]).
VariableTable = Dict[str, Tuple[Tuple[int, ...], List[
    Tuple[tf.Variable, Callable[[np.ndarray], np.ndarray]]]]]


def _add(table: VariableTable, name: str, variable: tf.Variable,
         tf1_shape: Optional[Sequence[int]] = None,
         convert: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> None:
  """Maps TF1 `name` onto `variable`; by default reshaped to its shape."""
  shape = tuple(variable.shape.as_list())
  convert = convert or (lambda value: np.reshape(value, shape))
  table.setdefault(name, (tuple(tf1_shape or shape), []))[1].append(
      (variable, convert))


def _add_layer(table: VariableTable, prefix: str, layer: tf_keras.layers.Layer,
               tf1_kernel_shape: Optional[Sequence[int]] = None) -> None:
  """A LayerNorm (gamma, beta) or dense layer (kernel, bias) under `prefix`."""
  if isinstance(layer, tf_keras.layers.LayerNormalization):
    _add(table, prefix + "/gamma", layer.gamma)
    _add(table, prefix + "/beta", layer.beta)
  else:
    _add(table, prefix + "/kernel", layer.kernel, tf1_kernel_shape)
    _add(table, prefix + "/bias", layer.bias,
         tf1_kernel_shape and tf1_kernel_shape[-1:])


def encoder_variable_map(encoder: encoder_lib.RealFormerEncoder
                        ) -> VariableTable:
  """TF1 variable name -> (TF1 shape, TF2 targets) for a built encoder.

  Raises ValueError for a Pre-LN encoder (its variables have TF1's names and
  shapes, so nothing else would notice the wrong model).
  """
  config = encoder.get_config()
  if config["norm_first"]:
    raise ValueError("TF1 BERT/RealFormer is Post-LN; the encoder has "
                     "norm_first=True.")
  # Attention kernels are [H, N, D] / [N, D, H] here, [H, H] in TF1.
  square = (config["hidden_size"],) * 2
  table: VariableTable = {}
  # pylint: disable=protected-access
  for name, variable in (
      ("word_embeddings", encoder._embedding_layer.embeddings),
      ("token_type_embeddings", encoder._type_embedding_layer.embeddings),
      ("position_embeddings",
       encoder._position_embedding_layer._position_embeddings)):
    _add(table, "bert/embeddings/" + name, variable)
  _add_layer(table, "bert/embeddings/LayerNorm", encoder._embedding_norm_layer)
  for i, block in enumerate(encoder.transformer_layers):
    attention = block._attention_layer
    for name, layer, tf1_kernel_shape in (
        ("attention/self/query", attention._query_dense, square),
        ("attention/self/key", attention._key_dense, square),
        ("attention/self/value", attention._value_dense, square),
        ("attention/output/dense", attention._output_dense, square),
        ("attention/output/LayerNorm", block._attention_layer_norm, None),
        ("intermediate/dense", block._intermediate_dense, None),
        ("output/dense", block._output_dense, None),
        ("output/LayerNorm", block._output_layer_norm, None)):
      _add_layer(table, f"bert/encoder/layer_{i}/{name}", layer,
                 tf1_kernel_shape)
  # pylint: enable=protected-access
  _add_layer(table, "bert/pooler/dense", encoder.pooler_layer)
  return table


def pretrainer_variable_map(pretrainer: mg_models.BertPretrainerV2
                           ) -> VariableTable:
  """As `encoder_variable_map`, plus the MLM and the one (NSP) head."""
  table = encoder_variable_map(pretrainer.encoder_network)
  mlm = pretrainer.masked_lm
  _add_layer(table, "cls/predictions/transform/dense", mlm.dense)
  _add_layer(table, "cls/predictions/transform/LayerNorm", mlm.layer_norm)
  _add(table, "cls/predictions/output_bias", mlm.bias)
  (head,) = pretrainer.classification_heads
  # TF1's one pooler feeds the NSP logits; `ClassificationHead` pools [CLS]
  # with its own dense+tanh, so TF1's pooler fills both.
  _add_layer(table, "bert/pooler/dense", head.dense)
  _add(table, "cls/seq_relationship/output_weights", head.out_proj.kernel,
       (2, head.inner_dim), np.transpose)
  _add(table, "cls/seq_relationship/output_bias", head.out_proj.bias)
  return table


def load_tf1_weights(checkpoint_path: str,
                     table: VariableTable,
                     skippable: Sequence[str] = ()) -> Dict[str, List[str]]:
  """Checks a TF1 checkpoint against `table` (a `CheckpointMismatchError`
  lists every problem), then assigns every variable; `skippable`: TF1 names
  that may be present without being loaded. Returns the sorted TF1 names:
  {"loaded": [...], "ignored": [optimizer state], "skipped": [...]}.
  """
  path = run_directory.resolve_checkpoint(checkpoint_path, "TF1 checkpoint")
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes:
    raise ValueError(
        f"{path!r} is an object-based TF2 checkpoint, not a TF1 (name-based) "
        "one; load it with encoder_from_tf2_checkpoint.")
  fmt = errors.format_shape
  missing = [f"{name} (expected shape {fmt(tf1_shape)})"
             for name, (tf1_shape, _) in table.items() if name not in shapes]
  mismatched = [f"{name}: checkpoint {fmt(shapes[name])}, model "
                f"{fmt(tf1_shape)}" for name, (tf1_shape, _) in table.items()
                if name in shapes and tuple(shapes[name]) != tf1_shape]
  extra = [n for n in sorted(shapes) if n not in table]
  ignored = [n for n in extra if n == "global_step" or  # Optimizer state.
             n.endswith(("/adam_m", "/adam_v"))]
  skipped = [n for n in extra if n in skippable and n not in ignored]
  unexpected = [f"{n} (shape {fmt(shapes[n])})" for n in extra
                if n not in ignored + skipped]
  errors.raise_if_problems(
      f"TF1 checkpoint {path!r} does not match the model:", missing,
      unexpected, mismatched,
      footer=("Check that bert_config_file belongs to this checkpoint. "
              "Ignored by design: */adam_m, */adam_v, global_step."))
  try:  # Every tensor first: a truncated file fails before any assignment.
    values = {name: reader.get_tensor(name) for name in table}
  except (tf.errors.OpError, IndexError) as e:
    raise ValueError(f"TF1 checkpoint {path!r} is not readable "
                     f"({type(e).__name__}: {e}).") from None
  for name, (_, targets) in table.items():
    for variable, convert in targets:
      variable.assign(convert(values[name]).astype(
          variable.dtype.as_numpy_dtype))
  logging.info("Loaded %d TF1 variables from %s; ignored %d optimizer "
               "variables; skipped %s.", len(table), path, len(ignored),
               skipped or "none")
  return dict(loaded=sorted(table), ignored=ignored, skipped=skipped)


def encoder_from_tf1_checkpoint(
    checkpoint_path: str,
    bert_config_file: str,
    residual_attention: Optional[str] = None
) -> encoder_lib.RealFormerEncoder:
  """A `RealFormerEncoder` with every weight of a TF1 RealFormer/BERT checkpoint
  (a prefix or its directory); `residual_attention="none"` loads plain BERT."""
  config = encoder_config_from_bert_config(read_bert_config(bert_config_file),
                                           residual_attention)
  encoder = encoders.build_realformer_encoder(config)
  _ = encoder(utils.dummy_inputs())
  load_tf1_weights(checkpoint_path, encoder_variable_map(encoder),
                   skippable=HEAD_VARIABLES)
  return encoder


def pretrainer_from_tf1_checkpoint(
    checkpoint_path: str,
    bert_config_file: str,
    residual_attention: Optional[str] = None) -> mg_models.BertPretrainerV2:
  """A `BertPretrainerV2` (encoder, MLM, NSP) from a TF1 checkpoint holding
  both heads; `classification_heads[0]` is "next_sentence"."""
  config = pretrainer_config_from_bert_config(
      read_bert_config(bert_config_file), residual_attention)
  pretrainer = masked_lm.MaskedLMTask(
      masked_lm.MaskedLMConfig(model=config)).build_model()
  _ = pretrainer(utils.dummy_inputs(masked_positions=1))
  load_tf1_weights(checkpoint_path, pretrainer_variable_map(pretrainer))
  return pretrainer
