"""Weights both ways between our tf_keras runs and `RealFormerBackbone`.

The Keras 3 face's bridge to TensorFlow checkpoints (it was
`realformer_tf.keras3.weights`): it reads and writes TF checkpoints and
builds the tf_keras `RealFormerEncoder`, so it lives here, above the Keras 3
face, which imports no TensorFlow. TensorFlow is used beside Keras 3, not as
its backend, so it works under any `KERAS_BACKEND` as long as TensorFlow is
installed.

In:  `load_run(model_dir or ckpt-N)`: a run of train.py (its `params.yaml`),
     or a directory of `realformer_tf.checkpoints.convert` / `save_run` (its
     `encoder.yaml`), hence also converted TF1 RealFormer/BERT checkpoints;
     `from_tf_keras_encoder(encoder)` for a model in memory.
Out: `to_tf_keras_encoder(backbone)` (a tf_keras `RealFormerEncoder` with the
     weights) and `save_run(backbone, output_dir)`, which writes what
     `convert` writes, so Model Garden fine-tuning continues from it:
     `--config_file=output_dir/encoder.yaml
      --params_override=task.init_checkpoint=output_dir`.

The run directory (config, newest readable checkpoint, a killed swap's
backup) is `run_directory`'s; the checkpoint side is
`tf2_checkpoint.check_encoder_checkpoint` (it finds the encoder in the
checkpoint and names every missing, unused or mis-shaped variable); the
weights are then matched by name (`keras3_weight_map`), again checked all at
once before any is assigned.
"""

import os
from typing import Any, Dict, Optional

import tensorflow as tf
import yaml

from official.modeling import tf_utils
# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.autograph.core import ag_ctx
# pylint: enable=g-direct-tensorflow-import

from realformer_tf import utils
from realformer_tf.checkpoints import converted_output
from realformer_tf.checkpoints import keras3_weight_map as weight_map
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import saving
from realformer_tf.networks import encoder as encoder_lib

# tf_keras `hidden_activation` "gelu" is Model Garden's tanh form
# (official/modeling/tf_utils.py `get_activation`), Keras 3's
# "gelu_approximate" here; Keras 3's "gelu" (exact) has no tf_keras name.
_TF_KERAS_GELU = "gelu"
# tf_keras encoder config field -> `RealFormerBackbone` argument (and
# attribute) of the same value; the others are mapped by hand below.
_SAME_VALUE = (
    ("vocab_size", "vocabulary_size"), ("num_layers", "num_layers"),
    ("num_attention_heads", "num_heads"), ("hidden_size", "hidden_dim"),
    ("intermediate_size", "intermediate_dim"), ("dropout_rate", "dropout"),
    ("max_position_embeddings", "max_sequence_length"),
    ("type_vocab_size", "num_segments"),
    ("residual_attention", "residual_attention"),
    ("norm_first", "normalize_first"), ("norm_epsilon", "layer_norm_epsilon"),
    ("score_dtype", "score_dtype"))


def backbone_kwargs(config: encoders.RealFormerEncoderConfig
                   ) -> Dict[str, Any]:
  """`RealFormerBackbone` arguments for a tf_keras encoder config.

  Dropout is `dropout_rate` (the backbone has one rate, as `BertBackbone`);
  `output_range`, `return_attention_scores` and `recompute` do not change
  the weights or the full outputs and have no backbone counterpart.
  """
  if config.embedding_size not in (None, config.hidden_size):
    raise ValueError(
        f"encoder embedding_size={config.embedding_size} differs from "
        f"hidden_size={config.hidden_size} (a factorized embedding, as "
        "ALBERT); RealFormerBackbone, like keras-hub's BertBackbone, has no "
        "embedding projection.")
  activation = config.hidden_activation
  if activation == _TF_KERAS_GELU:
    activation = backbone_lib.GELU_APPROXIMATE
  backbone_lib.get_activation(activation)  # Names an unknown one.
  return dict(
      {argument: getattr(config, field) for field, argument in _SAME_VALUE},
      final_layer_norm=(config.norm_first if config.final_layer_norm is None
                        else config.final_layer_norm),
      activation=activation)


def encoder_config(backbone: backbone_lib.RealFormerBackbone
                  ) -> encoders.RealFormerEncoderConfig:
  """The tf_keras encoder config of a `RealFormerBackbone`."""
  activation = backbone.activation
  if activation == "gelu":
    raise ValueError(
        "activation='gelu' is Keras 3's exact GELU; the tf_keras "
        "encoder's 'gelu' is the tanh form (Keras 3's 'gelu_approximate') and "
        "it has no name for the exact one, so this backbone has no tf_keras "
        "encoder config.")
  if activation == backbone_lib.GELU_APPROXIMATE:
    activation = _TF_KERAS_GELU
  return encoders.RealFormerEncoderConfig(
      **{field: getattr(backbone, argument) for field, argument in _SAME_VALUE},
      hidden_activation=activation, attention_dropout_rate=backbone.dropout,
      final_layer_norm=backbone.use_final_layer_norm)


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


