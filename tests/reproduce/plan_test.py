"""The reproduction's plan: one size table and run list for both faces, the
same data order across architectures, fine-tuning planned from each
pre-training run, bad options named, nothing written."""
import json
import os
import re

from absl.testing import parameterized
import pytest
import tensorflow as tf

from realformer_tf.core import writes
from realformer_tf.reproduce import keras3_face
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import run as run_lib
from realformer_tf.reproduce import tf_keras_face
from tests.helpers import reproduce_inputs


def _tf_keras_plan(tmp, **kwargs):
  return plan_lib.make_plan(reproduce_inputs.options(tmp, **kwargs),
                            tf_keras_face)


def _keras3_plan(**kwargs):
  return plan_lib.make_plan(plan_lib.Options(**dict(
      dict(output_dir="/tmp/unused"), **kwargs)), keras3_face)


class TfKerasPlanTest(tf.test.TestCase, parameterized.TestCase):

  def test_same_data_order_steps_and_optimizer_across_architectures(self):
    tmp = self.get_temp_dir()
    plan = _tf_keras_plan(tmp, archs=("post_ln", "pre_ln", "realformer",
                                      "realformer_2xlr"), seeds=2)
    self.assertLen(plan.pretrain, 8)
    self.assertEqual(plan.glue_sizes, {})  # No MRPC files written.
    self.assertIn("mrpc", plan.skipped_tasks)
    for seed in (0, 1):
      runs = [r for r in plan.pretrain if r.seed == seed]
      self.assertLen(runs, 4)
      configs = {r.arch: tf_keras_face.pretraining_config(plan, r.arch, seed)
                 for r in runs}
      for run in runs:
        self.assertEqual(run.run_dir, os.path.join(
            tmp, "out", "pretrain", run.arch, f"seed{seed}"))
        config = configs[run.arch]
        self.assertEqual(config.task.train_data.seed, seed)
        self.assertEqual(config.task.train_data.input_path,
                         configs["post_ln"].task.train_data.input_path)
        self.assertEqual(config.trainer.train_steps, 4)
        encoder = config.task.model.encoder.get()
        self.assertEqual(encoder.vocab_size, plan.data["vocab_size"])
        self.assertEqual((encoder.num_layers, encoder.hidden_size), (2, 32))
      lrs = {a: c.trainer.optimizer_config.learning_rate.polynomial
             .initial_learning_rate for a, c in configs.items()}
      self.assertEqual(lrs["post_ln"], lrs["pre_ln"])
      self.assertEqual(lrs["post_ln"], lrs["realformer"])
      self.assertAlmostEqual(lrs["realformer_2xlr"], 2 * lrs["realformer"])
      archs = {a: c.task.model.encoder.get() for a, c in configs.items()}
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
    plan = _tf_keras_plan(tmp, archs=("post_ln", "realformer"), seeds=2)
    self.assertEqual(plan.glue_sizes, {"mrpc": 40})  # The TSV's rows.
    self.assertLen(plan.all_runs, 8)  # Each pre-training run, then its grid.
    for run in plan.pretrain:
      finetune, = plan.finetune[run.run_dir]
      self.assertEqual(plan.all_runs[plan.all_runs.index(run) + 1], finetune)
      self.assertEqual((finetune.seed, finetune.arch, finetune.pretrained),
                       (run.seed, run.arch, run.run_dir))
      self.assertEqual(finetune.run_dir, os.path.join(
          tmp, "out", "finetune", run.arch, f"seed{run.seed}", "mrpc",
          "ep3_lr0.0001", f"seed{run.seed}"))
      self.assertEqual((finetune.train_steps, finetune.batch_size,
                        finetune.max_seq_length), (4, 32, 32))  # 3 * 40 / 32

  def test_dry_run_lists_the_plan_and_touches_nothing(self):
    tmp = self.get_temp_dir()
    reproduce_inputs.write_mrpc(os.path.join(tmp, "glue"))
    options = reproduce_inputs.options(tmp, archs=("post_ln", "realformer"),
                                       seeds=1)
    before = reproduce_inputs.tree(tmp)
    text = run_lib.describe(plan_lib.make_plan(options, tf_keras_face))
    self.assertEqual(reproduce_inputs.tree(tmp), before)
    self.assertFalse(os.path.exists(options.output_dir))
    lines = text.splitlines()
    self.assertIn("vocabulary not learned yet (vocabulary 1000 tokens)",
                  lines[1])  # The target, not built.
    self.assertEqual(lines[4].split(), [
        "new", os.path.join(options.output_dir, "pretrain", "post_ln",
                            "seed0"), "pre-train", "post_ln", "seed", "0,",
        "4", "steps"])
    self.assertIn("fine-tune post_ln seed 0 on mrpc, 3 epochs, lr 0.0001, 4 "
                  "steps", lines[5])
    # Data 110 s, analysis 2 x 75 s; 2 pre-training runs of 4 steps
    # (55 s + 4 x 0.32 s), 2 fine-tuning runs of 4 (90 s + 4 x 0.18 s):
    # 554 s on shared cores, / 3.5 on free ones (tf_keras_face.CPU_COST).
    self.assertEqual(lines[-1], "Estimated time: 02:38 to 09:14 (min:s) on 2 "
                     "CPU cores, free to heavily shared (data, runs and "
                     "analysis, runs already done included; measured rates, "
                     "reproduce/tf_keras_face.py CPU_COST).")

  @parameterized.named_parameters(("base", "base", 12, 768),
                                  ("large", "large", 24, 1024))
  def test_paper_sizes_use_the_size_and_recipe_files(self, size, layers,
                                                     hidden):
    data = dict(train_file="train-*", eval_file="eval-*",
                vocab_file="vocab.txt", vocab_size=30522, source="records")
    plan = plan_lib.make_plan(plan_lib.Options(
        output_dir="unused", face="tf_keras", size=size, train_steps=1000),
                              tf_keras_face, data)
    config = tf_keras_face.pretraining_config(plan, "pre_ln", 1)
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
      ("task", dict(glue_tasks=("squad",)), "squad"),
      ("half_records", dict(train_data="x-*"), "--validation_data"),
      ("corpus", dict(corpus=("/nonexistent.txt",)), "/nonexistent.txt"),
      ("vocab_alone", dict(vocab_file="v.txt"), "--vocab_file"),
      ("keras3_flag", dict(checkpoint_steps=5), "keras3 face's"),
  )
  def test_bad_options_are_named_before_anything_is_written(self, kwargs,
                                                           message):
    tmp = self.get_temp_dir()
    options = reproduce_inputs.options(tmp, output_dir=os.path.join(
        tmp, "bad"), **kwargs)
    with self.assertRaisesRegex(ValueError, message):
      plan_lib.make_plan(options, tf_keras_face)
    self.assertFalse(os.path.exists(os.path.join(tmp, "bad")))


