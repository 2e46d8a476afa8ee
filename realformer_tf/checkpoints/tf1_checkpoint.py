"""Loads official RealFormer / Google BERT TF1 checkpoints into TF2 models.

The TF1 code (google-research/realformer `realformer.py`, a fork of Google
BERT's `modeling.py`) stores name-based variables (`bert/encoder/layer_0/...`,
`cls/predictions/...`). This module maps every one of them onto a
`RealFormerEncoder` and, optionally, a Model Garden `BertPretrainerV2` (MLM head
+ "next_sentence" `ClassificationHead`).

Why not Model Garden's converter (`official/nlp/tools/
tf1_bert_checkpoint_converter_lib.py`)? It renames the variables into a
temporary TF1 checkpoint and streams it into a Keras *Model* by variable name
with `load_weights(...).assert_existing_objects_matched()`. That needs a
`tf_keras.Model` (our encoder is a Layer), depends on Keras name scoping, does
not report checkpoint variables the model never used, and reports shape
mismatches only as a TF restore error. We keep its name table (the TF1 -> TF2
pairs below are `BERT_V2_NAME_REPLACEMENTS` spelled out per variable, with the
same head reshapes and the same NSP transpose) but read the tensors with
`tf.train.load_checkpoint` and assign them directly, after checking the whole
checkpoint against the whole model, so a load is all or nothing.

TF1 -> TF2 variable map (H = hidden_size, N = heads, D = H / N):

  bert/embeddings/word_embeddings [V, H]    encoder._embedding_layer.embeddings
  bert/embeddings/token_type_embeddings     encoder._type_embedding_layer
                                              .embeddings
  bert/embeddings/position_embeddings       encoder._position_embedding_layer
                                              ._position_embeddings
  bert/embeddings/LayerNorm/{gamma,beta}    encoder._embedding_norm_layer
  bert/encoder/layer_i/                     encoder._transformer_layers[i].
    attention/self/{query,key,value}/kernel   _attention_layer._{query,key,
                                              value}_dense.kernel [H, N, D]
                                              (reshaped from [H, H])
    attention/self/{query,key,value}/bias     ... .bias [N, D] (from [H])
    attention/output/dense/kernel [H, H]      _attention_layer._output_dense
                                              .kernel [N, D, H]
    attention/output/dense/bias               ... .bias [H]
    attention/output/LayerNorm                _attention_layer_norm
    intermediate/dense                        _intermediate_dense
    output/dense                              _output_dense
    output/LayerNorm                          _output_layer_norm
  bert/pooler/dense/{kernel,bias}           encoder._pooler_layer, and (with
                                              heads) next_sentence.dense
                                              ("pooler_dense")
  cls/predictions/transform/dense           masked_lm.dense
  cls/predictions/transform/LayerNorm       masked_lm.layer_norm
  cls/predictions/output_bias [V]           masked_lm.bias
  cls/seq_relationship/output_weights [2,H] next_sentence.out_proj.kernel
                                              [H, 2] (transposed)
  cls/seq_relationship/output_bias [2]      next_sentence.out_proj.bias

The NSP head: TF1 computes `pooled = tanh(W_p h_cls + b_p)` once (the
encoder's pooler) and `logits = pooled W_nsp^T + b_nsp`. Model Garden's
`BertPretrainerV2` feeds the *sequence* output to a `ClassificationHead`,
which has its own dense+tanh pooler on the [CLS] token (`inner_dim` must be H;
`inner_dim=0` would apply the logits layer to every position), followed by the
logits layer. So the TF1 pooler is copied into both the encoder's pooler and
the head's `pooler_dense`, which makes the head's logits equal TF1's.

Ignored on purpose: the optimizer slots `<var>/adam_m`, `<var>/adam_v` of
BERT's AdamWeightDecayOptimizer and `global_step`. Loading only the encoder
skips the pre-training head variables (`cls/...`) by their exact names.
Anything else that is missing, unused or of the wrong shape raises a
`CheckpointMismatchError` naming it, before any variable is assigned.
"""

