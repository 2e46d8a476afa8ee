"""End to end: train.py --experiment=realformer/translation, BLEU, export, translate.

A synthetic parallel corpus (target = the source's words reversed, 8 words,
3-6 per sentence) as a TSV, made into a word-level sentencepiece model and
records by `python -m realformer_tf.data.translation`'s `convert`, then
small_own_data.yaml with this test's recipe on top: 500 seeded steps
(learning rate decayed to 0) of a 32-wide RealFormer encoder-decoder
(1 + 2 layers) through train.py, then the SavedModel's `translate` in a fresh
process. Chance level: a random permutation of each source's words (right
words, random order) scores `translation_test_utils.chance_bleu` (about 30
SacreBLEU); a trained model reverses exactly (about 100).
"""

import os
import pickle
import re
import sys
import tempfile

import numpy as np
import tensorflow as tf

from official.core import task_factory
from realformer_tf.checkpoints import run_directory
from realformer_tf.data import translation as translation_data
from realformer_tf.serving import export
from realformer_tf.serving import translation_export
from tests.helpers import translation as ttu
from tests.helpers import watchdog

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# 300 steps at a constant rate left 1 run in 8 short of the exact-match bar
# (0.84 on CI; one of 8 runs at 450 steps fell to BLEU 86): the rate must
# decay for the last steps to settle. 500 decayed steps: 8 of 8 unseeded runs
# at >= 0.97 exact match; the seed makes the run repeat.
_STEPS = 500

# On top of small_own_data.yaml (its data keys); the batches are token
# budgets, as when this recipe was tuned.
_YAML = """
task:
  model:
    embedding_width: 32
    beam_size: 2
    dropout_rate: 0.0
    encoder: {{num_layers: 1, num_attention_heads: 4, intermediate_size: 64,
               dropout_rate: 0.0, attention_dropout_rate: 0.0}}
    decoder: {{num_layers: 2, num_attention_heads: 4, intermediate_size: 64,
               dropout_rate: 0.0, attention_dropout_rate: 0.0}}
  train_data: {{global_batch_size: 256, max_seq_length: 8, seed: 0,
                static_batch: false}}
  validation_data: {{global_batch_size: 32, max_seq_length: 8,
                     static_batch: false}}
trainer:
  train_steps: {steps}
  steps_per_loop: 100
  summary_interval: 100
  checkpoint_interval: 100
  validation_interval: 1000
  optimizer_config:
    learning_rate: {{type: polynomial, polynomial: {{
        initial_learning_rate: 0.003, decay_steps: {steps},
        end_learning_rate: 0.0}}}}
    warmup: {{type: linear, linear: {{warmup_steps: 50,
                                       warmup_learning_rate: 0.0}}}}
runtime: {{distribution_strategy: one_device, num_gpus: 0}}
"""


def _env():
  return dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
              CUDA_VISIBLE_DEVICES="")


