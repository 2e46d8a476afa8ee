"""The GLUE sweep: planning, resuming and the best-median / Overall math."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.data import glue as glue_data
from realformer_tf.training import runs as runs_lib
from realformer_tf.training import seed_stats
from realformer_tf.training import sweep
from tests.helpers import reproduce_inputs
from tests.helpers import serving

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _result(task, epochs, lr, seed, **metrics):
  return {"task": task, "epochs": epochs, "learning_rate": lr, "seed": seed,
          "metrics": metrics}


def _fake_results():
  mrpc_a = [0.80, 0.90, 0.85, 0.70, 0.88]  # median 0.85
  mrpc_b = [0.86, 0.84, 0.87, 0.83, 0.95]  # median 0.86 -> best
  acc_b = [0.70, 0.80, 0.75, 0.60, 0.90]   # median 0.75
  results = {"mrpc": [], "cola": [], "mnli": []}
  for seed in range(5):
    results["mrpc"].append(_result("mrpc", 2, 2e-5, seed, f1=mrpc_a[seed],
                                   accuracy=0.99))
    results["mrpc"].append(_result("mrpc", 3, 3e-5, seed, f1=mrpc_b[seed],
                                   accuracy=acc_b[seed]))
  for seed, mcc in enumerate([0.5, 0.1, 0.3]):
    results["cola"].append(_result("cola", 4, 1e-5, seed,
                                   matthews_corrcoef=mcc))
  for seed, mcc in enumerate([0.2, 0.6, 0.4]):
    results["cola"].append(_result("cola", 2, 5e-5, seed,
                                   matthews_corrcoef=mcc))
  for seed, (m, mm) in enumerate([(0.8, 0.7), (0.9, 0.8)]):
    results["mnli"].append(_result("mnli", 3, 2e-5, seed,
                                   accuracy_matched=m, accuracy_mismatched=mm))
  return results


def test_best_median_std_and_overall():
  summary = seed_stats.summarize(_fake_results())
  mrpc = summary["tasks"]["mrpc"]
  assert mrpc["main_metric"] == "f1"
  best = mrpc["best"]
  assert (best["epochs"], best["learning_rate"]) == (3.0, 3e-5)
  assert best["num_seeds"] == 5 and best["seeds"] == [0, 1, 2, 3, 4]
  assert best["metrics"]["f1"]["median"] == pytest.approx(0.86)
  # Population std (ddof=0) of the five F1s: mean 0.87, squared deviations
  # 1e-4 * (1 + 9 + 0 + 16 + 64) / 5 = 18e-4.
  assert best["metrics"]["f1"]["std"] == pytest.approx(np.sqrt(18e-4))
  assert best["metrics"]["accuracy"]["median"] == pytest.approx(0.75)
  # The other point has the higher accuracy but the lower median F1.
  assert mrpc["score"] == pytest.approx((0.86 + 0.75) / 2)

  cola = summary["tasks"]["cola"]
  assert (cola["best"]["epochs"], cola["best"]["learning_rate"]) == (2, 5e-5)
  assert cola["score"] == pytest.approx(0.4)
  mnli = summary["tasks"]["mnli"]
  assert mnli["main_metric"] == "accuracy_matched"
  assert mnli["best"]["metrics"]["accuracy_mismatched"]["median"] == (
      pytest.approx(0.75))
  assert mnli["score"] == pytest.approx((0.85 + 0.75) / 2)

  # Overall: mean over tasks of the mean within each task.
  assert summary["overall"] == pytest.approx((0.805 + 0.4 + 0.8) / 3)
  assert summary["overall_tasks"] == ["cola", "mnli", "mrpc"]
  assert not summary["complete"]
  text = sweep.format_summary(summary)
  assert "mrpc: best epochs=3 lr=3e-05 by median f1 (5 seeds" in text
  assert "f1:  86.00 (std 4.24)" in text
  assert ("GLUE Overall over cola, mnli, mrpc (not all 8 tasks): 66.83"
          in text)


def test_one_seed_says_so_instead_of_a_zero_std():
  results = {"rte": [_result("rte", 3, 2e-5, 0, accuracy=0.625)]}
  text = sweep.format_summary(seed_stats.summarize(results))
  assert "accuracy:  62.50 (1 seed)" in text, text
  assert "std" not in text, text


def _data_dir(tmp_path, train_size=100):
  data_dir = tmp_path / "records"
  data_dir.mkdir()
  (data_dir / "mrpc_meta_data.json").write_text(json.dumps(
      {"task": "mrpc", "train_data_size": train_size}))
  return str(data_dir)


def _fake_metrics(run):
  config, seed = run.config, run.seed
  lr = config.trainer.optimizer_config.learning_rate.polynomial
  f1 = 0.5 + 1e3 * lr.initial_learning_rate + 0.01 * seed
  return {"eval_logs": {"f1": f1, "accuracy": f1 - 0.1,
                        "validation_loss": 0.3},
          "global_step": config.trainer.train_steps}


def test_plan_kill_and_resume(tmp_path):
  root = str(tmp_path / "runs")
  config, _ = sweep.base_config("mrpc", data_dir=_data_dir(tmp_path))
  assert config.task.train_data.input_path.endswith(
      "records/mrpc_train.tf_record")
  train_size = sweep.num_train_examples(config)
  assert train_size == 100
  runs = sweep.plan_runs("mrpc", root, [2, 3], [1e-5, 2e-5], range(2), config,
                         train_size)
  assert len(runs) == 8
  by_dir = {os.path.relpath(r.model_dir, root): r for r in runs}
  run = by_dir[os.path.join("mrpc", "ep3_lr2e-05", "seed1")]
  assert run.config.trainer.train_steps == 10  # ceil(3 * 100 / 32)
  opt = run.config.trainer.optimizer_config
  assert opt.warmup.polynomial.warmup_steps == 1
  assert opt.learning_rate.polynomial.initial_learning_rate == 2e-5
  assert opt.learning_rate.polynomial.decay_steps == 10
  assert run.config.task.train_data.seed == 1
  assert by_dir[os.path.join("mrpc", "ep2_lr1e-05", "seed0")].config.trainer \
      .train_steps == 7
  assert config.trainer.train_steps == 344  # The base config is untouched.

  calls = []

  def killed_after_three(run):
    if len(calls) == 3:
      raise KeyboardInterrupt("killed")
    calls.append(run.model_dir)
    return _fake_metrics(run)

  with pytest.raises(KeyboardInterrupt):
    runs_lib.execute(runs, runner=killed_after_three)
  assert calls == [r.model_dir for r in runs[:3]]
  assert [runs_lib.status(r) for r in runs] == ["done"] * 3 + ["new"] * 5
  # A run killed after a checkpoint resumes from it.
  tf.train.Checkpoint(step=tf.Variable(3)).save(
      os.path.join(runs[3].model_dir, "ckpt"))
  assert runs_lib.status(runs[3]) == "resume"

  resumed = []

  def runner(run):
    resumed.append(run.model_dir)
    return _fake_metrics(run)

  results = runs_lib.execute(runs, runner=runner)
  assert resumed == [r.model_dir for r in runs[3:]]
  assert [r["seed"] for r in results] == [0, 1] * 4
  stored = runs_lib.read_result(os.path.join(runs[3].model_dir,
                                             sweep.RESULT_FILE))
  assert (stored["epochs"], stored["learning_rate"], stored["seed"]) == (
      2, 2e-5, 1)
  assert stored["metrics"] == pytest.approx({"f1": 0.53, "accuracy": 0.43})
  assert stored["train_steps"] == 7 and stored["warmup_steps"] == 0
  # All done: no runner.
  assert runs_lib.execute(runs, runner=None) == results

  summary = sweep.write_summary(root)
  best = summary["tasks"]["mrpc"]["best"]
  # 2e-5 wins at 2 and 3 epochs alike (median 0.525): ties go to the first.
  assert (best["epochs"], best["learning_rate"]) == (2.0, 2e-5)
  assert best["metrics"]["f1"]["median"] == pytest.approx(0.525)
  assert best["metrics"]["f1"]["std"] == pytest.approx(0.005)
  assert os.path.exists(os.path.join(root, sweep.SUMMARY_FILE))


def test_the_summary_replaces_only_its_own(tmp_path):
  root = str(tmp_path)
  for task, results in _fake_results().items():
    for r in results:
      path = os.path.join(root, task, f"ep{r['epochs']}_lr{r['learning_rate']}",
                          f"seed{r['seed']}", sweep.RESULT_FILE)
      os.makedirs(os.path.dirname(path))
      with open(path, "w") as f:
        json.dump(r, f)
  summary_path = os.path.join(root, sweep.SUMMARY_FILE)
  first = sweep.write_summary(root)
  assert sweep.write_summary(root) == first  # Ours: replaced.
  assert json.load(open(summary_path))["writer"] == sweep.__name__
  with open(summary_path, "w") as f:
    f.write("mine")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{summary_path} exists and no manifest of realformer_tf lists it")):
    sweep.write_summary(root)
  assert open(summary_path).read() == "mine"


def test_errors(tmp_path):
  config, _ = sweep.base_config("mrpc", data_dir=str(tmp_path))
  with pytest.raises(ValueError, match=r"mrpc_meta_data\.json: meta data not "
                     "found"):
    sweep.num_train_examples(config)
  with pytest.raises(ValueError, match="still holds the placeholder"):
    sweep.base_config("mrpc")
  runs = sweep.plan_runs("mrpc", str(tmp_path), [2], [1e-5], [0], config, 10)
  with pytest.raises(ValueError, match="--seeds must be at least 1"):
    sweep.plan_runs("mrpc", str(tmp_path), [2], [1e-5], [], config, 10)

  def no_f1(run):
    del run
    return {"eval_logs": {"accuracy": 0.5}}

  with pytest.raises(ValueError, match=r"the evaluation reported no \['f1'\]"):
    runs_lib.execute(runs, runner=no_f1)
  assert not os.path.exists(runs[0].result_path)  # Nothing half-written.
  bad = tmp_path / "bad.json"
  bad.write_text("{\n  \"task\": ")
  with pytest.raises(ValueError, match=r"bad\.json:2: not valid JSON"):
    runs_lib.read_result(str(bad))


def _mrpc_records(tmp_path, max_seq_length):
  """Converted MRPC records (40 handmade pairs, a handmade vocabulary)."""
  glue_dir = str(tmp_path / "glue")
  if not os.path.exists(glue_dir):
    reproduce_inputs.write_mrpc(glue_dir, rows=40)
  out = str(tmp_path / f"records{max_seq_length}")
  glue_data.convert("mrpc", serving.write_vocab(str(tmp_path / "vocab.txt")),
                    out, max_seq_length=max_seq_length, glue_dir=glue_dir)
  return out


def test_plan_is_checked_as_its_runs_check_themselves(tmp_path):
  """Issue 39: the README's sweep promised 105 runs that each stopped at
  once: its records (length 64) were not of the config's length (128)."""
  records = _mrpc_records(tmp_path, 64)
  config, _ = sweep.base_config("mrpc", data_dir=records)
  planned = sweep.plan_runs("mrpc", str(tmp_path / "runs"), [2], [2e-5],
                            range(2), config, 40)
  with pytest.raises(ValueError, match=r"seq_length.*128.*64|64.*128"):
    sweep.check_runs(planned)
  config, _ = sweep.base_config(
      "mrpc", params_override="task.train_data.seq_length=64,"
      "task.validation_data.seq_length=64", data_dir=records)
  sweep.check_runs(sweep.plan_runs("mrpc", str(tmp_path / "runs"), [2],
                                   [2e-5], range(2), config, 40))
  assert not (tmp_path / "runs").exists()  # Checks write nothing.