import json
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.configs import bert as bert_configs
from official.nlp.configs import encoders as mg_encoders
from official.nlp.modeling import layers as mg_layers
from official.nlp.modeling import models as mg_models
from realformer_tf.checkpoints import errors
from realformer_tf.configs import encoders
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import realformer_encoder

# Optimizer state in BERT/RealFormer TF1 checkpoints; never loaded.
IGNORED_SUFFIXES = ("/adam_m", "/adam_v")
IGNORED_NAMES = ("global_step",)

MLM_VARIABLES = (
    "cls/predictions/transform/dense/kernel",
    "cls/predictions/transform/dense/bias",
    "cls/predictions/transform/LayerNorm/gamma",
    "cls/predictions/transform/LayerNorm/beta",
    "cls/predictions/output_bias",
)
NSP_VARIABLES = (
    "cls/seq_relationship/output_weights",
    "cls/seq_relationship/output_bias",
)
HEAD_VARIABLES = MLM_VARIABLES + NSP_VARIABLES

# The name Model Garden's pre-training configs give the NSP head; the
# SentencePrediction task's `init_cls_pooler` reads `next_sentence.pooler_dense`.
NSP_HEAD_NAME = "next_sentence"

# bert_config.json: key -> (TF1 default or _REQUIRED, validator kind).
_REQUIRED = object()
_BERT_CONFIG_KEYS = {
    "vocab_size": (_REQUIRED, "positive_int"),
    "hidden_size": (_REQUIRED, "positive_int"),
    "num_hidden_layers": (_REQUIRED, "positive_int"),
    "num_attention_heads": (_REQUIRED, "positive_int"),
    "intermediate_size": (_REQUIRED, "positive_int"),
    "hidden_act": ("gelu", "activation"),
    "hidden_dropout_prob": (0.1, "probability"),
    "attention_probs_dropout_prob": (0.1, "probability"),
    "max_position_embeddings": (512, "positive_int"),
    "type_vocab_size": (16, "positive_int"),
    "initializer_range": (0.02, "positive_float"),
    # RealFormer's addition: softmax over the running mean of the scores.
    "use_running_mean": (False, "bool"),
}
# Metadata some released BERT configs carry (e.g. Chinese / multilingual) that
# TF1 `modeling.py` never reads.
_IGNORED_BERT_CONFIG_KEYS = ("directionality", "pooler_fc_size",
                             "pooler_num_attention_heads",
                             "pooler_num_fc_layers", "pooler_size_per_head",
                             "pooler_type")
# TF1 `modeling.get_activation` names -> RealFormerEncoderConfig /
# Model Garden `tf_utils.get_activation` names. "gelu" is the tanh
# approximation on both sides (`realformer_encoder.approx_gelu`,
# `official.modeling.activations.gelu`), as in TF1.
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "tanh": "tanh",
                "linear": "linear"}


