"""train.py's closing lines and its single-copy progress."""

import logging as std_logging
import os
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from official.core import exp_factory
from realformer_tf.configs import experiments
from realformer_tf.configs import squad
from realformer_tf.training import cpu_numerics
from realformer_tf.training import run_summary
from tests.helpers import train_runs as utils


class RunSummaryTest(tf.test.TestCase, parameterized.TestCase):

  def test_masked_lm_lines_name_chance_and_most_frequent_token(self):
    tmp = tempfile.mkdtemp()
    records = utils.write_pretraining_records(
        os.path.join(tmp, "eval.tfrecord"), 16)
    params = exp_factory.get_exp_config(experiments.QUICKSTART)
    params.task.validation_data.input_path = records
    params.task.model.encoder.any.vocab_size = 64
    params.task.train_data.global_batch_size = 32
    found = run_summary.most_frequent_masked_token([records])
    # Independent count of the masked ids with weight 1.
    counts = {}
    for record in tf.data.TFRecordDataset(records):
      example = tf.train.Example.FromString(record.numpy())
      ids = example.features.feature["masked_lm_ids"].int64_list.value
      weights = example.features.feature["masked_lm_weights"].float_list.value
      for token, weight in zip(ids, weights):
        if weight:
          counts[token] = counts.get(token, 0) + 1
    best = max(counts, key=counts.get)
    self.assertEqual(found[0], best)
    self.assertAllClose(found[1], counts[best] / sum(counts.values()))
    lines = run_summary.summary_lines(
        params, tmp, {"masked_lm_accuracy": 0.25}, step=10, steps_run=10,
        seconds=2.0)
    self.assertIn("Held-out masked-LM accuracy: 0.2500. Chance (uniform over "
                  "the 64-token vocabulary): 0.0156", lines[0])
    self.assertIn(f"most frequent masked token (id {best}): "
                  f"{counts[best] / sum(counts.values()):.4f}", lines[0])
    # The quickstart says which CPU numerics it ran with (cpu_numerics).
    self.assertEqual(lines[1], cpu_numerics.summary_line())
    batch = params.task.train_data.global_batch_size
    self.assertIn("Speed: 10 training steps in 2 s, 5.0 steps/s, "
                  f"{5 * batch} examples/s", lines[2])
    self.assertIn(f"TensorBoard: tensorboard --logdir {tmp}", lines[-1])

  def test_next_sentence_line_names_the_majority_baseline(self):
    """392 of 454 random pairs, as the quickstart's eval set: always
    answering "random" scores 0.8634, which 0.835 does not beat (the line
    said "chance: 0.5" until issue 30)."""
    tmp = tempfile.mkdtemp()
    records = os.path.join(tmp, "eval.tfrecord")
    with tf.io.TFRecordWriter(records) as writer:
      for i in range(454):
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "masked_lm_ids": tf.train.Feature(
                int64_list=tf.train.Int64List(value=[7, 7, 9])),
            "masked_lm_weights": tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0, 1.0, 1.0])),
            "next_sentence_labels": tf.train.Feature(
                int64_list=tf.train.Int64List(value=[int(i < 392)])),
        })).SerializeToString())
    self.assertEqual(run_summary.majority_next_sentence_label([records]),
                     (1, 392 / 454, 454))
    params = exp_factory.get_exp_config(experiments.QUICKSTART)
    params.task.validation_data.input_path = records
    lines = run_summary.summary_lines(
        params, tmp, {"masked_lm_accuracy": 0.25,
                      "next_sentence_accuracy": 0.835}, 10, 0, 0.0)
    self.assertEqual(
        lines[1], "Held-out next-sentence accuracy: 0.8350. Always answering "
        "the majority label (random next sentence, 392 of the 454 eval "
        "pairs): 0.8634; the model does not beat it.")
    self.assertNotIn("chance: 0.5", "\n".join(lines))
    self.assertIn("most frequent masked token (id 7): 0.6667", lines[0])
    lines = run_summary.summary_lines(
        params, tmp, {"masked_lm_accuracy": 0.25,
                      "next_sentence_accuracy": 0.9}, 10, 0, 0.0)
    self.assertTrue(lines[1].endswith("pairs): 0.8634."), lines[1])
    # A tie, as float32 metrics report it (a hair above 392 / 454).
    lines = run_summary.summary_lines(
        params, tmp, {"masked_lm_accuracy": 0.25, "next_sentence_accuracy":
                      float(np.float32(392 / 454)) + 1e-7}, 10, 0, 0.0)
    self.assertTrue(lines[1].endswith("the model does not beat it."), lines[1])

  def test_squad_line_says_the_scale(self):
    params = exp_factory.get_exp_config(squad.SQUAD)
    lines = run_summary.summary_lines(params, tempfile.mkdtemp(),
                                      {"exact_match": 0.7, "f1": 3.3}, 5, 0,
                                      0.0)
    self.assertIn("official 0-100 scale", lines[0])

  @parameterized.parameters(("train | step:      4 | steps/sec: 3", False),
                            (" eval | step:      4 | eval time", False),
                            ("restoring or initializing model...", True))
  def test_orbit_progress_filter(self, message, kept):
    record = std_logging.LogRecord(
        "absl", std_logging.INFO, "/x/site-packages/orbit/controller.py", 1,
        message, None, None)
    self.assertEqual(run_summary._not_orbit_progress(record), kept)  # pylint: disable=protected-access


if __name__ == "__main__":
  tf.test.main()