def test_init_warning_names_the_random_encoder(tmp_path):
  config, _ = sweep.base_config("mrpc", data_dir=_data_dir(tmp_path))
  warning = sweep.init_warning(config)
  assert warning.startswith(
      "WARNING: no task.init_checkpoint: every run fine-tunes a randomly "
      "initialised encoder (12 layers, hidden 768)"), warning
  config.task.init_checkpoint = "/runs/pretrained"
  assert sweep.init_warning(config) is None


def test_cli_dry_run(tmp_path):
  data_dir = _mrpc_records(tmp_path, 128)
  root = tmp_path / "runs"
  out = subprocess.run(
      [sys.executable, "-m", "realformer_tf.training.sweep", "--task=mrpc",
       f"--model_dir_root={root}", f"--data_dir={data_dir}", "--seeds=2",
       "--epochs=20,30", "--learning_rates=2e-5", "--dry_run",
       "--params_override=task.model.encoder.any.residual_attention=none"],
      cwd=_REPO, capture_output=True, text=True, timeout=240, check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  warning, *lines = out.stdout.strip().split("\n")
  assert warning.startswith("WARNING: no task.init_checkpoint"), warning
  # 40 train pairs, batch 32: ceil(20 * 40 / 32) = 25, ceil(30 * 40 / 32).
  assert lines[-1] == ("4 runs (40 train examples, batch 32); "
                       f"{2 * 25 + 2 * 38} training steps left to run.")
  assert lines[0].split() == [
      "new", str(root / "mrpc" / "ep20_lr2e-05" / "seed0"), "steps=25",
      "warmup=2", "lr=2e-05", "seed=0"]
  assert "steps=38" in lines[2] and "warmup=3" in lines[2]
  assert not root.exists()  # A dry run writes nothing.
