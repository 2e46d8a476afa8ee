"""results.md's numbers for both faces (Table 2 beside the paper's numbers,
its ordering, the GLUE table, seconds per run) and the curves the tf_keras
face reads back from TensorBoard."""
import os

import numpy as np
import tensorflow as tf

from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from realformer_tf.reproduce import tf_keras_face
from realformer_tf.training import seed_stats

LABELS = {"post_ln": "Post-LN", "pre_ln": "Pre-LN", "realformer": "RealFormer"}


def _pretraining(accuracies, losses=None):
  return report.summarize_pretraining({
      arch: [{"eval_logs": {"masked_lm_accuracy": a,
                            "lm_example_loss": (losses or {}).get(arch, 3.0)}}
             for a in values] for arch, values in accuracies.items()})


class ReportTest(tf.test.TestCase):
  """results.md, without training."""

  def _plan(self, seeds, size="tiny"):
    options = plan_lib.Options(output_dir="unused", face="tf_keras",
                               seeds=seeds, size=size,
                               archs=("post_ln", "realformer"), glue_tasks=())
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=100, source="test corpus")
    plan = plan_lib.make_plan(options, tf_keras_face, data)
    for run in plan.pretrain:  # One MRPC run per pre-training run.
      plan.finetune[run.run_dir] = plan_lib.finetune_runs(
          options, plan.size, run, "mrpc", 40)
    return plan

  def _results_md(self, accuracies):
    """results.md of two architectures with these MLM accuracies per seed."""
    plan = self._plan(len(accuracies))
    results = {}
    for run in plan.pretrain:
      a = accuracies[run.seed] + (0.01 if run.arch == "realformer" else 0.0)
      results[run.run_dir] = {"seed": run.seed, "seconds": 10.0 + run.seed,
                              "eval_logs": {"masked_lm_accuracy": a,
                                            "lm_example_loss":
                                                4.0 - accuracies[run.seed]}}
      f, = plan.finetune[run.run_dir]
      results[f.run_dir] = dict(
          seed=run.seed, seconds=3.0, epochs=3, learning_rate=1e-4,
          metrics=dict(f1=accuracies[run.seed],
                       accuracy=accuracies[run.seed] / 2))
    runs, glue_runs, _ = report.by_arch(plan, results)
    glue = {arch: seed_stats.summarize(by_task)
            for arch, by_task in glue_runs.items()}
    return report.format_results(plan, results,
                                 report.summarize_pretraining(runs), glue)

  def test_one_seed_says_so_instead_of_a_zero_spread(self):
    text = self._results_md([0.25])
    self.assertNotIn("±", text)
    self.assertIn("| Post-LN | 25.00 (1 seed) | 3.75 (1 seed) | 61.88 |", text)
    self.assertIn("| RealFormer | 26.00 (1 seed) | 3.75 (1 seed) | 62.02 |",
                  text)
    self.assertIn("| Post-LN | 25.00 (1 seed) / 12.50 (1 seed) | 18.75 |",
                  text)
    self.assertIn("one seed per architecture, so no spread", text)
    self.assertIn("- Post-LN: pre-training 10 s; fine-tuning 1 runs, 3 s "
                  "each on average", text)

  def test_several_seeds_give_median_and_numpy_std(self):
    accuracies = [0.31, 0.35, 0.2]
    text = self._results_md(accuracies)
    self.assertNotIn("1 seed", text)
    self.assertIn("Numbers: median ± std over seeds.", text)
    median, std = np.median(accuracies), np.std(accuracies)  # ddof=0
    losses = 4.0 - np.asarray(accuracies)
    self.assertIn(f"| Post-LN | {100 * median:.2f} ± {100 * std:.2f} | "
                  f"{np.median(losses):.2f} ± {np.std(losses):.2f} |", text)
    self.assertIn(f"| RealFormer | {100 * (median + 0.01):.2f} ± "
                  f"{100 * std:.2f} |", text)
    self.assertIn(f"| Post-LN | {100 * median:.2f} ± {100 * std:.2f} / "
                  f"{50 * median:.2f} ± {50 * std:.2f} |", text)
    self.assertIn("- RealFormer: pre-training 10, 11, 12 s; fine-tuning 3 "
                  "runs", text)

  def test_a_cpu_size_says_it_is_no_finding(self):
    text = self._results_md([0.25])
    self.assertIn("**Tiny size (2 layers, hidden 32, 2 heads, feed-forward "
                  "64; 24 pre-training steps on a CPU): a check that the "
                  "pipeline runs, not the paper's findings.**", text)
    self.assertIsNone(report.scale_note(self._plan(1, size="small")))

  def test_majority_class_runs_are_named(self):
    def result(accuracy, majority):
      logs = dict(accuracy=accuracy, f1=0.812, majority_class_accuracy=majority,
                  majority_class_f1=0.812)
      return dict(seed=0, metrics=dict(f1=0.812, accuracy=accuracy),
                  eval_logs=logs)
    glue_results = {"realformer": {"mrpc": [result(0.684, 0.684)] * 2},
                    "post_ln": {"mrpc": [result(0.684, 0.684),
                                         result(0.70, 0.684)]}}
    self.assertEqual(report.majority_class_lines(glue_results), [
        "- RealFormer, mrpc: every run scored exactly the majority class "
        "(f1 81.20, accuracy 68.40: one label for every example); the "
        "classifier learned nothing at this scale."])

  def test_a_resumed_run_has_one_point_per_step_the_last_written(self):
    model_dir = self.get_temp_dir()
    # The first process logged steps 1-3 and was killed; the resumed one
    # logged step 3 again (another value) and step 4, in a new event file.
    for points in ([(1, 0.1), (2, 0.2), (3, 0.3)], [(3, 0.35), (4, 0.4)]):
      for split in ("train", "validation"):
        writer = tf.summary.create_file_writer(
            os.path.join(model_dir, split))
        with writer.as_default():
          for step, value in points:
            tf.summary.scalar("masked_lm_accuracy", value, step=step)
            tf.summary.scalar("lm_example_loss", 9.0, step=step)
        writer.close()
    self.assertLen(tf.io.gfile.glob(
        os.path.join(model_dir, "train", "events.out.tfevents.*")), 2)
    curves = tf_keras_face.read_curves(model_dir)
    for split in ("train", "validation"):
      self.assertEqual([s for s, _ in curves[split]], [1, 2, 3, 4])
      self.assertAllClose([v for _, v in curves[split]],
                          [0.1, 0.2, 0.35, 0.4])

  def test_every_point_is_kept_and_a_missing_split_is_empty(self):
    # More points than TensorBoard's default tensor reservoir (10) keeps.
    model_dir = self.get_temp_dir()
    writer = tf.summary.create_file_writer(os.path.join(model_dir, "train"))
    with writer.as_default():
      for step in range(1, 31):
        tf.summary.scalar("masked_lm_accuracy", step / 100, step=step)
    writer.close()
    curves = tf_keras_face.read_curves(model_dir)
    self.assertEqual([s for s, _ in curves["train"]], list(range(1, 31)))
    self.assertAllClose([v for _, v in curves["train"]],
                        np.arange(1, 31) / 100)
    self.assertEqual(curves["validation"], [])


