"""The learning-rate schedule follows an explicitly set trainer.train_steps."""

from absl.testing import parameterized
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.configs import squad
from realformer_tf.training import lr_schedule
from realformer_tf.training import train_lib

_DECAY = "trainer.optimizer_config.learning_rate.polynomial.decay_steps"
_WARMUP = "trainer.optimizer_config.warmup.polynomial.warmup_steps"


def _flags(experiment, params_override="", config_file=None):
  return train_utils.ParseConfigOptions(
      experiment=experiment, config_file=config_file or [],
      params_override=params_override, tpu=None)


class ScheduleTest(tf.test.TestCase, parameterized.TestCase):

  def test_dotted_keys_and_last_source_wins(self):
    explicit = lr_schedule.explicit_keys([
        ("a.yaml", {"trainer": {"train_steps": 5, "optimizer_config": {
            "learning_rate": {"polynomial": {"decay_steps": 5}}}}}),
        ("--params_override", {"trainer": {"train_steps": 7}})])
    self.assertEqual(explicit["trainer.train_steps"], (1, "--params_override"))
    self.assertEqual(explicit[_DECAY], (0, "a.yaml"))

  @parameterized.named_parameters(
      # Quickstart: 2500 steps, warm-up 100; train_steps=300 alone.
      ("only_train_steps", {"trainer.train_steps": (0, "o")}, 300, 12),
      ("decay_set_too", {"trainer.train_steps": (0, "o"), _DECAY: (0, "o")},
       2500, 100),
      ("warmup_set_too", {"trainer.train_steps": (0, "o"), _WARMUP: (0, "o")},
       300, 100),
      ("decay_set_later", {"trainer.train_steps": (0, "a"), _DECAY: (1, "b")},
       2500, 100),
      ("nothing_set", {}, 2500, 100),
  )
  def test_follow_train_steps(self, explicit, decay, warmup):
    params = exp_factory.get_exp_config(experiments.QUICKSTART)
    if explicit:
      params.trainer.train_steps = 300
    lr_schedule.follow_train_steps(params, explicit)
    optimizer = params.trainer.optimizer_config
    self.assertEqual(optimizer.learning_rate.polynomial.decay_steps, decay)
    self.assertEqual(optimizer.warmup.polynomial.warmup_steps, warmup)

  def test_squad_train_steps_override_alone_parses(self):
    # Before: Model Garden's restriction decay_steps == train_steps failed.
    params = train_lib.parse_configuration(
        _flags(squad.SQUAD, "trainer.train_steps=20"))
    optimizer = params.trainer.optimizer_config
    self.assertEqual(params.trainer.train_steps, 20)
    self.assertEqual(optimizer.learning_rate.polynomial.decay_steps, 20)
    # 10% warm-up kept: 821 of 8213 -> 2 of 20.
    self.assertEqual(optimizer.warmup.polynomial.warmup_steps, 2)

  def test_explicit_decay_is_kept_and_checked(self):
    with self.assertRaisesRegex(ValueError, "decay_steps"):
      train_lib.parse_configuration(_flags(
          squad.SQUAD, f"trainer.train_steps=20,{_DECAY}=30"))


if __name__ == "__main__":
  tf.test.main()
