"""`realformer/translation`: WMT'14 translation with RealFormer (paper Section 3).

Model Garden's `TranslationTask` with the RealFormer encoder-decoder (three
residual attention paths); defaults are Transformer-Base on TFDS
`wmt14_translate/de-en` with Model Garden's WMT recipe, and the YAMLs in
`official_configs/experiments/translation/` set the paper's sizes.
"""

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import optimization
from official.nlp.data import wmt_dataloader
from realformer_tf.configs import recipe
from realformer_tf.tasks import translation as rf_translation

TRANSLATION = "realformer/translation"


def transformer_optimizer(hidden_size: int, warmup_steps: int = 16000
                          ) -> optimization.OptimizationConfig:
  """Model Garden's WMT schedule: Adam, linear warm-up, then 2.0 *
  hidden^-0.5 * step^-0.5."""
  return optimization.OptimizationConfig({
      "optimizer": {"type": "adam",
                    "adam": {"beta_2": 0.997, "epsilon": 1e-9}},
      "learning_rate": {"type": "power",
                        "power": {"initial_learning_rate":
                                  2.0 * hidden_size ** -0.5,
                                  "power": -0.5}},
      "warmup": {"type": "linear",
                 "linear": {"warmup_steps": warmup_steps,
                            "warmup_learning_rate": 0.0}},
  })


@exp_factory.register_config_factory(TRANSLATION)
def realformer_translation() -> cfg.ExperimentConfig:
  """RealFormer Transformer-Base, WMT'14 en->de."""
  hidden_size = 512
  layers = dict(num_layers=6, num_attention_heads=8,
                intermediate_size=hidden_size * 4)
  return cfg.ExperimentConfig(
      task=rf_translation.RealFormerTranslationConfig(
          name=TRANSLATION,
          model=rf_translation.RealFormerTranslationModelConfig(
              encoder=rf_translation.RealFormerSeq2SeqEncoderConfig(**layers),
              decoder=rf_translation.RealFormerDecoderConfig(**layers),
              embedding_width=hidden_size, decode_max_length=100),
          train_data=wmt_dataloader.WMTDataConfig(
              tfds_name="wmt14_translate/de-en", tfds_split="train",
              src_lang="en", tgt_lang="de", is_training=True,
              global_batch_size=4096, max_seq_length=64, static_batch=True),
          validation_data=wmt_dataloader.WMTDataConfig(
              tfds_name="wmt14_translate/de-en", tfds_split="test",
              src_lang="en", tgt_lang="de", is_training=False,
              global_batch_size=32, max_seq_length=100, static_batch=True)),
      trainer=cfg.TrainerConfig(
          train_steps=300000, validation_steps=-1, steps_per_loop=1000,
          summary_interval=1000, checkpoint_interval=5000,
          validation_interval=5000, max_to_keep=1,
          optimizer_config=transformer_optimizer(hidden_size)),
      restrictions=list(recipe.DATA_RESTRICTIONS))
