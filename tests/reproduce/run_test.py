"""Tests of `python -m realformer_tf.reproduce`: the plan, resume, outputs."""
import contextlib
import dataclasses
import io
import json
import os
import random
from unittest import mock

from absl.testing import parameterized
from matplotlib import image as mpimg
import numpy as np
import tensorflow as tf

from realformer_tf import reproduce
from realformer_tf.training import sweep

_WORDS = ("the cat sat on a mat while dogs ran far away from home and "
          "birds sang in tall green trees near the old river bank").split()


def _write_corpus(path, num_documents=24, seed=0):
  rng = random.Random(seed)
  lines = []
  for _ in range(num_documents):
    for _ in range(6):
      lines.append(" ".join(rng.choice(_WORDS)
                            for _ in range(rng.randint(5, 12))) + " .")
    lines.append("")
  with open(path, "w") as f:
    f.write("\n".join(lines))


def _write_mrpc(glue_dir, rows=40, seed=0):
  rng = random.Random(seed)
  os.makedirs(os.path.join(glue_dir, "MRPC"))
  for split in ("train", "dev"):
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i in range(rows):
      a = " ".join(rng.choice(_WORDS) for _ in range(6))
      lines.append(f"{i % 2}\t{i}\t{i}\t{a}\t{a if i % 2 else a[::-1]}")
    with open(os.path.join(glue_dir, "MRPC", f"{split}.tsv"), "w") as f:
      f.write("\n".join(lines) + "\n")


def _options(tmp, **kwargs):
  corpus = os.path.join(tmp, "corpus.txt")
  if not os.path.exists(corpus):
    _write_corpus(corpus)
  defaults = dict(output_dir=os.path.join(tmp, "out"), corpus=(corpus,),
                  glue_dir=os.path.join(tmp, "glue"), glue_tasks=("mrpc",),
                  train_steps=4)
  defaults.update(kwargs)
  return reproduce.Options(**defaults)


def _encoder(run):
  return run.config.task.model.encoder.get()


class PlanTest(tf.test.TestCase, parameterized.TestCase):

  def test_same_data_order_steps_and_optimizer_across_architectures(self):
    tmp = self.get_temp_dir()
    plan = reproduce.make_plan(_options(
        tmp, archs=("post_ln", "pre_ln", "realformer", "realformer_2xlr"),
        seeds=2))
    self.assertLen(plan.pretrain, 8)
    self.assertEqual(plan.glue_tasks, [])  # No MRPC files written.
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

  @parameterized.named_parameters(("base", "base", 12, 768), ("large", "large", 24, 1024))
  def test_paper_scales_use_the_size_and_recipe_files(self, scale, layers,
                                                      hidden):
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=30522)
    options = reproduce.Options(output_dir="unused", scale=scale,
                                train_steps=1000)
    config = reproduce.pretraining_config(
        options, reproduce.SCALES[scale], "pre_ln", 1, data)
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
    options = _options(tmp, output_dir=os.path.join(tmp, "bad"), **kwargs)
    with self.assertRaisesRegex(ValueError, message):
      reproduce.make_plan(options)
    self.assertFalse(os.path.exists(os.path.join(tmp, "bad")))

  def test_wikitext_articles_become_documents_of_sentences(self):
    path = os.path.join(self.get_temp_dir(), "wiki.txt")
    with open(path, "w") as f:
      f.write(" \n = First = \n \n The cat sat . It ran away .\n"
              " = = Section = = \n Birds sang .\n = Second = \n Dogs bark .\n")
    self.assertEqual(reproduce.wikitext_documents(path),
                     [["The cat sat .", "It ran away .", "Birds sang ."],
                      ["Dogs bark ."]])


def _png_shape(fig, path, dpi=100):
  """(height, width) of `path`, checked to be `fig`'s size at `dpi`."""
  shape = mpimg.imread(path).shape[:2]
  width, height = fig.get_size_inches()
  assert shape == (round(dpi * height), round(dpi * width)), (shape, path)
  return shape


