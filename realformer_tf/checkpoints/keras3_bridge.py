"""Weights both ways between our tf_keras runs and `RealFormerBackbone`.

In: `load_run`, `load_masked_lm`, `from_tf_keras_encoder`; out:
`to_tf_keras_encoder`, `save_run` (what `convert` writes). It imports
TensorFlow, so it lives here, not in the TF-free Keras 3 face; every mismatch
is named before any weight is assigned.
"""

from typing import Any, Dict, Optional

import tensorflow as tf

from official.nlp.modeling import layers as mg_layers
# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.autograph.core import ag_ctx
# pylint: enable=g-direct-tensorflow-import

from realformer_tf import utils
from realformer_tf.checkpoints import converted_output
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import keras3_configs
from realformer_tf.checkpoints import keras3_weight_map as weight_map
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.core import writes
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import masked_lm as masked_lm_lib
from realformer_tf.keras3 import saving
from realformer_tf.networks import encoder as encoder_lib


def tf_keras_encoder_slots(encoder: encoder_lib.RealFormerEncoder
                          ) -> Dict[str, Any]:
  """Every weight of a tf_keras `RealFormerEncoder`, by `weight_map` name."""
  # pylint: disable=protected-access
  if encoder._embedding_projection is not None:
    raise ValueError(
        "The tf_keras encoder has an embedding projection (embedding_width "
        "!= hidden_size); RealFormerBackbone has none.")
  slots = {"word_embeddings/embeddings": encoder._embedding_layer.embeddings,
           "position_embedding/embeddings":
               encoder._position_embedding_layer._position_embeddings,
           "type_embeddings/embeddings":
               encoder._type_embedding_layer.embeddings,
           **weight_map.norm_slots("embeddings/layer_norm",
                                   encoder._embedding_norm_layer),
           **weight_map.dense_slots("pooler_transform",
                                    encoder.pooler_layer)}
  for i, block in enumerate(encoder.transformer_layers):
    slots.update(weight_map.block_slots(f"transformer/layer_{i}", block))
  if encoder._final_layer_norm is not None:
    slots.update(weight_map.norm_slots("final_layer_norm",
                                       encoder._final_layer_norm))
  # pylint: enable=protected-access
  return slots


def tf_keras_masked_lm_slots(head: mg_layers.MaskedLM) -> Dict[str, Any]:
  """Model Garden's MLM head's transform and output bias, by `weight_map`
  name."""
  return {**weight_map.dense_slots(weight_map.MASKED_LM_DENSE, head.dense),
          **weight_map.norm_slots(weight_map.MASKED_LM_NORM, head.layer_norm),
          weight_map.MASKED_LM_BIAS: head.bias}


def _run_config(checkpoint_path, encoder_config_or_kwargs, residual_attention
                ) -> encoders.RealFormerEncoderConfig:
  """`load_run`'s encoder config: given, else recorded beside the run."""
  if str(checkpoint_path).endswith(saving.KERAS_SUFFIX):
    saving.check_keras_file(checkpoint_path)  # Says what it is, else:
    raise ValueError(
        f"checkpoint_path={checkpoint_path!r} is a Keras 3 model file, not a "
        "TF checkpoint: load it with realformer_tf.keras3.load_model.")
  if encoder_config_or_kwargs is None:
    config = keras3_configs.run_encoder_config(checkpoint_path)
  else:
    config = tf2_checkpoint.realformer_config_from(encoder_config_or_kwargs)
  if residual_attention is not None:
    config = tf2_checkpoint.realformer_config_from(config, residual_attention)
  config.validate()
  return config


def _head_path(encoder_path: str) -> str:
  """The MLM head's path beside the encoder's (as `BertPretrainerV2` saves)."""
  parent = encoder_path.rpartition("/")[0]
  return f"{parent}/masked_lm" if parent else "masked_lm"


