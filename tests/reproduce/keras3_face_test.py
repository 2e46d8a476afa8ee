"""The keras3 face's models (one initialisation for all), its optimizer
schedule, its checkpoint file (read once per pre-training run), its GLUE
files (read once), and its lines of the report."""
import collections
import os
import types

import keras
import numpy as np
import pytest

from realformer_tf.data import wordpiece
from realformer_tf.reproduce import keras3_data as data
from realformer_tf.reproduce import keras3_face as train
from realformer_tf.reproduce import keras3_glue
from realformer_tf.reproduce import plan as plan_lib
from tests.helpers import reproduce_inputs

TINY = plan_lib.SIZES["tiny"]
ARCHS = ("post_ln", "pre_ln", "realformer")


def _values(model):
  return {v.path: np.asarray(v.value) for v in model.weights
          if "seed_generator" not in v.path}


def test_every_architecture_starts_from_the_same_weights():
  models = {arch: train.build_models(TINY, arch, 40, "float32", seed=0)
            for arch in ARCHS}
  post_ln = _values(models["post_ln"][0])
  for arch, (model, copied) in models.items():
    values = _values(model)
    assert copied["own"] == ([] if arch != "pre_ln" else
                             ["final_layer_norm/gamma",
                              "final_layer_norm/beta"])
    assert sorted(copied["shared"]) == sorted(post_ln)
    for path in copied["shared"]:
      np.testing.assert_array_equal(values[path], post_ln[path], path)
  # What is shared is this seed's draw, not a constant.
  other, _ = train.build_models(TINY, "realformer", 40, "float32", seed=1)
  for path in ("token_embedding/embeddings",
               "transformer_layer_0/self_attention/query/kernel",
               "mlm_head/intermediate_dense/kernel"):
    assert np.abs(_values(other)[path] - post_ln[path]).max() > 1e-3, path


def test_the_learning_rate_warms_up_then_decays_to_zero():
  lr = train.learning_rate(TINY, train_steps=100)
  rates = [float(lr(step)) for step in (0, 5, 10, 55, 100)]
  assert rates[0] == 0.0 and rates[1] == pytest.approx(TINY.learning_rate / 2)
  assert rates[2] == pytest.approx(TINY.learning_rate)
  assert rates[3] == pytest.approx(TINY.learning_rate / 2, rel=1e-3)
  assert rates[4] == pytest.approx(0.0, abs=1e-9)
  optimizer = train.make_optimizer(TINY, train_steps=100)
  assert optimizer.weight_decay == 0.01 and optimizer.global_clipnorm == 1.0
  # realformer_2xlr: the same schedule at twice the peak.
  double = train.learning_rate(TINY, train_steps=100, multiplier=2.0)
  assert float(double(10)) == pytest.approx(2 * TINY.learning_rate)


def test_a_checkpoint_round_trips_and_refuses_another_model(tmp_path):
  path = str(tmp_path / "checkpoint.npz")
  state = ([np.arange(6, dtype=np.float32).reshape(2, 3)],
           [np.array([7, 8], np.uint32)], [np.float32(3.0)])
  train.save_checkpoint(path, state, {"step": 4, "digest": "ab"})
  values, meta = train.load_checkpoint(path, state)
  assert meta == {"step": 4, "digest": "ab"}
  for loaded, saved in zip(values, state):
    for a, b in zip(loaded, saved):
      np.testing.assert_array_equal(np.asarray(a), b)
      assert np.asarray(a).dtype == np.asarray(b).dtype
  other = ([np.zeros((3, 3), np.float32)],) + state[1:]
  with pytest.raises(ValueError, match=r"value t0 is \(2, 3\), the model "
                     r"needs \(3, 3\)"):
    train.load_checkpoint(path, other)
  assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]


def test_fine_tuning_starts_from_the_pretrained_checkpoint_read_once(
    tmp_path, monkeypatch):
  # A "pre-trained" model: seed 1's draw; fine-tuning builds seed 0's first.
  pretrained = train.build_model(TINY, "realformer", 40, "float32", seed=1)
  state = ([v.value for v in pretrained.trainable_variables],
           [v.value for v in pretrained.non_trainable_variables], [])
  path = str(tmp_path / train.CHECKPOINT_FILE)
  train.save_checkpoint(path, state, {})
  plan = types.SimpleNamespace(size=TINY, data={"vocab_size": 40},
                               options=plan_lib.Options(output_dir="unused"))
  reads = []
  load = train.load_checkpoint
  monkeypatch.setattr(train, "load_checkpoint",
                      lambda *a: reads.append(a[0]) or load(*a))
  backbone = train.pretrained_backbone(plan, "realformer", 0, str(tmp_path))
  expected = _values(pretrained.backbone)
  assert sorted(_values(backbone)) == sorted(expected)
  for name, value in _values(backbone).items():
    np.testing.assert_array_equal(value, expected[name], name)
  # Every grid point of this run: the same loaded backbone, read once
  # (`keras3_glue.finetune` copies its values and never writes them).
  for _ in range(3):
    assert train.pretrained_backbone(plan, "realformer", 0,
                                     str(tmp_path)) is backbone
  assert reads == [path]
  # A rewritten checkpoint (a newer pre-training) is read again.
  train.save_checkpoint(path, state, {})
  os.utime(path, (1, 1))
  assert train.pretrained_backbone(plan, "realformer", 0,
                                   str(tmp_path)) is not backbone
  assert reads == [path, path]