def test_rows_in_label_order_beside_the_paper_then_the_ordering():
  lines = report.pretraining_table(LABELS, _pretraining(
      {"post_ln": [0.30], "pre_ln": [0.25], "realformer": [0.35]},
      {"realformer": 2.5}), report.PAPER_TABLE2["base"])
  assert lines[:5] == [
      "| Architecture | MLM accuracy (%) | MLM loss | Paper, BERT-Base (%) |",
      "|---|---|---|---|",
      "| Post-LN | 30.00 (1 seed) | 3.00 (1 seed) | 70.20 |",
      "| Pre-LN | 25.00 (1 seed) | 3.00 (1 seed) | 69.74 |",
      "| RealFormer | 35.00 (1 seed) | 2.50 (1 seed) | 70.42 |"]
  assert lines[-1] == (
      "Ordering by held-out MLM accuracy: RealFormer 35.00 > Post-LN 30.00 > "
      "Pre-LN 25.00 (the paper's, BERT-Base after 1M steps: RealFormer 70.42 "
      "> Post-LN 70.20 > Pre-LN 69.74).")


def test_a_tie_at_the_shown_precision_is_a_tie_in_label_order():
  line = report.ordering(LABELS, _pretraining(
      {"post_ln": [0.300001], "pre_ln": [0.3], "realformer": [0.2]}))
  assert line.startswith("Ordering by held-out MLM accuracy: Post-LN 30.00 = "
                         "Pre-LN 30.00 > RealFormer 20.00 (the paper's, "
                         "BERT-Small after 1M steps: RealFormer 62.02 > "
                         "Post-LN 61.88 > Pre-LN 61.67).")


def test_medians_over_seeds_order_the_architectures():
  line = report.ordering(LABELS, _pretraining(
      {"post_ln": [0.1, 0.5, 0.4], "pre_ln": [0.3, 0.3, 0.3],
       "realformer": [0.45, 0.0, 0.44]}))
  assert "Realformer" not in line and line.index("RealFormer 44.00") < (
      line.index("Post-LN 40.00")) < line.index("Pre-LN 30.00")

