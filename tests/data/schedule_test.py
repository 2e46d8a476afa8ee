"""The fine-tuning schedule's step arithmetic (realformer_tf.data.schedule)."""
import pytest

from realformer_tf.data import schedule


def test_steps_warmup_and_override():
  assert schedule.train_steps(3668, 2, 32) == 230  # 229.25 -> 230
  assert schedule.train_steps(100, 1) == 4  # The paper's batch of 32.
  assert schedule.train_steps(10, 0.5, 4) == 2  # 1.25 -> 2
  assert schedule.warmup_steps(230) == 23
  assert schedule.warmup_steps(9) == 0
  assert schedule.schedule_override(230) == {
      "train_steps": 230,
      "optimizer_config": {
          "learning_rate": {"polynomial": {"decay_steps": 230}},
          "warmup": {"polynomial": {"warmup_steps": 23}}}}


@pytest.mark.parametrize("args,message", [
    ((0, 3), "num_examples must be a positive int, got 0"),
    ((10, 3, 2.0), "batch_size must be a positive int, got 2.0"),
    ((10, -1), "epochs must be positive, got -1"),
])
def test_bad_arguments_are_named(args, message):
  with pytest.raises(ValueError, match=message):
    schedule.train_steps(*args)
