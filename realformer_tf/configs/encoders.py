"""RealFormer encoder config, bound to Model Garden's `type: any` encoder slot.

`encoders.build_encoder(cfg)` calls `cfg.any.BUILDER(cfg.any)`, so every
Model Garden task builds `RealFormerEncoder` without a copy. In YAML:
`task.model.encoder.any.residual_attention=none`.
"""

import dataclasses
from typing import Optional

import tf_keras

from official.modeling import tf_utils
from official.modeling.hyperparams import base_config
from official.nlp.configs import encoders
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import encoder as encoder_lib


@dataclasses.dataclass
class RealFormerEncoderConfig(encoders.BertEncoderConfig):
  """Model Garden's `BertEncoderConfig` plus RealFormer's fields (as
  `BertEncoderV2`, `encoder_outputs` always holds every layer's output)."""
  # "sum" (RealFormer), "mean" (running mean, > 24 layers), "none" (BERT).
  residual_attention: str = "sum"
  # None: a final LayerNorm iff norm_first (False: Post-LN, True: Pre-LN).
  final_layer_norm: Optional[bool] = None
  norm_epsilon: float = 1e-12
  # Running score sum under mixed precision: "auto" (bfloat16 under
  # mixed_bfloat16, else float32), "float32" or "compute".
  score_dtype: str = "auto"
  # Recompute each block's forward in backprop (long sequences).
  recompute: bool = False

  def validate(self):
    ra.validate_residual_attention(self.residual_attention)
    ra.validate_score_dtype(self.score_dtype)
    if self.num_attention_heads and self.hidden_size % self.num_attention_heads:
      raise ValueError(
          f"encoder.hidden_size={self.hidden_size} is not divisible by "
          f"encoder.num_attention_heads={self.num_attention_heads}.")


@base_config.bind(RealFormerEncoderConfig)
def build_realformer_encoder(
    config: RealFormerEncoderConfig,
    embedding_layer: Optional[tf_keras.layers.Layer] = None
) -> encoder_lib.RealFormerEncoder:
  """Builds a `RealFormerEncoder` from its config."""
  config.validate()
  same_names = ("vocab_size", "hidden_size", "num_layers",
                "num_attention_heads", "type_vocab_size", "output_range",
                "norm_first", "return_attention_scores",
                "return_word_embeddings", "residual_attention",
                "final_layer_norm", "norm_epsilon", "score_dtype", "recompute")
  return encoder_lib.RealFormerEncoder(
      max_sequence_length=config.max_position_embeddings,
      inner_dim=config.intermediate_size,
      # "gelu" is the tanh approximation, as BERT's TF1 code.
      inner_activation=tf_utils.get_activation(config.hidden_activation),
      output_dropout=config.dropout_rate,
      attention_dropout=config.attention_dropout_rate,
      initializer=tf_keras.initializers.TruncatedNormal(
          stddev=config.initializer_range),
      embedding_width=config.embedding_size,
      embedding_layer=embedding_layer,
      **{name: getattr(config, name) for name in same_names})


def encoder_config(**kwargs) -> encoders.EncoderConfig:
  """A Model Garden `EncoderConfig` holding a RealFormer encoder."""
  return encoders.EncoderConfig(
      type="any", any=RealFormerEncoderConfig(**kwargs))
