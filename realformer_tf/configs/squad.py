"""`realformer/squad`: SQuAD v1.1 / v2.0 fine-tuning with the paper's recipe.

`RealFormerQATask`: a `BertSpanLabeler` over the RealFormer encoder. The
defaults (batch 32, 3 epochs, 5e-5, seq 384, stride 128) are BERT's v1.1
grid point; `official_configs/experiments/squad/v2.0.yaml` its v2.0 point.
"""

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.nlp.data import question_answering_dataloader as qa_dataloader
from official.nlp.tasks import question_answering
from realformer_tf.configs import encoders
from realformer_tf.configs import recipe
from realformer_tf.data import schedule
from realformer_tf.tasks import question_answering as rf_question_answering

SQUAD = "realformer/squad"

# Questions in the official training files (the defaults' one feature per
# question); `python -m realformer_tf.data.squad` writes the exact schedule.
SQUAD_V1_TRAIN_QUESTIONS = 87599
SQUAD_V2_TRAIN_QUESTIONS = 130319


@exp_factory.register_config_factory(SQUAD)
def realformer_squad() -> cfg.ExperimentConfig:
  """SQuAD fine-tuning of a pre-trained RealFormer (v1.1 defaults)."""
  batch_size, epochs, learning_rate = 32, 3, 5e-5
  train_steps = schedule.train_steps(SQUAD_V1_TRAIN_QUESTIONS, epochs,
                                   batch_size)
  return cfg.ExperimentConfig(
      task=rf_question_answering.RealFormerQAConfig(
          name=SQUAD,
          model=question_answering.ModelConfig(
              encoder=encoders.encoder_config()),
          train_data=qa_dataloader.QADataConfig(
              is_training=True, global_batch_size=batch_size, seq_length=384),
          validation_data=qa_dataloader.QADataConfig(
              is_training=False, global_batch_size=48, seq_length=384,
              doc_stride=128, query_length=64, do_lower_case=True)),
      trainer=cfg.TrainerConfig(
          train_steps=train_steps,
          validation_steps=-1,
          validation_interval=train_steps,
          steps_per_loop=100,
          summary_interval=100,
          checkpoint_interval=1000,
          optimizer_config=recipe.paper_optimizer(
              learning_rate, schedule.warmup_steps(train_steps), train_steps)),
      restrictions=[
          *recipe.DATA_RESTRICTIONS,
          "task.train_data.version_2_with_negative == "
          "task.validation_data.version_2_with_negative",
          "trainer.optimizer_config.learning_rate.polynomial.decay_steps == "
          "trainer.train_steps",
      ])