def read_bert_config(bert_config_file: str) -> Dict[str, Any]:
  """Reads and validates a TF1 `bert_config.json`.

  Args:
    bert_config_file: Path of the JSON file.

  Returns:
    The config with TF1 `BertConfig` defaults filled in for optional keys.

  Raises:
    FileNotFoundError: The file does not exist.
    ValueError: The file is not a JSON object, lacks a required key, has an
      unknown key or a value of the wrong type/range; the message names the
      file and the key.
  """
  if not bert_config_file:
    raise ValueError("bert_config_file is empty; pass the bert_config.json "
                     "that came with the TF1 checkpoint.")
  if not tf.io.gfile.exists(bert_config_file):
    raise FileNotFoundError(f"bert_config_file {bert_config_file!r} does not "
                            "exist.")
  with tf.io.gfile.GFile(bert_config_file, "r") as f:
    text = f.read()
  try:
    raw = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"bert_config_file {bert_config_file!r} is not valid "
                     f"JSON: {e}") from e
  if not isinstance(raw, dict):
    raise ValueError(f"bert_config_file {bert_config_file!r} must hold a JSON "
                     f"object, got {type(raw).__name__}.")

  unknown = sorted(set(raw) - set(_BERT_CONFIG_KEYS) -
                   set(_IGNORED_BERT_CONFIG_KEYS))
  if unknown:
    raise ValueError(
        f"bert_config_file {bert_config_file!r} has unknown key(s) {unknown}; "
        f"known keys: {sorted(_BERT_CONFIG_KEYS)} (ignored metadata: "
        f"{list(_IGNORED_BERT_CONFIG_KEYS)}).")
  config = {}
  for key, (default, kind) in _BERT_CONFIG_KEYS.items():
    if key not in raw:
      if default is _REQUIRED:
        raise ValueError(f"bert_config_file {bert_config_file!r} lacks the "
                         f"required key {key!r}.")
      config[key] = default
      continue
    config[key] = _validate_value(bert_config_file, key, raw[key], kind)
  if config["hidden_size"] % config["num_attention_heads"]:
    raise ValueError(
        f"bert_config_file {bert_config_file!r}: hidden_size="
        f"{config['hidden_size']} is not divisible by num_attention_heads="
        f"{config['num_attention_heads']}.")
  return config


def _validate_value(path: str, key: str, value: Any, kind: str) -> Any:
  """Checks one bert_config value; returns it normalized."""
  where = f"bert_config_file {path!r} key {key!r}"
  if kind == "positive_int":
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
      raise ValueError(f"{where} must be a positive integer, got {value!r}.")
    return value
  if kind in ("probability", "positive_float"):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      raise ValueError(f"{where} must be a number, got {value!r}.")
    if kind == "probability" and not 0.0 <= value < 1.0:
      raise ValueError(f"{where} must be in [0, 1), got {value!r}.")
    if kind == "positive_float" and value <= 0:
      raise ValueError(f"{where} must be > 0, got {value!r}.")
    return float(value)
  if kind == "bool":
    if not isinstance(value, bool):
      raise ValueError(f"{where} must be true or false, got {value!r}.")
    return value
  if kind == "activation":
    name = value.lower() if isinstance(value, str) else value
    if name not in _ACTIVATIONS:
      raise ValueError(f"{where} must be one of {sorted(_ACTIVATIONS)} (as "
                       f"TF1 BERT's get_activation), got {value!r}.")
    return _ACTIVATIONS[name]
  raise AssertionError(f"unhandled kind {kind}")


def residual_attention_from_bert_config(
    bert_config: Mapping[str, Any],
    residual_attention: Optional[str] = None) -> str:
  """`residual_attention`, or "mean"/"sum" from the config's use_running_mean."""
  from_config = "mean" if bert_config["use_running_mean"] else "sum"
  if residual_attention is None:
    return from_config
  ra.validate_residual_attention(residual_attention)
  if residual_attention != from_config:
    logging.warning(
        "residual_attention=%r overrides %r implied by use_running_mean=%s "
        "in the bert config.", residual_attention, from_config,
        bert_config["use_running_mean"])
  return residual_attention


