"""The paper's optimizer and fine-tuning schedule on experiment configs.

Fine-tuning runs ceil(epochs * num_examples / batch_size) steps and warms up
over int(10%) of them, as BERT's `run_classifier`: `apply_paper_schedule`.
"""

from official.core import config_definitions as cfg
from official.modeling import optimization
from official.nlp.configs import pretraining_experiments
from realformer_tf.data import schedule

# Every data config says whether it trains, as Model Garden's BERT
# experiments require.
DATA_RESTRICTIONS = ("task.train_data.is_training != None",
                     "task.validation_data.is_training != None")


def paper_optimizer(learning_rate: float = 1e-4,
                    warmup_steps: int = 10000,
                    decay_steps: int = 1000000
                    ) -> optimization.OptimizationConfig:
  """The paper's (BERT's) optimizer, as Model Garden's `bert/pretraining`:
  AdamW (weight decay 0.01, not on LayerNorm or biases), linear warm-up to
  `learning_rate`, linear decay to 0 at `decay_steps` (`train_steps`)."""
  trainer = pretraining_experiments.bert_pretraining().trainer
  trainer.optimizer_config.override({
      "learning_rate": {"polynomial": {"initial_learning_rate": learning_rate,
                                       "decay_steps": decay_steps}},
      "warmup": {"polynomial": {"warmup_steps": warmup_steps}},
  })
  return trainer.optimizer_config


def apply_paper_schedule(config: cfg.ExperimentConfig, num_train_examples: int,
                         epochs: float, learning_rate: float
                         ) -> cfg.ExperimentConfig:
  """Sets steps, 10% warm-up, decay length and peak rate of one grid point
  on `config` (the paper's optimizer, changed in place and returned), at
  `task.train_data.global_batch_size`."""
  if not learning_rate > 0:
    raise ValueError(f"learning_rate must be positive, got {learning_rate!r}.")
  steps = schedule.train_steps(num_train_examples, epochs,
                               config.task.train_data.global_batch_size)
  config.override({"trainer": schedule.schedule_override(steps)},
                  is_strict=True)
  lr = config.trainer.optimizer_config.learning_rate.polynomial
  lr.initial_learning_rate = learning_rate
  return config
