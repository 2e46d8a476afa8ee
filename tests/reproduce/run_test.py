"""The reproduction end to end on the tf_keras face: every output, its
numbers, a second seed, a rerun that trains nothing."""
import contextlib
import dataclasses
import io
import json
import os
from unittest import mock

from matplotlib import image as mpimg
import numpy as np
import tensorflow as tf

from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import run
from realformer_tf.reproduce import tf_keras_face
from tests.helpers import reproduce_inputs

# Two evaluations per 4-step run (steps 2 and 4) instead of one per step.
_TINY = dataclasses.replace(plan_lib.SIZES["tiny"], evals=2)


def _fake_pretrain(plan, spec):
  """Seed 1's runs, without training: numbers the summaries must combine."""
  assert spec.seed == 1, spec.run_dir
  return {"arch": spec.arch, "seed": 1, "global_step": spec.train_steps,
          "eval_logs": {"masked_lm_accuracy": 0.5, "lm_example_loss": 5.0},
          "curves": {"train": [[4, 0.5]], "validation": [[4, 0.5]]}}


def _fake_finetune(plan, spec):
  assert spec.seed == 1, spec.run_dir
  return dict(task=spec.task, epochs=spec.epochs, seed=1,
              learning_rate=spec.learning_rate, metrics=dict(
                  f1=0.5, accuracy=0.625), eval_logs={})


def _must_not_run(*args, **kwargs):
  raise AssertionError(f"ran again: {args} {kwargs}")


class EndToEndTest(tf.test.TestCase):

  @mock.patch.dict(plan_lib.SIZES, tiny=_TINY)
  def test_every_file_then_a_second_seed_then_a_rerun_that_trains_nothing(
      self):
    tmp = self.get_temp_dir()
    reproduce_inputs.write_mrpc(os.path.join(tmp, "glue"))
    options = reproduce_inputs.options(tmp, archs=("post_ln", "realformer"),
                                       seeds=1)
    plan = plan_lib.make_plan(options, tf_keras_face)
    self.assertEqual(plan.glue_sizes, {"mrpc": 40})
    results = run.execute(plan)
    replan = lambda: plan_lib.make_plan(options, tf_keras_face)

    out = options.output_dir
    # What a rerun accepts in --output_dir (`plan_lib.check_output_dir`);
    # the lock only while a run holds it.
    self.assertEqual(set(os.listdir(out)), set(plan_lib.OUTPUT_ENTRIES) -
                     {plan_lib.LOCK_FILE})
    self.assertEqual(mpimg.imread(os.path.join(out, "curves.png")).shape[:2],
                     (450, 1100))
    # attention.png: the summary figure of two architectures at 100 dpi.
    self.assertEqual(
        mpimg.imread(os.path.join(out, "attention.png")).shape[:2],
        (850, 1050))
    for arch in options.archs:
      self.assertTrue(os.path.exists(os.path.join(
          out, "analysis", arch, "summary.json")))
      run_result = results["pretraining_runs"][arch][0]
      self.assertEqual(run_result["global_step"], 4)
      self.assertGreater(run_result["seconds"], 0)
      # Evaluated during training (steps 2 and 4): the curve ends with the
      # final evaluation.
      curve = results["curves"][arch][0]["validation"]
      self.assertEqual([step for step, _ in curve], [2, 4])
      self.assertAllClose(curve[-1][1],
                          run_result["eval_logs"]["masked_lm_accuracy"])
      # MRPC accuracy: whole dev rows right, out of 40.
      mrpc = results["glue"][arch]["tasks"]["mrpc"]["best"]["metrics"]
      accuracy = mrpc["accuracy"]["median"]
      self.assertAllClose(40 * accuracy, round(40 * accuracy))
    with open(os.path.join(out, "results.md")) as f:
      text = f.read()
    self.assertIn("| Post-LN |", text)
    self.assertIn("| RealFormer |", text)
    self.assertIn("mrpc (f1/accuracy)", text)
    self.assertIn("- Post-LN: pre-training ", text)
    with open(os.path.join(out, "results.json")) as f:
      self.assertEqual(json.load(f)["archs"], ["post_ln", "realformer"])

    # A second seed: only its runs are new; the summaries combine both.
    options.seeds = 2
    with mock.patch.object(tf_keras_face, "pretrain", _fake_pretrain), \
         mock.patch.object(tf_keras_face, "finetune", _fake_finetune), \
         mock.patch.object(tf_keras_face.analysis_runner, "run_analysis",
                           _must_not_run):
      two_seeds = run.execute(replan())
    with open(os.path.join(out, "results.md")) as f:
      text = f.read()
    for arch, label in (("post_ln", "Post-LN"), ("realformer", "RealFormer")):
      read = lambda path: ownership.read_json(path, writes.OS_OPS)
      accuracies = [read(os.path.join(
          plan_lib.run_dir(out, arch, seed), plan_lib.RESULT_FILE))[
              "eval_logs"]["masked_lm_accuracy"] for seed in (0, 1)]
      stats = two_seeds["pretraining"][arch]["masked_lm_accuracy"]
      self.assertEqual(stats["values"], accuracies)
      median, std = np.median(accuracies), np.std(accuracies)  # ddof=0
      self.assertAllClose([stats["median"], stats["std"]], [median, std])
      self.assertIn(f"| {label} | {100 * median:.2f} ± {100 * std:.2f} |",
                    text)
      f1 = [read(os.path.join(
          out, "finetune", arch, f"seed{seed}", "mrpc", "ep3_lr0.0001",
          f"seed{seed}", plan_lib.RESULT_FILE))["metrics"]["f1"]
            for seed in (0, 1)]
      mrpc = two_seeds["glue"][arch]["tasks"]["mrpc"]["best"]
      self.assertEqual(mrpc["seeds"], [0, 1])
      self.assertAllClose([mrpc["metrics"]["f1"]["median"],
                           mrpc["metrics"]["f1"]["std"]],
                          [np.median(f1), np.std(f1)])
    self.assertEqual(two_seeds["pretraining_runs"]["post_ln"][0],
                     results["pretraining_runs"]["post_ln"][0])

    before = reproduce_inputs.tree(os.path.join(out, "pretrain"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), \
         mock.patch.object(tf_keras_face, "pretrain", _must_not_run), \
         mock.patch.object(tf_keras_face, "finetune", _must_not_run), \
         mock.patch.object(tf_keras_face.analysis_runner, "run_analysis",
                           _must_not_run):
      again = run.execute(replan())
    self.assertEqual(reproduce_inputs.tree(os.path.join(out, "pretrain")),
                     before)
    progress = [l for l in printed.getvalue().splitlines()
                if l.startswith("[") or l.startswith("attention analysis")]
    # 4 pre-train and 4 fine-tune runs, then 2 analyses: all done.
    self.assertLen(progress, 10)
    for line in progress:
      self.assertRegex(line, r"^(\[\d/8\] .*|attention analysis .*): done")
    self.assertEqual(again["pretraining"], two_seeds["pretraining"])
    self.assertEqual(again["glue"], two_seeds["glue"])


if __name__ == "__main__":
  tf.test.main()