def encoder_config_from_bert_config(
    bert_config: Mapping[str, Any],
    residual_attention: Optional[str] = None
) -> encoders.RealFormerEncoderConfig:
  """The `RealFormerEncoderConfig` of a validated TF1 bert config.

  Post-LN, LayerNorm epsilon 1e-12 and tanh-approximated GELU, as TF1 BERT.

  Args:
    bert_config: Output of `read_bert_config`.
    residual_attention: None to follow `use_running_mean` ("mean" if true,
      else "sum"), or "sum"/"mean"/"none" to override.

  Returns:
    The encoder config.
  """
  return encoders.RealFormerEncoderConfig(
      vocab_size=bert_config["vocab_size"],
      hidden_size=bert_config["hidden_size"],
      num_layers=bert_config["num_hidden_layers"],
      num_attention_heads=bert_config["num_attention_heads"],
      hidden_activation=bert_config["hidden_act"],
      intermediate_size=bert_config["intermediate_size"],
      dropout_rate=bert_config["hidden_dropout_prob"],
      attention_dropout_rate=bert_config["attention_probs_dropout_prob"],
      max_position_embeddings=bert_config["max_position_embeddings"],
      type_vocab_size=bert_config["type_vocab_size"],
      initializer_range=bert_config["initializer_range"],
      residual_attention=residual_attention_from_bert_config(
          bert_config, residual_attention),
      norm_first=False,
      final_layer_norm=False,
      norm_epsilon=1e-12)


def pretrainer_config_from_bert_config(
    bert_config: Mapping[str, Any],
    residual_attention: Optional[str] = None,
    next_sentence_dropout_rate: float = 0.0) -> bert_configs.PretrainerConfig:
  """A Model Garden `PretrainerConfig` matching TF1 BERT's pre-training heads.

  Args:
    bert_config: Output of `read_bert_config`.
    residual_attention: See `encoder_config_from_bert_config`.
    next_sentence_dropout_rate: Dropout before the NSP logits. TF1 has none;
      Model Garden's pre-training configs use 0.1.

  Returns:
    The config: the RealFormer encoder, the MLM head with the TF1 hidden
    activation, and a "next_sentence" `ClassificationHead` with a tanh pooler
    of width hidden_size.
  """
  return bert_configs.PretrainerConfig(
      encoder=encoders.encoder_config(**encoder_config_from_bert_config(
          bert_config, residual_attention).as_dict()),
      cls_heads=[
          bert_configs.ClsHeadConfig(
              inner_dim=bert_config["hidden_size"], num_classes=2,
              activation="tanh", dropout_rate=next_sentence_dropout_rate,
              name=NSP_HEAD_NAME)
      ],
      mlm_activation=bert_config["hidden_act"],
      mlm_initializer_range=bert_config["initializer_range"])


def build_pretrainer(config: bert_configs.PretrainerConfig
                    ) -> mg_models.BertPretrainerV2:
  """Builds a `BertPretrainerV2` as `MaskedLMTask.build_model` does; creates its variables."""
  encoder = mg_encoders.build_encoder(config.encoder)
  heads = [mg_layers.ClassificationHead(**c.as_dict())
           for c in config.cls_heads]
  pretrainer = mg_models.BertPretrainerV2(
      encoder_network=encoder,
      mlm_activation=tf_utils.get_activation(config.mlm_activation),
      mlm_initializer=tf_keras.initializers.TruncatedNormal(
          stddev=config.mlm_initializer_range),
      classification_heads=heads)
  _ = pretrainer(_dummy_inputs(with_masked_positions=True))
  return pretrainer


def _dummy_inputs(with_masked_positions: bool = False) -> Dict[str, tf.Tensor]:
  ids = tf.zeros([1, 2], tf.int32)
  inputs = dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                input_type_ids=ids)
  if with_masked_positions:
    inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
  return inputs


class _Target(NamedTuple):
  """Where one TF1 tensor goes: a TF2 variable and how to convert it."""
  variable: tf.Variable
  convert: Callable[[np.ndarray], np.ndarray]


class _Entry(NamedTuple):
  tf1_shape: Tuple[int, ...]
  targets: List[_Target]


def _reshape_to(variable: tf.Variable) -> Callable[[np.ndarray], np.ndarray]:
  shape = tuple(variable.shape.as_list())
  return lambda value: np.reshape(value, shape)


def _transpose(value: np.ndarray) -> np.ndarray:
  return np.transpose(value)