def run_encoder_config(checkpoint_path: str
                      ) -> encoders.RealFormerEncoderConfig:
  """The encoder config recorded beside a checkpoint (or in a directory):
  train.py's `params.yaml`, else `convert`'s / `save_run`'s `encoder.yaml`
  (`run_directory.encoder_config`)."""
  where, config = run_directory.encoder_config(checkpoint_path)
  try:
    return tf2_checkpoint.realformer_config_from(config)
  except (ValueError, TypeError) as e:
    raise ValueError(f"{where}: {e}") from None


def load_run(checkpoint_path: str,
             encoder_config_or_kwargs: Optional[
                 tf2_checkpoint.EncoderConfigLike] = None,
             residual_attention: Optional[str] = None,
             encoder_path: Optional[str] = None,
             **overrides) -> backbone_lib.RealFormerBackbone:
  """A `RealFormerBackbone` holding a run's (or converted) encoder weights.

  Args:
    checkpoint_path: A model dir (its newest checkpoint whose encoder
      reads: a damaged newer one is skipped with a warning naming it) or a
      `ckpt-N` prefix.
    encoder_config_or_kwargs: The encoder's config (see
      `tf2_checkpoint.realformer_config_from`); None reads it from the
      `params.yaml` or `encoder.yaml` beside the checkpoint.
    residual_attention: Overrides the config's (e.g. "none" on a BERT
      checkpoint gives BERT exactly).
    encoder_path: Where the encoder is in the checkpoint; None tries
      `tf2_checkpoint.ENCODER_PATHS` ("encoder", "model/encoder_network", ...).
    **overrides: Other `RealFormerBackbone` arguments (`dropout`, `dtype`).

  Raises:
    CheckpointMismatchError: Naming every missing, unused or mis-shaped
      variable, with both shapes; nothing is assigned.
    ValueError: For a `.keras` file (what it is), a directory a killed
      `save_run` set aside (naming the backup), or no readable checkpoint.
  """
  if str(checkpoint_path).endswith(saving.KERAS_SUFFIX):
    saving.check_keras_file(checkpoint_path)  # Says what it is, else:
    raise ValueError(
        f"checkpoint_path={checkpoint_path!r} is a Keras 3 model file, not a "
        "TF checkpoint: load it with realformer_tf.keras3.load_model.")
  if encoder_config_or_kwargs is None:
    config = run_encoder_config(checkpoint_path)
  else:
    config = tf2_checkpoint.realformer_config_from(encoder_config_or_kwargs)
  if residual_attention is not None:
    config = tf2_checkpoint.realformer_config_from(config, residual_attention)
  config.validate()
  kwargs = {**backbone_kwargs(config), **overrides}
  with tf.Graph().as_default():  # Shapes only; nothing is assigned here.
    shadow = encoders.build_realformer_encoder(config)
    # tf_keras converts each subclassed layer's `call` with AutoGraph in a
    # graph (base_layer_v1.py `__call__`, unless the status is DISABLED):
    # ~20 s of transpiling on first use, for Python-only control flow.
    with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.DISABLED):
      shadow(utils.dummy_inputs())
    slots = tf_keras_encoder_slots(shadow)

    def read(prefix):
      """Every encoder weight of `prefix`, read now: a damaged file fails
      here, and `read_latest` falls back to the previous checkpoint."""
      reader, pairs, _ = tf2_checkpoint.check_encoder_checkpoint(
          prefix, shadow, encoder_path)
      key_of = {id(variable): key for variable, key in pairs}
      try:
        return {name: reader.get_tensor(key_of[id(v)])
                for name, v in slots.items()}
      except (tf.errors.OpError, IndexError, RuntimeError) as e:
        raise ValueError(f"Checkpoint {prefix!r} is not readable "
                         f"({type(e).__name__}: {e})") from None

    prefix, values = run_directory.read_latest(
        checkpoint_path, "checkpoint_path", read)
  source = {name: (tuple(value.shape), lambda value=value: value)
            for name, value in values.items()}
  backbone = backbone_lib.RealFormerBackbone(**kwargs)
  weight_map.copy_slots(
      source, weight_map.backbone_slots(backbone),
      header=f"Checkpoint {prefix!r} does not fit the "
      "RealFormerBackbone built from its config:")
  return backbone


