"""The pre-training experiments: `realformer/pretraining`, `.../quickstart`.

Each factory records its own name in `task.name`, so that
`run_directory.load_experiment_config` rebuilds a run's `params.yaml` through
it (plain YAML would lose the `any` encoder's builder).
"""

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.nlp.configs import bert
from official.nlp.data import pretrain_dataloader
from realformer_tf.configs import encoders
from realformer_tf.configs import recipe
from realformer_tf.tasks import masked_lm as rf_masked_lm

PRETRAINING = "realformer/pretraining"
QUICKSTART = "realformer/quickstart"

# train.py builds the quickstart corpus in this subfolder of model_dir, with
# this many differently masked copies.
QUICKSTART_DATA_SUBDIR = "data"
QUICKSTART_DUPE_FACTOR = 10
QUICKSTART_SEED = 0


def _pretraining_task(name: str, hidden_size: int, **encoder_kwargs
                      ) -> rf_masked_lm.RealFormerMaskedLMConfig:
  """MLM + NSP task whose NSP head's inner_dim equals the encoder width."""
  return rf_masked_lm.RealFormerMaskedLMConfig(
      name=name,
      model=bert.PretrainerConfig(
          encoder=encoders.encoder_config(hidden_size=hidden_size,
                                          **encoder_kwargs),
          cls_heads=[
              bert.ClsHeadConfig(inner_dim=hidden_size, num_classes=2,
                                 dropout_rate=0.1, name="next_sentence")
          ]),
      train_data=pretrain_dataloader.BertPretrainDataConfig(),
      validation_data=pretrain_dataloader.BertPretrainDataConfig(
          is_training=False))


@exp_factory.register_config_factory(PRETRAINING)
def realformer_pretraining() -> cfg.ExperimentConfig:
  """BERT pre-training (MLM + NSP) of a BERT-Base sized RealFormer."""
  return cfg.ExperimentConfig(
      task=_pretraining_task(PRETRAINING, hidden_size=768),
      trainer=cfg.TrainerConfig(
          train_steps=1000000,
          optimizer_config=recipe.paper_optimizer()),
      restrictions=list(recipe.DATA_RESTRICTIONS))


# The best held-out MLM accuracy at a fixed CPU budget (~1.4 passes over the
# records; dropout 0: the model underfits).
_QUICKSTART_STEPS = 2500


@exp_factory.register_config_factory(QUICKSTART)
def realformer_quickstart() -> cfg.ExperimentConfig:
  """A tiny RealFormer pre-trained (MLM + NSP) on a corpus built on the fly.

  The input paths are left empty: train.py builds the corpus in
  `model_dir/data` to this config's lengths, then fills in the paths,
  `task.vocab_file` and the real vocabulary size.
  """
  task = _pretraining_task(
      QUICKSTART, hidden_size=64, num_layers=2, num_attention_heads=2,
      intermediate_size=256, max_position_embeddings=64, dropout_rate=0.0,
      attention_dropout_rate=0.0,
      # The learned vocabulary's target size; the real one is the data's.
      vocab_size=1000)
  for data in (task.train_data, task.validation_data):
    data.seq_length, data.max_predictions_per_seq = 32, 5
    data.global_batch_size = 64
  # The eval split is small: keep its last partial batch.
  task.validation_data.drop_remainder = False
  # Seeded: the escape from the early MLM plateau depends on initialisation.
  task.train_data.seed = QUICKSTART_SEED
  return cfg.ExperimentConfig(
      task=task,
      runtime=cfg.RuntimeConfig(distribution_strategy="one_device"),
      trainer=cfg.TrainerConfig(
          train_steps=_QUICKSTART_STEPS,
          steps_per_loop=100,
          summary_interval=100,
          checkpoint_interval=500,
          max_to_keep=3,
          validation_interval=_QUICKSTART_STEPS // 2,
          validation_steps=-1,
          optimizer_config=recipe.paper_optimizer(
              learning_rate=4e-3, warmup_steps=100,
              decay_steps=_QUICKSTART_STEPS)),
      restrictions=list(recipe.DATA_RESTRICTIONS))