def _add(table: Dict[str, _Entry], name: str, tf1_shape: Sequence[int],
         variable: tf.Variable,
         convert: Optional[Callable[[np.ndarray], np.ndarray]] = None) -> None:
  """Maps TF1 `name` (of `tf1_shape`) onto `variable`."""
  tf1_shape = tuple(int(d) for d in tf1_shape)
  target = _Target(variable, convert or _reshape_to(variable))
  if name in table:
    if table[name].tf1_shape != tf1_shape:
      raise AssertionError(f"{name}: inconsistent TF1 shapes")
    table[name].targets.append(target)
  else:
    table[name] = _Entry(tf1_shape, [target])


def _dense(table, prefix, layer, in_dim, out_dim):
  _add(table, prefix + "/kernel", (in_dim, out_dim), layer.kernel)
  _add(table, prefix + "/bias", (out_dim,), layer.bias)


def _layer_norm(table, prefix, layer, dim):
  _add(table, prefix + "/gamma", (dim,), layer.gamma)
  _add(table, prefix + "/beta", (dim,), layer.beta)


def encoder_variable_map(encoder: realformer_encoder.RealFormerEncoder
                        ) -> Dict[str, _Entry]:
  """TF1 variable name -> (TF1 shape, TF2 targets) for a built encoder."""
  cfg = encoder.get_config()
  if cfg["embedding_width"] != cfg["hidden_size"]:
    raise ValueError(
        f"TF1 BERT has no embedding projection, but the encoder has "
        f"embedding_width={cfg['embedding_width']} != "
        f"hidden_size={cfg['hidden_size']}.")
  if cfg["norm_first"]:
    raise ValueError("TF1 BERT/RealFormer is Post-LN; the encoder has "
                     "norm_first=True.")
  h = cfg["hidden_size"]
  inner = cfg["inner_dim"]
  table: Dict[str, _Entry] = {}
  _add(table, "bert/embeddings/word_embeddings", (cfg["vocab_size"], h),
       encoder._embedding_layer.embeddings)  # pylint: disable=protected-access
  _add(table, "bert/embeddings/token_type_embeddings",
       (cfg["type_vocab_size"], h), encoder._type_embedding_layer.embeddings)  # pylint: disable=protected-access
  _add(table, "bert/embeddings/position_embeddings",
       (cfg["max_sequence_length"], h),
       encoder._position_embedding_layer._position_embeddings)  # pylint: disable=protected-access
  _layer_norm(table, "bert/embeddings/LayerNorm",
              encoder._embedding_norm_layer, h)  # pylint: disable=protected-access
  # pylint: disable=protected-access
  for i, block in enumerate(encoder.transformer_layers):
    prefix = f"bert/encoder/layer_{i}"
    attention = block._attention_layer
    for part, dense in (("query", attention._query_dense),
                        ("key", attention._key_dense),
                        ("value", attention._value_dense)):
      _dense(table, f"{prefix}/attention/self/{part}", dense, h, h)
    _dense(table, f"{prefix}/attention/output/dense", attention._output_dense,
           h, h)
    _layer_norm(table, f"{prefix}/attention/output/LayerNorm",
                block._attention_layer_norm, h)
    _dense(table, f"{prefix}/intermediate/dense", block._intermediate_dense, h,
           inner)
    _dense(table, f"{prefix}/output/dense", block._output_dense, inner, h)
    _layer_norm(table, f"{prefix}/output/LayerNorm", block._output_layer_norm,
                h)
  # pylint: enable=protected-access
  _dense(table, "bert/pooler/dense", encoder.pooler_layer, h, h)
  return table


