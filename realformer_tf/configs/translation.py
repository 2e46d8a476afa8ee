"""`realformer/translation`: WMT'14 translation with RealFormer (paper Section 3).

Model Garden's `TranslationTask` with the RealFormer encoder-decoder (three
residual attention paths); defaults are Transformer-Base on TFDS
`wmt14_translate/de-en` with Model Garden's WMT recipe, and the YAMLs in
`official_configs/experiments/translation/` set the paper's sizes.
"""

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.nlp.configs import wmt_transformer_experiments
from realformer_tf.configs import recipe
from realformer_tf.tasks import translation as rf_translation

TRANSLATION = "realformer/translation"


@exp_factory.register_config_factory(TRANSLATION)
def realformer_translation() -> cfg.ExperimentConfig:
  """RealFormer Transformer-Base, WMT'14 en->de: Model Garden's
  `wmt_transformer/large` data, trainer and schedule (2.0 * hidden^-0.5 *
  step^-0.5 after a linear warm-up) at Base size."""
  hidden_size = 512
  layers = dict(num_layers=6, num_attention_heads=8,
                intermediate_size=hidden_size * 4)
  wmt = wmt_transformer_experiments.wmt_transformer_large()
  wmt.task.train_data.global_batch_size = 4096
  wmt.trainer.optimizer_config.learning_rate.power.initial_learning_rate = (
      2.0 * hidden_size ** -0.5)
  return cfg.ExperimentConfig(
      task=rf_translation.RealFormerTranslationConfig(
          name=TRANSLATION,
          model=rf_translation.RealFormerTranslationModelConfig(
              encoder=rf_translation.RealFormerSeq2SeqEncoderConfig(**layers),
              decoder=rf_translation.RealFormerDecoderConfig(**layers),
              embedding_width=hidden_size, decode_max_length=100),
          train_data=wmt.task.train_data,
          validation_data=wmt.task.validation_data),
      trainer=wmt.trainer,
      restrictions=list(recipe.DATA_RESTRICTIONS))