def test_the_small_size_is_the_papers_bert_small_on_one_gpu():
  plan = _keras3_plan(size="small", seeds=1)
  s = plan.size
  assert (s.num_layers, s.hidden_dim, s.num_heads, s.intermediate_dim,
          s.seq_length, s.batch_size) == (4, 512, 8, 2048, 128, 128)
  assert plan.train_steps == 2000
  assert plan_lib.warmup_steps(plan.size, plan.train_steps) == 200
  assert [r.arch for r in plan.pretrain] == ["post_ln", "pre_ln", "realformer"]
  assert plan.eval_steps() == list(range(200, 2001, 200))
  assert plan.boundaries() == sorted(set(range(200, 2001, 200)) |
                                     {500, 1500})
  assert plan.finetune == {r.run_dir: [] for r in plan.pretrain}
  text = run_lib.describe(plan)
  assert "Size small: 4 layers, hidden 512, 8 heads, feed-forward 2048" in text
  assert "the quickstart's stdlib corpus" in text
  assert "   new  /tmp/unused/pretrain/realformer/seed0  pre-train " in text
  assert ("Fine-tuning: epochs [3] x lr [2e-05, 5e-05] per task and "
          "pre-training run, batch 32, seq 128.") in text
  assert "Fine-tuning mrpc: skipped (<no --glue_dir>/MRPC lacks " in text