def pretrainer_variable_map(pretrainer: mg_models.BertPretrainerV2
                           ) -> Dict[str, _Entry]:
  """TF1 variable name -> (TF1 shape, TF2 targets) for a built pretrainer.

  The pretrainer must have exactly one classification head, the NSP head
  named "next_sentence" with `inner_dim` = hidden size and 2 classes.
  """
  encoder = pretrainer.encoder_network
  table = encoder_variable_map(encoder)
  h = encoder.get_config()["hidden_size"]
  vocab = encoder.get_config()["vocab_size"]
  mlm = pretrainer.masked_lm
  _dense(table, "cls/predictions/transform/dense", mlm.dense, h, h)
  _layer_norm(table, "cls/predictions/transform/LayerNorm", mlm.layer_norm, h)
  _add(table, "cls/predictions/output_bias", (vocab,), mlm.bias)

  heads = pretrainer.classification_heads
  if len(heads) != 1 or heads[0].name != NSP_HEAD_NAME:
    raise ValueError(
        "The pretrainer must have exactly one classification head named "
        f"{NSP_HEAD_NAME!r} (TF1 BERT's NSP); got "
        f"{[head.name for head in heads]}.")
  head = heads[0]
  if head.inner_dim != h or head.num_classes != 2:
    raise ValueError(
        f"The {NSP_HEAD_NAME!r} head must have inner_dim={h} (its pooler is "
        f"TF1's bert/pooler/dense) and num_classes=2; got "
        f"inner_dim={head.inner_dim}, num_classes={head.num_classes}.")
  # TF1 reuses the encoder's pooler for NSP; the head has its own copy.
  _dense(table, "bert/pooler/dense", head.dense, h, h)
  _add(table, "cls/seq_relationship/output_weights", (2, h),
       head.out_proj.kernel, _transpose)
  _add(table, "cls/seq_relationship/output_bias", (2,), head.out_proj.bias)
  return table


def resolve_checkpoint_path(checkpoint_path: str, what: str) -> str:
  """A checkpoint prefix from a prefix or a directory; clear error if none."""
  if not checkpoint_path:
    raise ValueError(f"{what} is empty.")
  if tf.io.gfile.isdir(checkpoint_path):
    latest = tf.train.latest_checkpoint(checkpoint_path)
    if not latest:
      raise FileNotFoundError(
          f"{what} {checkpoint_path!r} is a directory without a 'checkpoint' "
          "state file; pass the checkpoint prefix, e.g. .../model.ckpt-1000.")
    return latest
  if not tf.io.gfile.exists(checkpoint_path + ".index"):
    raise FileNotFoundError(
        f"{what} {checkpoint_path!r} is not a checkpoint: "
        f"{checkpoint_path + '.index'} does not exist.")
  return checkpoint_path


def is_ignored_tf1_variable(name: str) -> bool:
  """Optimizer state that TF1 checkpoints carry and loading skips."""
  return name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES)


def load_tf1_weights(checkpoint_path: str,
                     table: Mapping[str, _Entry],
                     skippable: Sequence[str] = ()) -> Dict[str, List[str]]:
  """Checks a TF1 checkpoint against `table`, then assigns every variable.

  Args:
    checkpoint_path: TF1 checkpoint prefix (or a directory with a
      'checkpoint' file).
    table: From `encoder_variable_map` / `pretrainer_variable_map`.
    skippable: Exact TF1 names that may be present without being loaded.

  Returns:
    {"loaded": [...], "ignored": [optimizer state], "skipped": [...]}, TF1
    names, sorted.

  Raises:
    CheckpointMismatchError: A variable of `table` is missing, a checkpoint
      variable is neither in `table`, optimizer state nor `skippable`, or a
      shape differs. Nothing is assigned then.
  """
  path = resolve_checkpoint_path(checkpoint_path, "TF1 checkpoint")
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  if "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes:
    raise ValueError(
        f"{path!r} is an object-based TF2 checkpoint, not a TF1 (name-based) "
        "one; load it with encoder_from_tf2_checkpoint.")
  missing, mismatched = [], []
  for name, entry in table.items():
    if name not in shapes:
      missing.append(f"{name} (expected shape "
                     f"{errors.format_shape(entry.tf1_shape)})")
    elif tuple(shapes[name]) != entry.tf1_shape:
      mismatched.append(
          f"{name}: checkpoint {errors.format_shape(shapes[name])}, model "
          f"{errors.format_shape(entry.tf1_shape)}")
  ignored, skipped, unexpected = [], [], []
  for name in sorted(shapes):
    if name in table:
      continue
    if is_ignored_tf1_variable(name):
      ignored.append(name)
    elif name in skippable:
      skipped.append(name)
    else:
      unexpected.append(f"{name} (shape {errors.format_shape(shapes[name])})")
  errors.raise_if_problems(
      f"TF1 checkpoint {path!r} does not match the model:", missing,
      unexpected, mismatched,
      footer=("Check that bert_config_file belongs to this checkpoint. "
              "Ignored by design: */adam_m, */adam_v, global_step."))

  for name, entry in table.items():
    value = reader.get_tensor(name)
    for target in entry.targets:
      target.variable.assign(
          target.convert(value).astype(target.variable.dtype.as_numpy_dtype))
  logging.info("Loaded %d TF1 variables from %s; ignored %d optimizer "
               "variables; skipped %s.", len(table), path, len(ignored),
               skipped or "none")
  return dict(loaded=sorted(table), ignored=ignored, skipped=skipped)


