"""results.md of the Keras 3 reproduction from handmade results."""
import numpy as np

from realformer_tf.reproduce.keras3 import data
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import report
from realformer_tf.reproduce import tables


def _result(arch, seed, accuracy, seconds, digest=None):
  return {"arch": arch, "seed": seed, "seconds": seconds,
          "batch_digest": digest or f"{seed:02d}" * 32,
          "device": "NVIDIA H200", "dtype_policy": "mixed_bfloat16",
          "eval_logs": {"masked_lm_accuracy": accuracy,
                        "lm_example_loss": 4.0 - accuracy},
          "curves": {"train": [[100, 0.1]], "validation": [[200, accuracy]]}}


def test_results_md_says_what_ran_and_the_table():
  plan = plan_lib.make_plan(plan_lib.Options(output_dir="o", seeds=2))
  sequences = data.Sequences(train=np.zeros((2044, 128), np.int32),
                             eval=np.zeros((94, 128), np.int32),
                             vocab=["x"] * 2334, source="the corpus")
  results = {arch: [_result(arch, s, a + s / 100, 40.0) for s in (0, 1)]
             for arch, a in (("post_ln", 0.5), ("pre_ln", 0.4),
                             ("realformer", 0.6))}
  pretraining = tables.summarize_pretraining(results)
  text = report.format_results(plan, sequences, results, pretraining)
  assert text.startswith("# Post-LN vs Pre-LN vs RealFormer on Keras 3 (JAX)"
                         ", size `small`\n")
  for part in (
      "4 layers, hidden 512, 8 heads, feed-forward 2048",
      "vocabulary 2334 WordPiece tokens learned from the corpus.",
      "Pre-training: 2000 steps, batch 128, seq 128, masked LM only",
      "Numbers: median ± std over seeds.",
      "Held-out: 94 sequences",
      "Batches: the same for every architecture (SHA-256 of the masked "
      "batches, seed 0: `000000000000`, seed 1: `010101010101`).",
      "Ran on NVIDIA H200 (mixed_bfloat16): Post-LN 80 s, Pre-LN 80 s, "
      "RealFormer 80 s of training and evaluation (compilation included).",
      "| RealFormer | 60.50 ± 0.50 | 3.",
      "Ordering by held-out MLM accuracy: RealFormer 60.50 > Post-LN 50.50 > "
      "Pre-LN 40.50"):
    assert part in text, part


def test_batches_that_differ_are_said_to():
  results = {"post_ln": [_result("post_ln", 0, 0.5, 1.0, "a" * 64)],
             "realformer": [_result("realformer", 0, 0.5, 1.0, "b" * 64)]}
  assert report.batches_line(results) == (
      "Batches: NOT the same for every architecture (seeds 0): the "
      "comparison is not like for like.")


def test_results_md_says_how_often_the_corpus_was_seen():
  # 2,000 steps of 128 over 2,044 sequences (the H200 run of 2026-11-28:
  # training accuracy 65%, held-out 40%): a memorized corpus, said so.
  plan = plan_lib.make_plan(plan_lib.Options(output_dir="o"))
  sequences = data.Sequences(train=np.zeros((2044, 128), np.int32),
                             eval=np.zeros((94, 128), np.int32),
                             vocab=["x"] * 2334, source="the corpus")
  assert report.passes(plan, sequences) == 2000 * 128 / 2044
  assert report.passes_line(plan, sequences).startswith(
      "Data passes: each of the 2044 training sequences was seen about "
      "125.2 times (new masks each time). A corpus this small is memorized")
  with_train = lambda n, length: data.Sequences(
      train=np.zeros((n, length), np.int32), eval=sequences.eval,
      vocab=sequences.vocab, source="the corpus")
  assert report.passes_line(plan, with_train(256000, 128)) == (
      "Data passes: each of the 256000 training sequences was seen about "
      "1.0 times (new masks each time).")
  # Under one pass, the share of a pass (the tiny size: 24 x 8 of 10348).
  tiny = plan_lib.make_plan(plan_lib.Options(output_dir="o", size="tiny"))
  assert report.passes_line(tiny, with_train(10348, 32)) == (
      "Data passes: 192 sequences of the 10348 training sequences, 1.9% of "
      "one pass.")


def test_a_tiny_run_says_it_is_a_check_not_findings():
  """As the tf_keras reproduction (issue 39 item 10): a tiny run's table
  looks like a finding unless the report says what it is."""
  tiny = plan_lib.make_plan(plan_lib.Options(output_dir="o", size="tiny"))
  sequences = data.Sequences(train=np.zeros((125, 32), np.int32),
                             eval=np.zeros((9, 32), np.int32),
                             vocab=["x"] * 70, source="the corpus")
  results = {arch: [_result(arch, 0, 0.15, 5.0)]
             for arch in ("post_ln", "pre_ln", "realformer")}
  text = report.format_results(tiny, sequences, results,
                               tables.summarize_pretraining(results))
  note = report.scale_note(tiny)
  assert note.startswith("Tiny size (2 layers, hidden 32; ") and note.endswith(
      "pre-training steps): a check that the pipeline runs, not the paper's "
      "findings.")
  assert text.split("\n")[2] == f"**{note}**", text
  small = plan_lib.make_plan(plan_lib.Options(output_dir="o"))
  assert report.scale_note(small) is None