def _read_run(checkpoint_path, config, encoder_path, with_head):
  """`(prefix, (encoder values, head values or {}))` by `weight_map` name,
  from the newest readable checkpoint."""
  # Shapes only; nothing is assigned here.
  with tf2_checkpoint.shapes_only_graph() as built:
    shadow = encoders.build_realformer_encoder(config)
    built.append(shadow)
    # AutoGraph off: tf_keras would transpile every layer's `call` (slow on
    # first use) for Python-only control flow.
    with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.DISABLED):
      outputs = shadow(utils.dummy_inputs())
      head = None
      if with_head:  # Model Garden's head, as BertPretrainerV2 builds it.
        head = mg_layers.MaskedLM(
            embedding_table=shadow.get_embedding_table(), name="masked_lm")
        head(outputs["sequence_output"],
             masked_positions=tf.zeros([1, 1], tf.int32))
        built.append(head)
    slots = tf_keras_encoder_slots(shadow)

    def read(prefix):
      """Reads every weight now, so `read_latest` skips a damaged file."""
      reader, pairs, found = tf2_checkpoint.check_encoder_checkpoint(
          prefix, shadow, encoder_path)
      key_of = {id(variable): key for variable, key in pairs}
      head_slots = {}
      if head is not None:
        head_path = _head_path(found)
        try:
          _, head_pairs, _ = tf2_checkpoint.check_encoder_checkpoint(
              prefix, head, head_path, what="masked LM head")
        except errors.CheckpointMismatchError:
          raise
        except ValueError as e:  # Not there (the file read for the encoder).
          raise errors.CheckpointMismatchError(
              f"{e} It is an encoder only (`save_run`, or `convert` "
              "without --with_pretraining_heads): build "
              "RealFormerMaskedLM(load_run(...)) for a fresh head.") from None
        key_of.update({id(v): key for v, key in head_pairs})
        head_slots = tf_keras_masked_lm_slots(head)
      try:
        return tuple({name: reader.get_tensor(key_of[id(v)])
                      for name, v in wanted.items()}
                     for wanted in (slots, head_slots))
      except (tf.errors.OpError, IndexError, RuntimeError) as e:
        raise ValueError(f"Checkpoint {prefix!r} is not readable "
                         f"({type(e).__name__}: {e})") from None

    return run_directory.read_latest(checkpoint_path, "checkpoint_path", read)


def load_run(checkpoint_path: str,
             encoder_config_or_kwargs: Optional[
                 tf2_checkpoint.EncoderConfigLike] = None,
             residual_attention: Optional[str] = None,
             encoder_path: Optional[str] = None,
             **overrides) -> backbone_lib.RealFormerBackbone:
  """A `RealFormerBackbone` holding a run's (or converted) encoder weights
  (the encoder only: `load_masked_lm` adds the MLM head).

  Args:
    checkpoint_path: A `ckpt-N` prefix or a model dir (its newest checkpoint
      that reads; a damaged newer one is skipped with a warning).
    encoder_config_or_kwargs: The encoder's config; None reads it from the
      `params.yaml` or `encoder.yaml` beside the checkpoint.
    residual_attention: Overrides the config's ("none": BERT exactly).
    encoder_path: Where the encoder is in the checkpoint; None tries
      `tf2_checkpoint.ENCODER_PATHS`.
    **overrides: Other `RealFormerBackbone` arguments (`dropout`, `dtype`).

  Raises:
    CheckpointMismatchError: Naming every missing, unused or mis-shaped
      variable; nothing is assigned.
    ValueError: For a `.keras` file, a set-aside directory or no readable
      checkpoint.
  """
  config = _run_config(checkpoint_path, encoder_config_or_kwargs,
                       residual_attention)
  prefix, (values, _) = _read_run(checkpoint_path, config, encoder_path,
                                  with_head=False)
  return _backbone(config, overrides, prefix, values)


def _source(values: Dict[str, Any]) -> weight_map.Source:
  return {name: (tuple(value.shape), lambda value=value: value)
          for name, value in values.items()}


def _backbone(config, overrides, prefix, values):
  """A `RealFormerBackbone` of `config` holding the encoder `values`."""
  backbone = backbone_lib.RealFormerBackbone(
      **{**keras3_configs.backbone_kwargs(config), **overrides})
  weight_map.copy_slots(
      _source(values), weight_map.backbone_slots(backbone),
      header=f"Checkpoint {prefix!r} does not fit the "
      "RealFormerBackbone built from its config:")
  return backbone


