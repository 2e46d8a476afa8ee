"""The Keras 3 reproduction's options, schedule points and dry-run text."""
import os
import re

import pytest

from realformer_tf.core import writes
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import report


def test_the_small_size_is_the_papers_bert_small_on_one_gpu():
  plan = plan_lib.make_plan(plan_lib.Options(output_dir="/tmp/unused"))
  s = plan.size
  assert (s.num_layers, s.hidden_dim, s.num_heads, s.intermediate_dim,
          s.seq_length, s.batch_size) == (4, 512, 8, 2048, 128, 128)
  assert plan.train_steps == 2000
  assert [r.arch for r in plan.runs] == ["post_ln", "pre_ln", "realformer"]
  assert plan.eval_steps() == list(range(200, 2001, 200))
  assert plan.boundaries() == sorted(set(range(200, 2001, 200)) |
                                     {500, 1500})
  text = plan_lib.describe(plan)
  assert "Size small: 4 layers, hidden 512, 8 heads, feed-forward 2048" in text
  assert "the quickstart's stdlib corpus" in text
  assert "realformer seed 0: to run (/tmp/unused/realformer/seed0)" in text


def test_steps_not_a_multiple_still_end_with_an_evaluation():
  plan = plan_lib.make_plan(plan_lib.Options(
      output_dir="o", size="tiny", train_steps=10, checkpoint_steps=4))
  assert plan.eval_steps() == [2, 4, 6, 8, 10]
  assert plan.boundaries() == [2, 4, 6, 8, 10]
  assert plan_lib.make_plan(plan_lib.Options(
      output_dir="o", size="tiny", train_steps=5)).checkpoint_steps == 5


@pytest.mark.parametrize("options, message", [
    (dict(output_dir=""), "--output_dir is required"),
    (dict(size="base"), "--size='base': use one of small, tiny"),
    (dict(archs=("post_ln", "bert")), "--archs: unknown ['bert']"),
    (dict(archs=()), "--archs: unknown empty list"),
    (dict(archs=("pre_ln", "pre_ln")), "repeats a name"),
    (dict(seeds=0), "--seeds must be a positive integer, got 0"),
    (dict(train_steps=True), "--train_steps must be a positive integer"),
    (dict(checkpoint_steps=-1), "--checkpoint_steps must be a positive"),
    (dict(dtype_policy="bfloat16"), "--dtype_policy='bfloat16'"),
    (dict(corpus=("/no/such/file",)), "--corpus: /no/such/file is not a"),
])
def test_a_bad_option_is_named(options, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    plan_lib.make_plan(plan_lib.Options(**dict(dict(output_dir="o"),
                                               **options)))


def test_status_follows_the_files(tmp_path):
  run = plan_lib.Run("realformer", 0, str(tmp_path))
  assert plan_lib.run_status(run) == "to run"
  (tmp_path / plan_lib.CHECKPOINT_FILE).write_bytes(b"")
  assert plan_lib.run_status(run) == "resumes from its checkpoint"
  (tmp_path / plan_lib.RESULT_FILE).write_text("{}")
  assert plan_lib.run_status(run) == "done"
  assert os.path.basename(plan_lib.run_dir("o", "pre_ln", 2)) == "seed2"


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
    plan_lib.make_plan(plan_lib.Options(output_dir=str(run), size="tiny"))
  assert sorted(os.listdir(run)) == ["params.yaml", "results.md",
                                     "train.lock"]
  ours = tmp_path / "ours"
  ours.mkdir()
  for name in set(plan_lib.OUTPUT_ENTRIES) - set(plan_lib.REPORT):
    (ours / name).write_text("")
  writes.publish_json(str(ours / plan_lib.RESULTS_JSON), {}, plan_lib.WRITER,
                      writes.OS_OPS)
  plan_lib.make_plan(plan_lib.Options(output_dir=str(ours), size="tiny"))
  # A user's file with a report's name: kept, and the refusal names it.
  (ours / plan_lib.RESULTS_MD).write_text("my notes")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{ours / plan_lib.RESULTS_MD} exists and no manifest of realformer_tf "
      "lists it (not written by us), so nothing was written: move it away")):
    plan_lib.make_plan(plan_lib.Options(output_dir=str(ours), size="tiny"))
  assert (ours / plan_lib.RESULTS_MD).read_text() == "my notes"
