"""Tests of `python -m realformer_tf.reproduce`: the plan, resume, outputs."""
import dataclasses
import json
import os
import random

from absl.testing import parameterized
import tensorflow as tf

from realformer_tf import reproduce

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
    for name in ("results.md", "results.json", "curves.png",
                 "attention.png"):
      self.assertTrue(os.path.getsize(os.path.join(out, name)) > 0, name)
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
    again = reproduce.execute(rerun, runner=must_not_run,
                              finetune_runner=must_not_run,
                              analyse=must_not_run)
    self.assertEqual(again["pretraining"], results["pretraining"])
    self.assertEqual(again["glue"], results["glue"])


if __name__ == "__main__":
  tf.test.main()
