"""The reproduction's plan: same data order across architectures, one plan
for pre-training and fine-tuning, bad options named, nothing written."""
import os

from absl.testing import parameterized
import tensorflow as tf

from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from tests.helpers import reproduce_inputs


def _encoder(run):
  return run.config.task.model.encoder.get()


class PlanTest(tf.test.TestCase, parameterized.TestCase):

  def test_same_data_order_steps_and_optimizer_across_architectures(self):
    tmp = self.get_temp_dir()
    plan = plan_lib.make_plan(reproduce_inputs.options(
        tmp, archs=("post_ln", "pre_ln", "realformer", "realformer_2xlr"),
        seeds=2))
    self.assertLen(plan.pretrain, 8)
    self.assertEqual(plan.glue_sizes, {})  # No MRPC files written.
    self.assertIn("mrpc", plan.skipped_tasks)
    by_seed = {}
    for run in plan.pretrain:
      by_seed.setdefault(run.seed, []).append(run)
      self.assertEqual(run.model_dir,
                       os.path.join(tmp, "out", "pretrain", run.arch,
                                    f"seed{run.seed}"))
    for seed, runs in by_seed.items():
      self.assertLen(runs, 4)
      for run in runs:
        data = run.config.task.train_data
        self.assertEqual(data.seed, seed)
        self.assertEqual(data.input_path, runs[0].config.task.train_data
                         .input_path)
        self.assertEqual(run.config.trainer.train_steps, 4)
        self.assertEqual(_encoder(run).vocab_size, plan.data["vocab_size"])
        self.assertEqual(_encoder(run).num_layers, 4)
      lrs = {r.arch: r.config.trainer.optimizer_config.learning_rate
             .polynomial.initial_learning_rate for r in runs}
      self.assertEqual(lrs["post_ln"], lrs["pre_ln"])
      self.assertEqual(lrs["post_ln"], lrs["realformer"])
      self.assertAlmostEqual(lrs["realformer_2xlr"], 2 * lrs["realformer"])
      archs = {r.arch: _encoder(r) for r in runs}
      self.assertEqual(
          (archs["post_ln"].residual_attention, archs["post_ln"].norm_first),
          ("none", False))
      self.assertEqual(
          (archs["pre_ln"].residual_attention, archs["pre_ln"].norm_first,
           archs["pre_ln"].final_layer_norm), ("none", True, True))
      self.assertEqual(
          (archs["realformer"].residual_attention,
           archs["realformer"].norm_first), ("sum", False))

  def test_fine_tuning_is_planned_once_with_the_pretraining_seed(self):
    tmp = self.get_temp_dir()
    reproduce_inputs.write_mrpc(os.path.join(tmp, "glue"))
    plan = plan_lib.make_plan(reproduce_inputs.options(
        tmp, archs=("post_ln", "realformer"), seeds=2))
    self.assertEqual(plan.glue_sizes, {"mrpc": 40})  # The TSV's rows.
    self.assertLen(plan.all_runs, 8)  # Each pre-training run, then its grid.
    for run in plan.pretrain:
      finetune, = plan.finetune[run.model_dir]
      self.assertEqual(plan.all_runs[plan.all_runs.index(run) + 1], finetune)
      self.assertEqual(finetune.seed, run.seed)
      self.assertEqual(finetune.config.task.train_data.seed, run.seed)
      self.assertEqual(finetune.config.task.init_checkpoint, run.model_dir)
      self.assertEqual(finetune.model_dir, os.path.join(
          tmp, "out", "finetune", run.arch, f"seed{run.seed}", "mrpc",
          "ep3_lr0.0001", f"seed{run.seed}"))
      self.assertEqual(finetune.config.trainer.train_steps, 4)  # 3 * 40 / 32

  def test_dry_run_lists_the_plan_and_touches_nothing(self):
    tmp = self.get_temp_dir()
    reproduce_inputs.write_mrpc(os.path.join(tmp, "glue"))
    options = reproduce_inputs.options(tmp, archs=("post_ln", "realformer"),
                                       seeds=1)
    before = reproduce_inputs.tree(tmp)
    text = report.describe(plan_lib.make_plan(options))
    self.assertEqual(reproduce_inputs.tree(tmp), before)
    self.assertFalse(os.path.exists(options.output_dir))
    lines = text.splitlines()
    self.assertIn("vocabulary 8000 tokens", lines[1])  # Target, not built.
    self.assertIn("vocabulary not learned yet", lines[1])
    self.assertEqual(lines[3].split(), [
        "new", os.path.join(options.output_dir, "pretrain", "post_ln",
                            "seed0"), "pre-train", "post_ln", "seed", "0,",
        "4", "steps"])
    self.assertIn("steps=4 warmup=0 lr=0.0001 seed=0", lines[4])
    # Data 110 s, analysis 2 x 75 s; 2 pre-training runs of 4 steps
    # (55 s + 4 x 0.32 s), 2 fine-tuning runs of 4 (90 s + 4 x 0.18 s):
    # 554 s on shared cores, / 3.5 on free ones (plan.CpuCost).
    self.assertEqual(lines[-1], "Estimated time: 02:38 to 09:14 (min:s) on 2 "
                     "CPU cores, free to heavily shared (data, runs and "
                     "analysis, runs already done included; measured rates, "
                     "reproduce/plan.py CpuCost).")

  @parameterized.named_parameters(("base", "base", 12, 768),
                                  ("large", "large", 24, 1024))
  def test_paper_scales_use_the_size_and_recipe_files(self, scale, layers,
                                                      hidden):
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=30522)
    options = plan_lib.Options(output_dir="unused", scale=scale,
                               train_steps=1000)
    config = plan_lib.pretraining_config(
        options, plan_lib.SCALES[scale], "pre_ln", 1, data)
    encoder = config.task.model.encoder.get()
    self.assertEqual((encoder.num_layers, encoder.hidden_size),
                     (layers, hidden))
    self.assertTrue(encoder.norm_first)
    self.assertEqual(config.task.train_data.seq_length, 512)
    self.assertEqual(config.task.train_data.max_predictions_per_seq, 80)
    self.assertEqual(config.task.train_data.seed, 1)
    self.assertEqual(config.task.model.cls_heads[0].inner_dim, hidden)
    schedule = config.trainer.optimizer_config
    self.assertEqual(schedule.learning_rate.polynomial.decay_steps, 1000)
    self.assertEqual(schedule.warmup.polynomial.warmup_steps, 100)

  @parameterized.named_parameters(
      ("scale", dict(scale="huge"), "--scale"),
      ("arch", dict(archs=("post_ln", "bert")), "--archs"),
      ("repeat", dict(archs=("post_ln", "post_ln")), "repeats"),
      ("seeds", dict(seeds=0), "--seeds"),
      ("steps", dict(train_steps=0), "--train_steps"),
      ("task", dict(glue_tasks=("squad",)), "squad"),
      ("half_records", dict(train_data="x-*"), "--validation_data"),
      ("corpus", dict(corpus=("/nonexistent.txt",)), "/nonexistent.txt"),
      ("vocab_alone", dict(vocab_file="v.txt"), "--vocab_file"),
  )
  def test_bad_options_are_named_before_anything_is_written(self, kwargs,
                                                           message):
    tmp = self.get_temp_dir()
    options = reproduce_inputs.options(tmp, output_dir=os.path.join(
        tmp, "bad"), **kwargs)
    with self.assertRaisesRegex(ValueError, message):
      plan_lib.make_plan(options)
    self.assertFalse(os.path.exists(os.path.join(tmp, "bad")))


  def test_an_output_dir_holding_a_run_is_refused_before_anything_is_written(
      self):
    """Issue 38: results.md, the figures and the runs were written into any
    --output_dir, over a user's files of those names."""
    tmp = self.get_temp_dir()
    out = os.path.join(tmp, "a_run")
    os.makedirs(out)
    for name in ("params.yaml", "ckpt-2.index", "results.md"):
      with open(os.path.join(out, name), "w") as f:
        f.write(name)
    with self.assertRaisesRegex(
        ValueError, "holds ckpt-2.index, params.yaml, which a reproduction "
        r"does not write \(a train.py run: it holds params.yaml\)"):
      plan_lib.make_plan(reproduce_inputs.options(tmp, output_dir=out))
    self.assertEqual(sorted(os.listdir(out)),
                     ["ckpt-2.index", "params.yaml", "results.md"])

if __name__ == "__main__":
  tf.test.main()
