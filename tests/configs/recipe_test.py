"""Tests for realformer_tf/configs/recipe.py: the paper's optimizer and the
fine-tuning schedule arithmetic."""

import pytest

from official.modeling import optimization
from realformer_tf.configs import finetuning
from realformer_tf.configs import recipe


def test_paper_optimizer_is_berts():
  config = recipe.paper_optimizer(learning_rate=2e-4, warmup_steps=7,
                                  decay_steps=70)
  adamw = config.optimizer.get()
  assert config.optimizer.type == "adamw"
  assert adamw.weight_decay_rate == 0.01
  assert set(adamw.exclude_from_weight_decay) >= {"LayerNorm", "bias"}
  lr = optimization.OptimizerFactory(config).build_learning_rate()
  # Linear decay from 2e-4 to 0 over 70 steps, after a 7-step warm-up.
  assert float(lr(35)) == pytest.approx(2e-4 * (1 - 35 / 70), rel=1e-5)
  assert float(lr(70)) == 0.0
  assert config.warmup.polynomial.warmup_steps == 7


def test_learning_rate_curve():
  config = finetuning.load_glue_config("rte")
  recipe.apply_paper_schedule(config, num_train_examples=2490, epochs=4,
                                  learning_rate=5e-5)
  assert config.trainer.train_steps == 312  # ceil(4 * 2490 / 32)
  lr = optimization.OptimizerFactory(
      config.trainer.optimizer_config).build_learning_rate()
  # Linear decay from the peak at step 0 to 0 at step 312; over the first 31
  # steps (10%) Model Garden's warm-up ramps linearly up to the decayed value
  # at step 31 (BERT's TF1 optimizer ramps to the peak, then jumps down).
  at_31 = 5e-5 * (1 - 31 / 312)
  assert float(lr(0)) == pytest.approx(at_31 / 31, rel=1e-5)  # step 0 as 1
  assert float(lr(15)) == pytest.approx(at_31 * 15 / 31, rel=1e-5)
  assert float(lr(31)) == pytest.approx(at_31, rel=1e-5)
  assert float(lr(200)) == pytest.approx(5e-5 * (1 - 200 / 312), rel=1e-5)
  assert float(lr(312)) == 0.0