def test_three_seeds_by_default_in_seed_then_arch_order():
  plan = _keras3_plan()
  assert [(r.seed, r.arch) for r in plan.pretrain] == [
      (s, a) for s in range(3) for a in plan_lib.DEFAULT_ARCHS]
  plan = _keras3_plan(train_steps=10, checkpoint_steps=4)
  assert plan.eval_steps() == [2, 4, 6, 8, 10]  # Ends with an evaluation.
  assert plan.boundaries() == [2, 4, 6, 8, 10]
  assert _keras3_plan(train_steps=5).checkpoint_steps == 5


@pytest.mark.parametrize("options, message", [
    (dict(output_dir=""), "--output_dir is required"),
    (dict(size="huge"), "--size='huge': use one of tiny, mini, small, base, "
     "large"),
    (dict(archs=("post_ln", "bert")), "--archs: unknown ['bert']"),
    (dict(archs=()), "--archs: unknown empty list"),
    (dict(archs=("pre_ln", "pre_ln")), "repeats a name"),
    (dict(seeds=0), "--seeds must be a positive integer, got 0"),
    (dict(seeds=None), "--seeds must be a positive integer, got None"),
    (dict(train_steps=True), "--train_steps must be a positive integer"),
    (dict(checkpoint_steps=-1), "--checkpoint_steps must be a positive"),
    (dict(dtype_policy="bfloat16"), "--dtype_policy='bfloat16'"),
    (dict(corpus=("/no/such/file",)), "--corpus: /no/such/file is not a"),
    (dict(train_data="x-*"), "--train_data is the tf_keras face's"),
])
def test_a_bad_option_is_named(options, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    _keras3_plan(**options)


def test_status_follows_the_files(tmp_path):
  plan = _keras3_plan(output_dir=str(tmp_path), seeds=1)
  run = plan.pretrain[0]
  assert run_lib.status(plan, run) == "new"
  os.makedirs(run.run_dir)
  with open(os.path.join(run.run_dir, keras3_face.CHECKPOINT_FILE), "wb"):
    pass
  assert run_lib.status(plan, run) == "resume"
  result = os.path.join(run.run_dir, plan_lib.RESULT_FILE)
  writes.publish_json(result, {"config": plan.config_of(run)},
                      plan_lib.WRITER, writes.OS_OPS)
  assert run_lib.status(plan, run) == "done"
  # Made for another length: not done, its checkpoint resumes (or refuses).
  longer = _keras3_plan(output_dir=str(tmp_path), seeds=1, train_steps=25)
  assert run_lib.status(longer, longer.pretrain[0]) == "resume"


def test_an_output_dir_holding_what_it_does_not_write_is_refused(tmp_path):
  """Issue 38: results.md, curves.png and the runs were written into any
  --output_dir (a train.py run, a folder of the user's); refused, with
  nothing written. Its own output passes (a rerun)."""
  run = tmp_path / "run"
  run.mkdir()
  for name in ("params.yaml", "train.lock", "results.md"):
    (run / name).write_text(name)
  with pytest.raises(ValueError, match=re.escape(
      f"--output_dir={str(run)!r} holds params.yaml, train.lock, which a "
      "reproduction does not write (a train.py run")):
    _keras3_plan(output_dir=str(run))
  assert sorted(os.listdir(run)) == ["params.yaml", "results.md",
                                     "train.lock"]
  ours = tmp_path / "ours"
  ours.mkdir()
  for name in set(plan_lib.OUTPUT_ENTRIES) - set(plan_lib.REPORT):
    (ours / name).write_text("")
  (ours / "curves.png.tmp-12").write_text("")  # A leftover of ours.
  writes.publish_json(str(ours / plan_lib.RESULTS_JSON), {"face": "keras3"},
                      plan_lib.WRITER, writes.OS_OPS)
  _keras3_plan(output_dir=str(ours))
  # A user's file with a report's name: kept, and the refusal names it.
  (ours / plan_lib.RESULTS_MD).write_text("my notes")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{ours / plan_lib.RESULTS_MD} exists and no manifest of realformer_tf "
      "lists it (not written by us), so nothing was written: move it away")):
    _keras3_plan(output_dir=str(ours))
  assert (ours / plan_lib.RESULTS_MD).read_text() == "my notes"
  (ours / plan_lib.RESULTS_MD).unlink()
  # One output dir, one face: the other's reproduction is refused.
  with pytest.raises(ValueError, match="holds a reproduction of the keras3 "
                     "face: pass --face=keras3 or another --output_dir"):
    run_lib.check(plan_lib.make_plan(plan_lib.Options(
        output_dir=str(ours), face="tf_keras", corpus=()), tf_keras_face))
  with pytest.raises(ValueError, match="is a file, not a directory"):
    _keras3_plan(output_dir=str(ours / plan_lib.RESULTS_JSON))
  assert json.loads((ours / plan_lib.RESULTS_JSON).read_text())["face"] == (
      "keras3")