def from_tf_keras_encoder(encoder: encoder_lib.RealFormerEncoder,
                          **overrides) -> backbone_lib.RealFormerBackbone:
  """A `RealFormerBackbone` with a built tf_keras `RealFormerEncoder`'s
  architecture and weights; `overrides`: other backbone arguments."""
  c = encoder.get_config()
  activation = _keras3_activation(
      encoder._config["inner_activation"])  # pylint: disable=protected-access
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
      **{**backbone_kwargs(config), "activation": activation,
         **overrides})
  weight_map.copy_slots(
      weight_map.variable_source(tf_keras_encoder_slots(encoder)),
      weight_map.backbone_slots(backbone),
      header=f"tf_keras encoder {encoder.name!r} does not fit the "
      "RealFormerBackbone built from its config:")
  return backbone


def _keras3_activation(activation) -> str:
  """The Keras 3 name of a tf_keras encoder's activation (a name or function):
  Model Garden's "gelu" and `approx_gelu` are the tanh form, tf_keras' own
  "gelu" the exact one (as Keras 3's)."""
  if activation in (encoder_lib.approx_gelu,
                    tf_utils.get_activation(_TF_KERAS_GELU)):
    return backbone_lib.GELU_APPROXIMATE
  name = (activation if isinstance(activation, str)
          else getattr(activation, "__name__", repr(activation)))
  backbone_lib.get_activation(name)  # Names one Keras 3 lacks.
  return name


def to_tf_keras_encoder(backbone: backbone_lib.RealFormerBackbone
                       ) -> encoder_lib.RealFormerEncoder:
  """A built tf_keras `RealFormerEncoder` with the backbone's weights (for
  Model Garden's trainer, tasks and export)."""
  encoder = encoders.build_realformer_encoder(encoder_config(backbone))
  encoder(utils.dummy_inputs())
  weight_map.copy_slots(
      weight_map.variable_source(weight_map.backbone_slots(backbone)),
      tf_keras_encoder_slots(encoder),
      header=f"RealFormerBackbone {backbone.name!r} does not fit the tf_keras "
      "encoder built from its config:")
  return encoder


def save_run(backbone: backbone_lib.RealFormerBackbone, output_dir: str,
             overwrite: bool = False) -> str:
  """Writes the backbone as `convert` writes a converted checkpoint.

  `output_dir` gets `ckpt-1` (`encoder` and the pooler at
  `next_sentence.pooler_dense`, where GLUE's `init_cls_pooler` finds it),
  its `checkpoint` state file and `encoder.yaml`. The directory is written
  under a temporary name and renamed when complete; an existing one is
  refused unless `overwrite` (then replaced whole), and with it too unless
  it is one `save_run` or convert wrote (a train.py run is refused:
  `converted_output.check_converted_output_dir`). What a killed earlier
  `save_run` left is undone first, as `convert` and export do: a previous
  directory set aside mid-swap is restored, dead temporaries removed.
  Returns the prefix.
  """
  output_dir = (output_dir or "").rstrip("/")
  if not output_dir:
    raise ValueError("output_dir is empty.")
  run_directory.recover_interrupted_swap(output_dir)
  # Only a directory save_run / convert wrote is replaced: never a train.py
  # run (`save_run(load_run(D), D, overwrite=True)` would drop its heads,
  # optimizer and vocabulary) or anything else.
  converted_output.check_converted_output_dir(output_dir, overwrite)
  encoder = to_tf_keras_encoder(backbone)  # Checks before writing.
  config = encoders.encoder_config(**encoder_config(backbone).as_dict())
  pooler = encoder.pooler_layer
  items = {"encoder": encoder,
           f"{tf1_checkpoint.NSP_HEAD_NAME}.pooler_dense": tf.train.Checkpoint(
               kernel=tf.Variable(pooler.kernel),
               bias=tf.Variable(pooler.bias))}
  with utils.atomic_path(output_dir) as tmp:
    tf.io.gfile.makedirs(tmp)
    # Checkpoint.save records the prefix relative to its directory, so the
    # state file stays right after the rename.
    prefix = tf.train.Checkpoint(**items).save(
        os.path.join(tmp, run_directory.CHECKPOINT_PREFIX))
    with tf.io.gfile.GFile(
        os.path.join(tmp, run_directory.ENCODER_YAML), "w") as f:
      f.write(yaml.safe_dump(
          dict(task=dict(model=dict(encoder=config.as_dict()))),
          sort_keys=False))
  return os.path.join(output_dir, os.path.basename(prefix))