def encoder_from_tf1_checkpoint(
    checkpoint_path: str,
    bert_config_file: str,
    residual_attention: Optional[str] = None
) -> realformer_encoder.RealFormerEncoder:
  """A `RealFormerEncoder` with every weight of a TF1 RealFormer/BERT checkpoint.

  Args:
    checkpoint_path: TF1 checkpoint prefix (e.g. `.../model.ckpt-1000000`) or
      its directory.
    bert_config_file: The checkpoint's `bert_config.json`.
    residual_attention: None: "mean" if the config has
      `"use_running_mean": true`, else "sum" (RealFormer). Pass "none" to
      load a Google BERT checkpoint as plain BERT.

  Returns:
    The encoder (Post-LN, tanh GELU, LayerNorm epsilon 1e-12).

  Raises:
    CheckpointMismatchError: See `load_tf1_weights`; pre-training head
      variables (`cls/...`) are skipped.
    ValueError, FileNotFoundError: Bad config file or checkpoint path.
  """
  bert_config = read_bert_config(bert_config_file)
  config = encoder_config_from_bert_config(bert_config, residual_attention)
  encoder = encoders.build_realformer_encoder(config)
  _ = encoder(_dummy_inputs())
  load_tf1_weights(checkpoint_path, encoder_variable_map(encoder),
                   skippable=HEAD_VARIABLES)
  return encoder


def pretrainer_from_tf1_checkpoint(
    checkpoint_path: str,
    bert_config_file: str,
    residual_attention: Optional[str] = None,
    next_sentence_dropout_rate: float = 0.0
) -> mg_models.BertPretrainerV2:
  """A `BertPretrainerV2` (RealFormer encoder, MLM, NSP) from a TF1 checkpoint.

  The checkpoint must hold both pre-training heads (`cls/predictions/*`,
  `cls/seq_relationship/*`).

  Args:
    checkpoint_path: TF1 checkpoint prefix or directory.
    bert_config_file: The checkpoint's `bert_config.json`.
    residual_attention: See `encoder_from_tf1_checkpoint`.
    next_sentence_dropout_rate: See `pretrainer_config_from_bert_config`.

  Returns:
    The pretrainer; `pretrainer.encoder_network` is the `RealFormerEncoder`,
    `pretrainer.classification_heads[0]` the "next_sentence" head.
  """
  bert_config = read_bert_config(bert_config_file)
  pretrainer = build_pretrainer(pretrainer_config_from_bert_config(
      bert_config, residual_attention, next_sentence_dropout_rate))
  load_tf1_weights(checkpoint_path, pretrainer_variable_map(pretrainer))
  return pretrainer