class TranslationEndToEndTest(tf.test.TestCase):

  def test_train_bleu_export_translate(self):
    d = tempfile.mkdtemp(dir=self.get_temp_dir())
    sources, targets = ttu.make_corpus(2000, seed=0)
    dev_sources, dev_targets = ttu.make_corpus(32, seed=1)
    for split, pairs in (("train", zip(sources, targets)),
                         ("dev", zip(dev_sources, dev_targets))):
      with open(f"{d}/{split}.tsv", "w") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)
    data = translation_data.convert(
        [f"{d}/train.tsv"], f"{d}/data", dev_files=[f"{d}/dev.tsv"],
        model_type="word", vocab_size=len(ttu.WORDS) + 3)
    with open(f"{d}/exp.yaml", "w") as f:
      f.write(_YAML.format(steps=_STEPS))
    model_dir = f"{d}/run"
    run = watchdog.run(
        [sys.executable, os.path.join(_ROOT, "train.py"),
         "--experiment=realformer/translation", "--mode=train_and_eval",
         f"--model_dir={model_dir}",
         "--config_file=" + os.path.join(
             _ROOT, "official_configs/experiments/translation/"
             "small_own_data.yaml"), f"--config_file={d}/exp.yaml",
         "--params_override="
         f"task.sentencepiece_model_path={data['sentencepiece_model']},"
         f"task.train_data.input_path={data['train_file']},"
         f"task.validation_data.input_path={data['dev_file']}"],
        cwd=_ROOT, env=_env())
    self.assertEqual(0, run.returncode, run.stderr[-4000:])
    final = re.search(r"final eval \| step: (\d+) \|.*sacrebleu_score: "
                      r"([\d.]+)", run.stdout)
    self.assertIsNotNone(final, run.stdout[-2000:])
    self.assertEqual(_STEPS, int(final.group(1)))
    bleu, chance = float(final.group(2)), ttu.chance_bleu(dev_sources,
                                                          dev_targets)
    print(f"SacreBLEU {bleu:.1f}, chance level {chance:.1f}")
    self.assertLess(chance, 50.0)
    self.assertGreater(bleu, 90.0, f"BLEU {bleu} (chance {chance:.1f})")

    # In process: the trained model's beam search, trimmed at EOS.
    config = run_directory.load_experiment_config(model_dir)
    task = task_factory.get_task(config.task)
    model = task.build_model()
    ids = task._sp_tokenizer.tokenize(dev_sources).to_tensor(0)  # pylint: disable=protected-access
    model({"inputs": ids, "targets": ids})
    run_directory.restore_model(
        model, run_directory.resolve_checkpoint(model_dir, "model_dir"))
    outputs = model({"inputs": ids})["outputs"].numpy()
    want = []
    for row in outputs:
      row = list(row)
      row = row[:row.index(task.eos_id)] if task.eos_id in row else row
      want.append(task._sp_tokenizer.detokenize(row).numpy().decode())  # pylint: disable=protected-access
    self.assertGreater(np.mean([w == t for w, t in zip(want, dev_targets)]),
                       0.9)

    export_dir = f"{d}/export"
    translation_export.export_translation(model_dir, export_dir)
    requests = [(export_dir, "ok", "translate",
                 {"text": np.array(dev_sources, dtype=object)}),
                (export_dir, "empty", "translate",
                 {"text": np.array(["red", ""], dtype=object)}),
                (export_dir, "long", "translate",
                 {"text": np.array(["red " * 9], dtype=object)}),
                (export_dir, "dtype", "translate",
                 {"text": np.array([1, 2], np.int32)}),
                (export_dir, "utf8", "translate",
                 {"text": np.array([b"red", b"r\xe9d blue"], dtype=object)})]
    with open(f"{d}/requests.pkl", "wb") as f:
      pickle.dump(requests, f)
    watchdog.run([sys.executable, "-m", "tests.helpers.saved_model_runner",
                  f"{d}/requests.pkl", f"{d}/results.pkl"], cwd=_ROOT,
                 env=_env(), check=True)
    with open(f"{d}/results.pkl", "rb") as f:
      results = pickle.load(f)
    got = [s.decode() for s in results["ok"]["translations"]]
    self.assertEqual(want, got)
    self.assertRegex(results["empty"]["error"],
                     "(?s)InvalidArgumentError.*text: an input sentence is empty")
    self.assertRegex(results["long"]["error"],
                     "(?s)InvalidArgumentError.*text: an input sentence is longer "
                     "than the model maximum, 8 tokens")
    self.assertRegex(results["dtype"]["error"], "expected to be a string")
    self.assertRegex(results["utf8"]["error"],
                     r"(?s)InvalidArgumentError.*`text` holds a string that "
                     r"is not valid UTF-8 at batch positions\] \[1\]")

    with self.assertRaisesRegex(ValueError, "exists and is not empty"):
      translation_export.export_translation(model_dir, export_dir)


if __name__ == "__main__":
  tf.test.main()
