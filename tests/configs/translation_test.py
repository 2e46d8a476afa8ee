"""Tests for the realformer/translation experiment and its YAMLs."""

import os

from absl.testing import parameterized
import tensorflow as tf

from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import translation
from realformer_tf.tasks import translation as rf_translation
from realformer_tf.training import train_lib
from tests import train_test_utils as utils

YAML_DIR = os.path.join(utils.REPO_ROOT, "official_configs", "experiments",
                        "translation")
# Transformer-Base / Big (Vaswani et al., 2017, Table 3): width, heads, ffn.
SIZES = {"wmt14_en_de_base.yaml": (512, 8, 2048, 0.1),
         "wmt14_en_de_big.yaml": (1024, 16, 4096, 0.3)}


def _parse(*config_files, params_override=""):
  return train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=translation.TRANSLATION, config_file=list(config_files),
      params_override=params_override))


class TranslationConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_every_yaml_is_covered(self):
    self.assertCountEqual(SIZES, os.listdir(YAML_DIR))

  @parameterized.parameters(*sorted(SIZES))
  def test_paper_sizes(self, name):
    params = _parse(os.path.join(YAML_DIR, name))
    width, heads, ffn, dropout = SIZES[name]
    model = params.task.model
    self.assertEqual(width, model.embedding_width)
    for stack in (model.encoder, model.decoder):
      self.assertEqual((6, heads, ffn, dropout, "sum", False),
                       (stack.num_layers, stack.num_attention_heads,
                        stack.intermediate_size, stack.dropout_rate,
                        stack.residual_attention, stack.norm_first))
    self.assertTrue(model.decoder.self_residual and
                    model.decoder.cross_residual)
    self.assertEqual("wmt14_translate/de-en", params.task.train_data.tfds_name)
    self.assertIsInstance(params.task,
                          rf_translation.RealFormerTranslationConfig)
    self.assertIs(rf_translation.RealFormerTranslationTask,
                  task_factory._REGISTERED_TASK_CLS[type(params.task)])  # pylint: disable=protected-access

  def test_bad_residual_attention_names_the_key(self):
    with self.assertRaisesRegex(ValueError,
                                "task.model.encoder.*residual_attention"):
      _parse(params_override="task.model.encoder.residual_attention=avg")


if __name__ == "__main__":
  tf.test.main()
