"""The paper's optimizer and fine-tuning schedule on experiment configs.

Fine-tuning runs ceil(epochs * num_examples / batch_size) steps and warms up
over int(10%) of them, as BERT's `run_classifier`: `apply_paper_schedule`.
"""

from official.core import config_definitions as cfg
from official.modeling import optimization
from official.nlp.configs import pretraining_experiments
from realformer_tf.data import schedule as steps_lib

PAPER_BATCH_SIZE = steps_lib.PAPER_BATCH_SIZE
train_steps = steps_lib.train_steps
warmup_steps = steps_lib.warmup_steps
schedule_override = steps_lib.schedule_override

# Every data config says whether it trains, as Model Garden's BERT
# experiments require (Model Garden's `pretraining_experiments`).
DATA_RESTRICTIONS = ("task.train_data.is_training != None",
                     "task.validation_data.is_training != None")


def paper_optimizer(learning_rate: float = 1e-4,
                    warmup_steps: int = 10000,
                    decay_steps: int = 1000000
                    ) -> optimization.OptimizationConfig:
  """The paper's (BERT's) optimizer, as Model Garden's `bert/pretraining`.

  AdamW with weight decay 0.01 (not on LayerNorm or biases), linear warm-up,
  linear decay to 0 (`pretraining_experiments.bert_pretraining`).

  Args:
    learning_rate: Peak learning rate (reached after the warm-up).
    warmup_steps: Linear warm-up steps.
    decay_steps: Steps over which the rate decays linearly to 0; set it to
      `trainer.train_steps` (Model Garden's polynomial schedule needs it).

  Returns:
    An `OptimizationConfig`.
  """
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
  """Sets steps, 10% warm-up, decay length and peak rate of one grid point.

  The batch size is `task.train_data.global_batch_size`. Model Garden's
  warm-up ramps to the decay line's value at its end, not the peak.

  Args:
    config: A config with the paper's optimizer, changed in place.
    num_train_examples: Train split size (`train_data_size` in the meta data).
    epochs: Passes over the train split.
    learning_rate: Peak learning rate.

  Returns:
    `config`.
  """
  if not learning_rate > 0:
    raise ValueError(f"learning_rate must be positive, got {learning_rate!r}.")
  steps = train_steps(num_train_examples, epochs,
                      config.task.train_data.global_batch_size)
  config.override({"trainer": schedule_override(steps)}, is_strict=True)
  schedule = config.trainer.optimizer_config.learning_rate.polynomial
  schedule.initial_learning_rate = learning_rate
  return config