def test_a_glue_tsv_is_read_once_to_count_and_pack(tmp_path, monkeypatch):
  glue_dir = str(tmp_path / "glue")
  reproduce_inputs.write_mrpc(glue_dir, rows=12)
  opened = collections.Counter()
  monkeypatch.setattr(train, "open_file", lambda path, *a: opened.update(
      [os.path.basename(path)]) or open(path, *a))
  keras3_glue.read_task.cache_clear()
  options = plan_lib.Options(output_dir="o", glue_dir=glue_dir,
                             glue_tasks=("mrpc",))
  assert train.glue_sizes(options, TINY) == ({"mrpc": 12}, {})
  splits = keras3_glue.packed(glue_dir, "mrpc", 16, wordpiece.RESERVED_TOKENS,
                              train.open_file)
  assert [len(splits[s]["labels"]) for s in ("train", "dev")] == [12, 12]
  assert opened == {"train.tsv": 1, "dev.tsv": 1}


def test_auto_policy_is_float32_on_a_cpu():
  assert train.resolve_policy("auto") == "float32"
  assert train.resolve_policy("mixed_bfloat16") == "mixed_bfloat16"


@pytest.mark.skipif(keras.config.backend() == "jax", reason="JAX trains")
def test_another_backend_is_refused_by_name():
  with pytest.raises(ValueError, match="backend is 'tensorflow': set "
                     "KERAS_BACKEND=jax"):
    keras3_glue.check_backend()


def _plan(size="small", seeds=1):
  return plan_lib.make_plan(plan_lib.Options(output_dir="o", size=size,
                                             seeds=seeds), train)


def _result(arch, seed, digest=None):
  return {"arch": arch, "seed": seed, "batch_digest": digest or
          f"{seed:02d}" * 32, "device": "NVIDIA H200",
          "dtype_policy": "mixed_bfloat16"}


def _sequences(train_rows, length=128):
  return data.Sequences(train=np.zeros((train_rows, length), np.int32),
                        eval=np.zeros((94, length), np.int32),
                        vocab=["x"] * 2334, source="the corpus")


def test_report_lines_say_how_it_ran():
  plan = _plan(seeds=2)
  plan.data["sequences"] = _sequences(2044)
  results = {arch: [_result(arch, s) for s in (0, 1)] for arch in ARCHS}
  lines = train.report_lines(plan, results)
  assert lines[1] == (
      "Batches: the same for every architecture (SHA-256 of the masked "
      "batches, seed 0: `000000000000`, seed 1: `010101010101`).")
  assert lines[3].startswith("Held-out: 94 sequences")
  assert lines[4] == "Ran on NVIDIA H200 (mixed_bfloat16)."
  results["realformer"][0] = _result("realformer", 0, "b" * 64)
  assert train.batches_line(results) == (
      "Batches: NOT the same for every architecture (seeds 0): the "
      "comparison is not like for like.")


def test_the_report_says_how_often_the_corpus_was_seen():
  # 2,000 steps of 128 over 2,044 sequences (the H200 run of 2026-11-28:
  # training accuracy 65%, held-out 40%): a memorized corpus, said so.
  plan = _plan()
  sequences = _sequences(2044)
  assert data.passes(plan, sequences) == 2000 * 128 / 2044
  assert data.passes_line(plan, sequences).startswith(
      "Data passes: each of the 2044 training sequences was seen about "
      "125.2 times (new masks each time). A corpus this small is memorized")
  plan.data["sequences"] = sequences
  assert train.figure_notes(plan) == [
      "125 passes over 2044 training sequences: a small corpus, memorized"]
  assert data.passes_line(plan, _sequences(256000)) == (
      "Data passes: each of the 256000 training sequences was seen about "
      "1.0 times (new masks each time).")
  # Under one pass, the share of a pass (the tiny size: 24 x 8 of 10348).
  assert data.passes_line(_plan("tiny"), _sequences(10348, 32)) == (
      "Data passes: 192 sequences of the 10348 training sequences, 1.9% of "
      "one pass.")
