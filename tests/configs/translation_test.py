"""Tests for the realformer/translation experiment and its YAMLs."""

import os
import tempfile

from absl.testing import parameterized
import sentencepiece as spm
import tensorflow as tf

from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import translation
from realformer_tf.data import translation as translation_data
from realformer_tf.tasks import translation as rf_translation
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from realformer_tf.training import train_lib
from tests.helpers import train_runs as utils
from tests.helpers import translation as ttu

YAML_DIR = os.path.join(utils.REPO_ROOT, "official_configs", "experiments",
                        "translation")
# Transformer-Base / Big (Vaswani et al., 2017, Table 3): width, heads, ffn.
SIZES = {"wmt14_en_de_base.yaml": (512, 8, 2048, 0.1),
         "wmt14_en_de_big.yaml": (1024, 16, 4096, 0.3)}
OWN_DATA_YAML = os.path.join(YAML_DIR, "small_own_data.yaml")


def _checked(params, mode, model_dir):
  """The checked run's locked config (every rule, the data built)."""
  with train_lib.checked_run(params, mode, model_dir) as run:
    return run.plan.params


def _parse(*config_files, params_override=""):
  return train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment=translation.TRANSLATION, config_file=list(config_files),
      params_override=params_override))


class TranslationConfigTest(tf.test.TestCase, parameterized.TestCase):

  def test_every_yaml_is_covered(self):
    self.assertCountEqual(list(SIZES) + [os.path.basename(OWN_DATA_YAML)],
                          os.listdir(YAML_DIR))

  def _own_data(self, **convert_args):
    """`python -m realformer_tf.data.translation` on a tiny corpus; the
    `--params_override` pointing small_own_data.yaml at it."""
    d = tempfile.mkdtemp(dir=self.get_temp_dir())
    sources, targets = ttu.make_corpus(300, seed=0)
    with open(f"{d}/train.tsv", "w") as f:
      f.writelines(f"{s}\t{t}\n" for s, t in zip(sources, targets))
    dev = ttu.make_corpus(4, seed=1)
    for name, lines in zip(("dev.src", "dev.tgt"), dev):
      with open(f"{d}/{name}", "w") as f:
        f.write("\n".join(lines) + "\n")
    result = translation_data.convert(
        [f"{d}/train.tsv"], f"{d}/data",
        dev_files=[f"{d}/dev.src", f"{d}/dev.tgt"], model_type="word",
        vocab_size=len(ttu.WORDS) + 3, **convert_args)
    override = (f"task.sentencepiece_model_path="
                f"{result['sentencepiece_model']},"
                f"task.train_data.input_path={result['train_file']},"
                f"task.validation_data.input_path={result['dev_file']}")
    return d, override

  def test_small_own_data_yaml_reads_the_data_command_output(self):
    """Checked as train.py checks it; one batch through the loader, the
    model and the loss (training with it: translation_e2e_test)."""
    d, override = self._own_data()
    params = _parse(OWN_DATA_YAML, params_override=override)
    self.assertEqual((64, 2, 2), (params.task.model.embedding_width,
                                  params.task.model.encoder.num_layers,
                                  params.task.model.decoder.num_layers))
    model_dir = f"{d}/run"
    _checked(params, "train_and_eval", model_dir)
    self.assertFalse(os.path.exists(model_dir))
    task = task_factory.get_task(params.task)
    batch = next(iter(task.build_inputs(params.task.train_data)))
    # Batches of similar lengths within 2048 tokens (padding included).
    rows, length = batch["inputs"].shape.as_list()
    self.assertLessEqual(length, 8)  # The longest sentence: 6 words + EOS.
    self.assertLessEqual(rows * length, 2048)
    self.assertGreater(rows, 32)
    self.assertEqual(1, task.eos_id)
    loss = task.build_losses(batch["targets"],
                             task.build_model()(batch, training=True))
    self.assertTrue(0.0 < float(loss) < 100.0)

  def test_sentencepiece_default_ids_refused_before_anything_is_written(self):
    d, override = self._own_data()
    prefix = f"{d}/default_ids"
    spm.SentencePieceTrainer.Train(
        input=f"{d}/dev.src", model_prefix=prefix, model_type="word",
        vocab_size=len(ttu.WORDS) + 3, hard_vocab_limit=False, minloglevel=2)
    params = _parse(OWN_DATA_YAML, params_override=override.replace(
        f"{d}/data/sentencepiece.model", f"{prefix}.model"))
    self.assertEqual(f"{prefix}.model", params.task.sentencepiece_model_path)
    model_dir = f"{d}/run"
    with self.assertRaisesRegex(
        ValueError, "task.sentencepiece_model_path=.*default_ids.model.: pad "
        "id is -1, eos id is 2 .*needs pad 0 and eos 1"):
      train_lib.run_experiment(params, "train_and_eval", model_dir)
    self.assertFalse(os.path.exists(model_dir))
    # The task refuses it too (Model Garden's trainer, the exporter).
    with self.assertRaisesRegex(ValueError, "pad id is -1, eos id is 2"):
      rf_translation.RealFormerTranslationTask(params.task)

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
      plan_rules.check(run_plan.derive(
          _parse(params_override="task.model.encoder.residual_attention=avg"),
          "train", tempfile.mkdtemp()), (plan_rules.values,))


if __name__ == "__main__":
  tf.test.main()
