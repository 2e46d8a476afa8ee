"""Step arithmetic of the paper's fine-tuning schedule (as BERT's
`run_classifier`), below `configs/`: SQuAD's converter writes it too
(`train_schedule.yaml`); `configs.recipe` applies it to experiment configs.
"""

import math

from realformer_tf.core import options

PAPER_BATCH_SIZE = 32


def train_steps(num_examples: int, epochs: float,
                batch_size: int = PAPER_BATCH_SIZE) -> int:
  """ceil(epochs * num_examples / batch_size)."""
  options.check_positive_int("num_examples", num_examples)
  options.check_positive_int("batch_size", batch_size)
  if not epochs > 0:
    raise ValueError(f"epochs must be positive, got {epochs!r}.")
  return math.ceil(epochs * num_examples / batch_size)


def warmup_steps(total_steps: int) -> int:
  """int(10% of total_steps), as BERT's `run_classifier`."""
  return int(0.1 * total_steps)


def schedule_override(steps: int) -> dict:
  """`trainer` override: `steps` train steps, decay over them, 10% warm-up."""
  return {"train_steps": steps,
          "optimizer_config": {
              "learning_rate": {"polynomial": {"decay_steps": steps}},
              "warmup": {"polynomial": {"warmup_steps": warmup_steps(steps)}}}}