class ReportTest(tf.test.TestCase):
  """results.md, curves.png and the progress lines, without training."""

  def _plan(self, seeds):
    options = reproduce.Options(output_dir="unused", seeds=seeds,
                                archs=("post_ln", "realformer"),
                                glue_tasks=("mrpc",))
    scale = reproduce.SCALES["tiny"]
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=100, source="test corpus")
    config = reproduce.pretraining_config(options, scale, "post_ln", 0, data)
    return reproduce.Plan(
        options=options, scale=scale, data=data, glue_tasks=["mrpc"],
        pretrain=[reproduce.PretrainRun(arch="post_ln", seed=0,
                                        model_dir="unused", config=config)],
        skipped_tasks={})

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
    return reproduce.format_results(
        self._plan(len(accuracies)), reproduce.summarize_pretraining(runs),
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
    curves = reproduce.read_curves(model_dir)
    for split in ("train", "validation"):
      self.assertEqual([s for s, _ in curves[split]], [1, 2, 3, 4])
      self.assertAllClose([v for _, v in curves[split]],
                          [0.1, 0.2, 0.35, 0.4])

  def test_coinciding_architectures_stay_visible_apart(self):
    run = {"train": [[1, 0.1], [2, 0.2], [3, 0.3]],
           "validation": [[3, 0.25]]}
    curves = {arch: {0: run, 1: run}
              for arch in ("post_ln", "pre_ln", "realformer")}
    path = os.path.join(self.get_temp_dir(), "curves.png")
    fig = reproduce.plot_curves(curves, path)
    for ax in fig.axes:
      styles = {(line.get_color(), line.get_linestyle(), line.get_marker(),
                 line.get_linewidth()) for line in ax.get_lines()}
      self.assertLen(styles, 3)  # Two seeds of one arch share a style.
      self.assertLen({s[1:3] for s in styles}, 3)
    legend, = fig.legends
    self.assertEqual([t.get_text() for t in legend.get_texts()],
                     ["Post-LN", "Pre-LN", "RealFormer"])
    self.assertEqual(_png_shape(fig, path), (450, 1100))

  def test_finished_steps_say_done_and_do_not_speed_up_the_eta(self):
    clock = [100.0]
    with mock.patch.object(reproduce.time, "time", lambda: clock[0]):
      progress = reproduce.Progress(total_units=10)
      clock[0] += 1.0
      line = progress.line(1, 3, "pre-train post_ln seed 0 (4 steps)",
                           finished=True)
      self.assertEqual(line, "[reproduce 1/3] pre-train post_ln seed 0 "
                       "(4 steps): done | 1s elapsed")
      progress.advance(4, worked=False)
      line = progress.line(2, 3, "pre-train realformer seed 0")
      self.assertTrue(line.endswith("40% done, 1s elapsed, ETA ?"), line)
      clock[0] += 30.0  # 2 units worked in 30 s: 15 s per unit.
      progress.advance(2)
      line = progress.line(3, 3, "attention analysis")
      self.assertTrue(line.endswith("60% done, 31s elapsed, ETA 1m02s"),
                      line)


class EndToEndTest(tf.test.TestCase):

  def test_two_architectures_write_every_file_and_a_rerun_does_nothing(self):
    tmp = self.get_temp_dir()
    _write_mrpc(os.path.join(tmp, "glue"))
    options = _options(tmp, archs=("post_ln", "realformer"), seeds=1)
    plan = reproduce.make_plan(options)
    self.assertEqual(plan.glue_tasks, ["mrpc"])
    plan.scale = dataclasses.replace(plan.scale, analysis_examples=16)
    results = reproduce.execute(plan)

    out = options.output_dir
    self.assertEqual(mpimg.imread(os.path.join(out, "curves.png")).shape[:2],
                     (450, 1100))
    # attention.png: the summary figure of two architectures at 100 dpi.
    self.assertEqual(
        mpimg.imread(os.path.join(out, "attention.png")).shape[:2],
        (850, 1050))
    for arch in options.archs:
      self.assertTrue(os.path.exists(os.path.join(
          out, "analysis", arch, "summary.json")))
      run = results["pretraining_runs"][arch][0]
      self.assertEqual(run["global_step"], 4)
      stats = results["pretraining"][arch]["masked_lm_accuracy"]
      self.assertEqual(stats["values"],
                       [run["eval_logs"]["masked_lm_accuracy"]])
      self.assertEqual(stats["std"], 0.0)
      # Evaluated during training: the curve ends at the last step.
      self.assertEqual(results["curves"][arch][0]["validation"][-1][0], 4)
      mrpc = results["glue"][arch]["tasks"]["mrpc"]["best"]["metrics"]
      self.assertBetween(mrpc["accuracy"]["median"], 0.0, 1.0)
    with open(os.path.join(out, "results.md")) as f:
      text = f.read()
    self.assertIn("| Post-LN |", text)
    self.assertIn("| RealFormer |", text)
    self.assertIn("mrpc (f1/accuracy)", text)
    with open(os.path.join(out, "results.json")) as f:
      self.assertEqual(json.load(f)["archs"], ["post_ln", "realformer"])

    def must_not_run(*args, **kwargs):
      raise AssertionError(f"ran again: {args} {kwargs}")

    rerun = reproduce.make_plan(options)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      again = reproduce.execute(rerun, runner=must_not_run,
                                finetune_runner=must_not_run,
                                analyse=must_not_run)
    progress = [l for l in printed.getvalue().splitlines()
                if l.startswith("[reproduce ")]
    # 2 pre-train, 2 fine-tune, 2 analysis, then the results line.
    self.assertLen(progress, 7)
    for line in progress[:-1]:
      self.assertRegex(line, r"^\[reproduce \d/6\] .*: done \| \d+s elapsed$")
    self.assertRegex(progress[-1], r"results\.md: done \| ")
    self.assertEqual(again["pretraining"], results["pretraining"])
    self.assertEqual(again["glue"], results["glue"])


if __name__ == "__main__":
  tf.test.main()