def load_masked_lm(checkpoint_path: str,
                   encoder_config_or_kwargs: Optional[
                       tf2_checkpoint.EncoderConfigLike] = None,
                   residual_attention: Optional[str] = None,
                   encoder_path: Optional[str] = None,
                   *,
                   preprocessor=None,
                   **overrides) -> masked_lm_lib.RealFormerMaskedLM:
  """A `RealFormerMaskedLM` with a run's encoder and pre-trained MLM head.

  The head's activation and epsilon are the run's: the logits are the
  tf_keras pre-trainer's (docs/keras3.md). Arguments as `load_run`'s (the
  head is looked for beside the encoder), plus the task's `preprocessor`.

  Raises:
    CheckpointMismatchError: The checkpoint has no MLM head, or a missing,
      unused or mis-shaped variable; nothing is assigned.
    ValueError: As `load_run`.
  """
  config = _run_config(checkpoint_path, encoder_config_or_kwargs,
                       residual_attention)
  activation = keras3_configs.run_mlm_activation(checkpoint_path, config)
  backbone_lib.get_activation(activation)  # Names one Keras 3 lacks.
  prefix, (values, head_values) = _read_run(checkpoint_path, config,
                                            encoder_path, with_head=True)
  backbone = _backbone(config, overrides, prefix, values)
  masked_lm = masked_lm_lib.RealFormerMaskedLM(
      backbone, preprocessor=preprocessor, head_activation=activation,
      head_layer_norm_epsilon=keras3_configs.MODEL_GARDEN_MLM_EPSILON)
  weight_map.copy_slots(
      _source(head_values),
      weight_map.masked_lm_head_slots(masked_lm.masked_lm_head),
      header=f"Checkpoint {prefix!r}'s masked LM head does not fit "
      "RealFormerMaskedLM's:")
  return masked_lm


def from_tf_keras_encoder(encoder: encoder_lib.RealFormerEncoder,
                          **overrides) -> backbone_lib.RealFormerBackbone:
  """A `RealFormerBackbone` of a built tf_keras encoder's config and weights."""
  c = encoder.get_config()
  activation = keras3_configs.keras3_activation(
      encoder._inner_activation)  # pylint: disable=protected-access
  config = tf2_checkpoint.realformer_config_from(dict(
      vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
      num_layers=c["num_layers"], num_attention_heads=c["num_attention_heads"],
      intermediate_size=c["inner_dim"], dropout_rate=c["output_dropout"],
      attention_dropout_rate=c["attention_dropout"],
      max_position_embeddings=c["max_sequence_length"],
      type_vocab_size=c["type_vocab_size"],
      embedding_size=c["embedding_width"],
      residual_attention=c["residual_attention"], norm_first=c["norm_first"],
      final_layer_norm=c["final_layer_norm"], norm_epsilon=c["norm_epsilon"],
      score_dtype=c["score_dtype"]))
  backbone = backbone_lib.RealFormerBackbone(
      **{**keras3_configs.backbone_kwargs(config), "activation": activation,
         **overrides})
  weight_map.copy_slots(
      weight_map.variable_source(tf_keras_encoder_slots(encoder)),
      weight_map.backbone_slots(backbone),
      header=f"tf_keras encoder {encoder.name!r} does not fit the "
      "RealFormerBackbone built from its config:")
  return backbone


def to_tf_keras_encoder(backbone: backbone_lib.RealFormerBackbone
                       ) -> encoder_lib.RealFormerEncoder:
  """A built tf_keras `RealFormerEncoder` with the backbone's weights."""
  encoder = encoders.build_realformer_encoder(
      keras3_configs.encoder_config(backbone))
  encoder(utils.dummy_inputs())
  weight_map.copy_slots(
      weight_map.variable_source(weight_map.backbone_slots(backbone)),
      tf_keras_encoder_slots(encoder),
      header=f"RealFormerBackbone {backbone.name!r} does not fit the tf_keras "
      "encoder built from its config:")
  return encoder


def save_run(backbone: backbone_lib.RealFormerBackbone, output_dir: str,
             overwrite: bool = False) -> str:
  """Writes the backbone as `convert` writes a converted checkpoint
  (`ckpt-1`, its state file, `encoder.yaml`), swapped in whole; an existing
  one is replaced only with `overwrite` and only if we wrote it. Returns the
  prefix."""
  output_dir = (output_dir or "").rstrip("/")
  if not output_dir:
    raise ValueError("output_dir is empty.")
  writes.recover(output_dir, utils.GFILE_OPS)
  # Never a train.py run: save_run(load_run(D), D) would drop its heads.
  converted_output.check_converted_output_dir(output_dir, overwrite)
  encoder = to_tf_keras_encoder(backbone)  # Checks before writing.
  config = encoders.encoder_config(
      **keras3_configs.encoder_config(backbone).as_dict())
  return converted_output.write(
      output_dir, converted_output.encoder_items(encoder),
      {run_directory.ENCODER_YAML: dict(encoder=config.as_dict())})
