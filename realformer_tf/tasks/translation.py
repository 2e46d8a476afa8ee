"""Translation with RealFormer: Model Garden's `TranslationTask`, RealFormer stacks.

Only `build_model` is replaced, putting `RealFormerSeq2SeqEncoder` and
`RealFormerDecoder` into Model Garden's `Seq2SeqTransformer`.
"""

import dataclasses

import tf_keras

from official.core import task_factory
from official.modeling.hyperparams import base_config
from official.nlp.tasks import translation
from realformer_tf.data import translation as translation_data
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import decoder as decoder_lib
from realformer_tf.networks import seq2seq as seq2seq_lib


@dataclasses.dataclass
class RealFormerSeq2SeqEncoderConfig(base_config.Config):
  """`RealFormerSeq2SeqEncoder` arguments (Post-LN, the paper's backbone)."""
  num_layers: int = 6
  num_attention_heads: int = 8
  intermediate_size: int = 2048
  activation: str = "relu"
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  norm_first: bool = False
  norm_epsilon: float = 1e-6
  residual_attention: str = "sum"

  def validate(self):
    super().validate()
    ra.validate_residual_attention(self.residual_attention)


@dataclasses.dataclass
class RealFormerDecoderConfig(RealFormerSeq2SeqEncoderConfig):
  """`RealFormerDecoder` arguments: one residual path per attention type."""
  self_residual: bool = True
  cross_residual: bool = True
  use_bias: bool = True
  intermediate_dropout: float = 0.0


@dataclasses.dataclass
class RealFormerTranslationModelConfig(translation.ModelConfig):
  encoder: RealFormerSeq2SeqEncoderConfig = dataclasses.field(
      default_factory=RealFormerSeq2SeqEncoderConfig)
  decoder: RealFormerDecoderConfig = dataclasses.field(
      default_factory=RealFormerDecoderConfig)


@dataclasses.dataclass
class RealFormerTranslationConfig(translation.TranslationConfig):
  model: RealFormerTranslationModelConfig = dataclasses.field(
      default_factory=RealFormerTranslationModelConfig)


@task_factory.register_task_cls(RealFormerTranslationConfig)
class RealFormerTranslationTask(translation.TranslationTask):
  """Model Garden's `TranslationTask` building the RealFormer seq2seq model.

  The SentencePiece model must have pad id 0 and eos id 1 (Model Garden's
  task would train on the wrong ids without a word).
  """

  def __init__(self, params, logging_dir=None, name=None):
    translation_data.check_sentencepiece_model(
        params.sentencepiece_model_path)
    super().__init__(params, logging_dir=logging_dir, name=name)

  @property
  def eos_id(self) -> int:
    return int(self._eos_id)

  def build_model(self) -> tf_keras.Model:
    """`Seq2SeqTransformer` with the RealFormer encoder and decoder stacks."""
    config = self.task_config.model
    return seq2seq_lib.build_seq2seq_transformer(
        vocab_size=int(self._vocab_size),
        embedding_width=config.embedding_width,
        encoder=seq2seq_lib.RealFormerSeq2SeqEncoder(
            **config.encoder.as_dict()),
        decoder=decoder_lib.RealFormerDecoder(**config.decoder.as_dict()),
        eos_id=int(self._eos_id), dropout_rate=config.dropout_rate,
        padded_decode=config.padded_decode,
        decode_max_length=config.decode_max_length,
        beam_size=config.beam_size, alpha=config.alpha)
