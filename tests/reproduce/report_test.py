"""results.md's numbers and the curves read back from TensorBoard."""
import os

import numpy as np
import tensorflow as tf

from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from realformer_tf.training import sweep


class ReportTest(tf.test.TestCase):
  """results.md and the curves, without training."""

  def _plan(self, seeds):
    options = plan_lib.Options(output_dir="unused", seeds=seeds,
                               archs=("post_ln", "realformer"),
                               glue_tasks=("mrpc",))
    scale = plan_lib.SCALES["tiny"]
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=100, source="test corpus")
    config = plan_lib.pretraining_config(options, scale, "post_ln", 0, data)
    return plan_lib.Plan(
        options=options, scale=scale, data=data, glue_sizes={"mrpc": 40},
        pretrain=[plan_lib.PretrainRun(arch="post_ln", seed=0,
                                       model_dir="unused", config=config)],
        finetune={"unused": []}, skipped_tasks={})

  def _results_md(self, accuracies):
    """results.md of two architectures with these MLM accuracies per seed."""
    runs = {arch: [{"seed": s, "eval_logs": {
        "masked_lm_accuracy": a + shift, "lm_example_loss": 4.0 - a}}
                   for s, a in enumerate(accuracies)]
            for arch, shift in (("post_ln", 0.0), ("realformer", 0.01))}
    glue = {arch: sweep.summarize({"mrpc": [
        dict(seed=s, epochs=3, learning_rate=1e-4,
             metrics=dict(f1=a, accuracy=a / 2))
        for s, a in enumerate(accuracies)]}) for arch in runs}
    return report.format_results(
        self._plan(len(accuracies)), report.summarize_pretraining(runs),
        glue)

  def test_one_seed_says_so_instead_of_a_zero_spread(self):
    text = self._results_md([0.25])
    self.assertNotIn("±", text)
    self.assertIn("| Post-LN | 25.00 (1 seed) | 3.75 (1 seed) |", text)
    self.assertIn("| RealFormer | 26.00 (1 seed) | 3.75 (1 seed) |", text)
    self.assertIn("| Post-LN | 25.00 (1 seed) / 12.50 (1 seed) | 18.75 |",
                  text)
    self.assertIn("one seed per architecture, so no spread", text)

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

  def test_tiny_scale_says_it_is_no_finding(self):
    text = self._results_md([0.25])
    self.assertIn("**Tiny scale (4 layers, hidden 64, 2 heads, feed-forward "
                  "256; 1000 pre-training steps on a CPU): a check that the "
                  "pipeline runs, not the paper's findings.**", text)
    plan = self._plan(1)
    small = plan_lib.Plan(**{**plan.__dict__, "options": plan_lib.Options(
        output_dir="unused", scale="small")})
    self.assertIsNone(report.scale_note(small))

  def test_majority_class_runs_are_named(self):
    def result(accuracy, majority):
      logs = dict(accuracy=accuracy, f1=0.812, majority_class_accuracy=majority,
                  majority_class_f1=0.812)
      return dict(seed=0, eval_logs=logs)
    glue_results = {"realformer": {"mrpc": [result(0.684, 0.684)] * 2},
                    "post_ln": {"mrpc": [result(0.684, 0.684),
                                         result(0.70, 0.684)]}}
    self.assertEqual(report.majority_class_lines(glue_results), [
        "- RealFormer, mrpc: every run scored exactly the majority class "
        "(f1 81.20, accuracy 68.40: one label for every example); the "
        "classifier learned nothing at this scale."])
    text = report.format_results(
        self._plan(1), {}, {}, report.majority_class_lines(glue_results))
    self.assertIn("- RealFormer, mrpc: every run scored exactly", text)

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
    curves = report.read_curves(model_dir)
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
    curves = report.read_curves(model_dir)
    self.assertEqual([s for s, _ in curves["train"]], list(range(1, 31)))
    self.assertAllClose([v for _, v in curves["train"]],
                        np.arange(1, 31) / 100)
    self.assertEqual(curves["validation"], [])


if __name__ == "__main__":
  tf.test.main()
