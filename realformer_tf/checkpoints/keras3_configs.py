"""Config translation between our tf_keras runs and the Keras 3 face.

A run's `RealFormerEncoderConfig` to and from `RealFormerBackbone` arguments,
and the run's choices the Keras 3 models need; `keras3_bridge` moves weights.
"""

import os
from typing import Any, Dict

import tensorflow as tf

from official.modeling import tf_utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.networks import encoder as encoder_lib

# Model Garden's "gelu" is the tanh form, Keras 3's "gelu_approximate".
TF_KERAS_GELU = "gelu"
# Model Garden's `layers.MaskedLM` LayerNorm epsilon (keras-hub's is 1e-5).
MODEL_GARDEN_MLM_EPSILON = 1e-12
# tf_keras encoder config field -> `RealFormerBackbone` argument of that value.
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
  """`RealFormerBackbone` arguments for a tf_keras encoder config (its one
  dropout is `dropout_rate`)."""
  if config.embedding_size not in (None, config.hidden_size):
    raise ValueError(
        f"encoder embedding_size={config.embedding_size} differs from "
        f"hidden_size={config.hidden_size} (a factorized embedding, as "
        "ALBERT); RealFormerBackbone, like keras-hub's BertBackbone, has no "
        "embedding projection.")
  activation = config.hidden_activation
  if activation == TF_KERAS_GELU:
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
    activation = TF_KERAS_GELU
  return encoders.RealFormerEncoderConfig(
      **{field: getattr(backbone, argument) for field, argument in _SAME_VALUE},
      hidden_activation=activation, attention_dropout_rate=backbone.dropout,
      final_layer_norm=backbone.use_final_layer_norm)


def run_encoder_config(checkpoint_path: str
                      ) -> encoders.RealFormerEncoderConfig:
  """The encoder config recorded beside a checkpoint (or in a directory)."""
  where, config = run_directory.encoder_config(checkpoint_path)
  try:
    return tf2_checkpoint.realformer_config_from(config)
  except (ValueError, TypeError) as e:
    raise ValueError(f"{where}: {e}") from None


def run_mlm_activation(checkpoint_path: str,
                       config: encoders.RealFormerEncoderConfig) -> str:
  """The Keras 3 name of a run's MLM head activation: `mlm_activation` of its
  `params.yaml` or `pretrainer.yaml`, else the encoder's."""
  run_dir = run_directory.directory_of(checkpoint_path)
  name = None
  if tf.io.gfile.exists(run_directory.params_path(run_dir)):
    model = run_directory.load_experiment_config(run_dir).task.model
    name = getattr(model, "mlm_activation", None)
  else:
    path = os.path.join(run_dir, run_directory.PRETRAINER_YAML)
    if tf.io.gfile.exists(path):
      values = run_directory.read_yaml(path)
      name = ((values or {}).get("task") or {}).get("model", {}).get(
          "mlm_activation")
  name = name or config.hidden_activation
  return backbone_lib.GELU_APPROXIMATE if name == TF_KERAS_GELU else name


def keras3_activation(activation) -> str:
  """The Keras 3 name of a tf_keras encoder's activation (name or function)."""
  if activation in (encoder_lib.approx_gelu,
                    tf_utils.get_activation(TF_KERAS_GELU)):
    return backbone_lib.GELU_APPROXIMATE
  name = (activation if isinstance(activation, str)
          else getattr(activation, "__name__", repr(activation)))
  backbone_lib.get_activation(name)  # Names one Keras 3 lacks.
  return name