def test_squad_is_planned_where_both_files_are_and_skipped_saying_why(
    tmp_path):
  assert _keras3_plan(seeds=1).skipped_tasks["squad"] == (
      "<no --squad_dir> lacks train-v1.1.json, dev-v1.1.json")
  squad_dir = str(tmp_path / "squad")
  reproduce_inputs.write_squad(squad_dir)
  os.remove(os.path.join(squad_dir, "dev-v1.1.json"))
  plan = _keras3_plan(seeds=1, squad_dir=squad_dir)
  assert plan.skipped_tasks["squad"] == f"{squad_dir} lacks dev-v1.1.json"
  assert plan.squad_size == 0 and not any(plan.finetune.values())
  reproduce_inputs.write_squad(str(tmp_path / "both"))
  plan = _keras3_plan(seeds=2, squad_dir=str(tmp_path / "both"))
  assert plan.squad_size == 24 and "squad" not in plan.skipped_tasks
  for run in plan.pretrain:
    squad, = plan.finetune[run.run_dir]
    # ceil(3 epochs * 24 questions / batch 32), tiny's 48 tokens.
    assert (squad.task, squad.seed, squad.train_steps,
            squad.max_seq_length) == ("squad", run.seed, 3, 48)
  assert plan_lib.squad_lengths(plan.size) == (48, 16, 8)
  assert plan_lib.squad_lengths(plan_lib.SIZES["base"]) == (384, 128, 64)
  # The tf_keras face names where SQuAD is fine-tuned instead.
  plan = _tf_keras_plan(str(tmp_path), squad_dir=str(tmp_path / "both"))
  assert "--face=keras3 does" in plan.skipped_tasks["squad"]
  assert not any(plan.finetune.values())


def test_a_malformed_squad_file_is_refused_naming_it(tmp_path):
  squad_dir = str(tmp_path / "squad")
  reproduce_inputs.write_squad(squad_dir)
  train = os.path.join(squad_dir, "train-v1.1.json")
  with open(train, "w") as f:
    f.write('{"data": [{"paragraphs": [{"context": "x", "qas": [{}]}]}]}')
  with pytest.raises(ValueError, match=re.escape(
      f"SQuAD file {train!r}, article 0 paragraph 0 question 0: has no 'id' "
      "string.")):
    _keras3_plan(output_dir=str(tmp_path / "out"), squad_dir=squad_dir)
  assert not os.path.exists(tmp_path / "out")
