"""The reproduction end to end: every output, its numbers, a rerun that
trains nothing."""
import contextlib
import dataclasses
import io
import json
import os
from unittest import mock

from matplotlib import image as mpimg
import numpy as np
import tensorflow as tf

from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import run
from realformer_tf.training import runs
from realformer_tf.training import sweep
from tests.helpers import reproduce_inputs

# Two evaluations per 4-step run (steps 2 and 4) instead of one per step.
_TINY = dataclasses.replace(plan_lib.SCALES["tiny"], evals=2,
                            analysis_examples=16)


def _fake_seed_1(run):
  """Seed 1's runs, without training: numbers the summaries must combine."""
  assert run.seed == 1, run.model_dir
  return {"eval_logs": {"masked_lm_accuracy": 0.5, "lm_example_loss": 5.0,
                        "f1": 0.5, "accuracy": 0.625},
          "global_step": run.train_steps}


def _must_not_run(*args, **kwargs):
  raise AssertionError(f"ran again: {args} {kwargs}")


class EndToEndTest(tf.test.TestCase):

  @mock.patch.dict(plan_lib.SCALES, tiny=_TINY)
  def test_every_file_then_a_second_seed_then_a_rerun_that_trains_nothing(
      self):
    tmp = self.get_temp_dir()
    reproduce_inputs.write_mrpc(os.path.join(tmp, "glue"))
    options = reproduce_inputs.options(tmp, archs=("post_ln", "realformer"),
                                       seeds=1)
    plan = run.prepare(options)
    self.assertEqual(plan.glue_sizes, {"mrpc": 40})
    results = run.execute(plan)

    out = options.output_dir
    # What a rerun accepts in --output_dir (`plan_lib.check_options`).
    self.assertEqual(set(os.listdir(out)), set(plan_lib.OUTPUT_ENTRIES))
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
    with open(os.path.join(out, "results.json")) as f:
      self.assertEqual(json.load(f)["archs"], ["post_ln", "realformer"])

    # A second seed: only its runs are new; the summaries combine both.
    options.seeds = 2
    two_seeds = run.execute(run.prepare(options), runner=_fake_seed_1,
                            analyse=_must_not_run)
    with open(os.path.join(out, "results.md")) as f:
      text = f.read()
    for arch, label in (("post_ln", "Post-LN"), ("realformer", "RealFormer")):
      accuracies = [runs.read_result(os.path.join(
          plan_lib.pretrain_dir(out, arch, seed), "pretrain_result.json"))[
              "eval_logs"]["masked_lm_accuracy"] for seed in (0, 1)]
      stats = two_seeds["pretraining"][arch]["masked_lm_accuracy"]
      self.assertEqual(stats["values"], accuracies)
      median, std = np.median(accuracies), np.std(accuracies)  # ddof=0
      self.assertAllClose([stats["median"], stats["std"]], [median, std])
      self.assertIn(f"| {label} | {100 * median:.2f} ± {100 * std:.2f} |",
                    text)
      f1 = [runs.read_result(os.path.join(
          out, "finetune", arch, f"seed{seed}", "mrpc", "ep3_lr0.0001",
          f"seed{seed}", sweep.RESULT_FILE))["metrics"]["f1"]
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
    with contextlib.redirect_stdout(printed):
      again = run.execute(run.prepare(options), runner=_must_not_run,
                          analyse=_must_not_run)
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
