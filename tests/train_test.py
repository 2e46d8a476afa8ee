"""train.py as a user runs it: the unknown-experiment error, the quickstart
end to end, SIGKILL and resume, distribution (one device vs mirrored).

Each test runs train.py (or tests/helpers/distributed_loss_worker.py) in a
subprocess; train_lib's in-process tests are in tests/training/. All models
are tiny (hidden 16-32, 1-2 layers, seq 16-32).
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.training import train_lib
from tests.helpers import shared_data
from tests.helpers import train_runs as utils


def test_unknown_experiment_from_the_command_line(tmp_path):
  model_dir = tmp_path / "model"
  proc = utils.run_train(str(model_dir), experiment="realformer/pretrain")
  assert proc.returncode != 0
  # The message, not the source line that Python 3.13's traceback also
  # prints (`f"Unknown --experiment={name!r}; ..."`).
  (line,) = [l for l in proc.stderr.splitlines()
             if "Unknown --experiment='realformer/pretrain'" in l]
  assert "; registered RealFormer experiments: " in line
  listed = line.split("experiments: ")[1].rstrip(".").split(", ")
  assert {experiments.PRETRAINING, experiments.QUICKSTART} <= set(listed)
  assert not model_dir.exists()
  # Issue 38 item 12: a refusal is its message alone, the last line.
  assert "Traceback" not in proc.stderr
  assert proc.stderr.rstrip("\n").splitlines()[-1] == line
  # --traceback shows where it was raised too, the message still last.
  proc = utils.run_train(str(model_dir), experiment="realformer/pretrain",
                         extra=["--traceback"])
  assert proc.returncode == 1
  assert "Traceback (most recent call last):" in proc.stderr
  assert proc.stderr.rstrip("\n").splitlines()[-1] == line


# --------------------------------------------------------------------------
# Quickstart, end to end.
# --------------------------------------------------------------------------


def _quickstart_text(path, max_lines=400):
  """A few WikiText-2 paragraphs in BERT format (sentences, blank lines).

  The shared WikiText-2 valid file, or its handmade stand-in in the same
  format (`tests/helpers/shared_data.py`).
  """
  source, _ = shared_data.real_or_fixture(shared_data.WIKITEXT_VALID)
  lines = []
  with open(source, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line or line.startswith("="):
        if lines and lines[-1]:
          lines.append("")
        continue
      lines.extend(s.strip() + " ." for s in line.split(" . ") if s.strip())
      if len(lines) >= max_lines:
        break
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def test_quickstart_builds_its_data_and_trains(tmp_path):
  text = _quickstart_text(str(tmp_path / "text.txt"))
  small = utils.write_quickstart_yaml(
      str(tmp_path / "small.yaml"), vocab_size=300, width=32, seq_length=32,
      max_predictions=5, batch=8, trainer={
          "train_steps": 8, "steps_per_loop": 4, "summary_interval": 4,
          "checkpoint_interval": 4, "validation_interval": 8,
          "optimizer_config": {
              "learning_rate": {"polynomial": {"decay_steps": 8}},
              "warmup": {"polynomial": {"warmup_steps": 2}}}})
  model_dir = tmp_path / "quickstart"
  proc, exit_delay = utils.run_train_timing_exit(
      str(model_dir), [small], experiment=experiments.QUICKSTART,
      mode="train_and_eval", extra=[f"--quickstart_input_files={text}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  # It ends with its summary (Python's finalization, skipped, could sit idle
  # for a minute).
  assert exit_delay < 2.5, exit_delay

  data_dir = model_dir / "data"
  with open(data_dir / "manifest.json") as f:
    counts = json.load(f)["counts"]
  with open(data_dir / "vocab.txt") as f:
    vocab_size = len(f.read().splitlines())
  assert counts["vocab_size"] == vocab_size <= 300
  params = run_directory.load_experiment_config(str(model_dir))
  assert params.task.name == experiments.QUICKSTART
  assert params.task.train_data.input_path == str(data_dir / "train.tfrecord")
  assert params.task.validation_data.input_path == str(
      data_dir / "eval.tfrecord")
  assert params.task.vocab_file == str(data_dir / "vocab.txt")
  assert params.task.model.encoder.any.vocab_size == vocab_size

  # Progress on the console: step, loss, MLM accuracy, throughput.
  out = proc.stdout
  # Orbit's progress line; its column padding is Orbit's, not asserted.
  progress = re.compile(r"train \| step: +4 \| steps/sec:")
  assert progress.search(out), out[-2000:]
  for key in ("training_loss", "masked_lm_accuracy", "examples_per_second",
              "learning_rate"):
    assert f"'{key}'" in out, key
  final = [l for l in out.splitlines() if l.startswith("final eval | step: 8")]
  assert final and "masked_lm_accuracy: " in final[0], out[-2000:]
  accuracy = float(final[0].split("masked_lm_accuracy: ")[1].split()[0])
  assert 0.0 <= accuracy <= 1.0
  # TensorBoard summaries and checkpoints.
  assert tf.io.gfile.glob(str(model_dir / "train" / "events.out.tfevents.*"))
  assert tf.io.gfile.glob(
      str(model_dir / "validation" / "events.out.tfevents.*"))
  assert run_directory.checkpoint_step(tf.train.latest_checkpoint(
      str(model_dir))) == 8
  # Each progress block once (Orbit logs and prints it; the absl copy goes).
  assert len(progress.findall(proc.stdout + proc.stderr)) == 1
  # The closing lines: what was reached against what, speed, where things are.
  assert "Held-out masked-LM accuracy: " in out
  assert f"Chance (uniform over the {vocab_size}-token vocabulary)" in out
  assert "always predicting the most frequent masked token" in out
  assert "Speed: 8 training steps in " in out and "examples/s" in out
  assert (f"Checkpoint: {model_dir}/ckpt-8; config: {model_dir}/params.yaml; "
          f"TensorBoard: tensorboard --logdir {model_dir}") in out


# --------------------------------------------------------------------------
# SIGKILL and resume.
# --------------------------------------------------------------------------


def _latest_step(model_dir) -> int:
  latest = tf.train.latest_checkpoint(str(model_dir))
  return run_directory.checkpoint_step(latest) if latest else 0


def _start(model_dir, config):
  return subprocess.Popen(
      utils.train_command(str(model_dir), [config]), cwd=utils.REPO_ROOT,
      env=utils.subprocess_env(), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)


def _kill_after_checkpoint_beyond(proc, model_dir, step, rng, timeout=180):
  """SIGKILLs `proc` at a random moment after a checkpoint past `step`."""
  deadline = time.time() + timeout
  while _latest_step(model_dir) <= step:
    assert proc.poll() is None, (
        "train.py ended before it could be killed:\n" +
        proc.stdout.read()[-3000:])
    assert time.time() < deadline, "no new checkpoint in time"
    time.sleep(0.05)
  time.sleep(rng.uniform(0.0, 0.3))
  assert proc.poll() is None, "train.py finished before the kill"
  proc.send_signal(signal.SIGKILL)
  output = proc.communicate(timeout=60)[0]
  assert proc.returncode == -signal.SIGKILL
  return output


def test_sigkill_then_rerun_resumes_and_stops_at_train_steps(tmp_path):
  train_steps = 400
  # One layer: what is killed and resumed does not depend on depth, and each
  # of the four train.py processes builds and traces the model again.
  run = utils.make_tiny_run(
      tmp_path, train_steps=train_steps, steps_per_loop=5,
      checkpoint_interval=10, batch_size=4, num_train=32, num_layers=1)
  model_dir = tmp_path / "model"
  rng = random.Random(os.getpid())

  killed = _start(model_dir, run["config_file"])
  _kill_after_checkpoint_beyond(killed, model_dir, 0, rng)
  first = _latest_step(model_dir)
  assert 0 < first < train_steps
  # The killed run's lock is left behind; the reruns take it over.
  with open(model_dir / run_directory.LOCK_FILE) as f:
    assert json.load(f)["pid"] == killed.pid

  output = _kill_after_checkpoint_beyond(
      _start(model_dir, run["config_file"]), model_dir, first, rng)
  assert f"restored from checkpoint: {model_dir}/ckpt-{first}" in output
  assert re.search(rf"train \| step: +{first} \| training until step "
                   rf"{train_steps}\b", output)
  second = _latest_step(model_dir)
  assert first < second < train_steps

  proc = utils.run_train(str(model_dir), [run["config_file"]])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (f"Took over {model_dir / run_directory.LOCK_FILE} from pid " in
          proc.stderr), proc.stderr[-3000:]
  assert not (model_dir / run_directory.LOCK_FILE).exists()
  assert f"restored from checkpoint: {model_dir}/ckpt-{second}" in proc.stdout
  assert re.search(rf"train \| step: +{second} \| training until step "
                   rf"{train_steps}\b", proc.stdout)
  assert _latest_step(model_dir) == train_steps
  assert os.path.basename(tf.train.latest_checkpoint(str(model_dir))) == (
      f"ckpt-{train_steps}")
  # Every listed checkpoint is complete: all its tensors read back.
  listed = utils.list_checkpoints(str(model_dir))
  assert 1 <= len(listed) <= 3  # max_to_keep
  for path in listed:
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
    assert int(path.rsplit("-", 1)[1]) == run_directory.checkpoint_step(path)

  # A rerun after completion trains no further (with a --gin_file, which
  # train.py parses and records as Model Garden's train.py does).
  gin_file = tmp_path / "empty.gin"
  gin_file.write_text("# No bindings.\n")
  (model_dir / "operative_config.train.gin").unlink()
  proc = utils.run_train(str(model_dir), [run["config_file"]],
                         extra=[f"--gin_file={gin_file}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (model_dir / "operative_config.train.gin").exists()
  assert (f"already complete at step {train_steps} (trainer.train_steps="
          f"{train_steps}): nothing to do." in proc.stdout)
  assert "steps/sec" not in proc.stdout
  assert "Unresolved object in checkpoint" not in proc.stderr
  assert _latest_step(model_dir) == train_steps


def test_sigterm_ends_the_run_in_one_line_and_a_rerun_resumes(tmp_path):
  """Issue 30 item 5: SIGTERM (a scheduler, `kill`) ended a run with exit 143
  and not a word, its lock left behind. Now it also saves the step it
  stopped at (between two periodic saves) and a rerun resumes from there."""
  text = _quickstart_text(str(tmp_path / "text.txt"), max_lines=120)
  tiny = utils.write_quickstart_yaml(
      str(tmp_path / "tiny.yaml"), vocab_size=200, width=16, seq_length=16,
      max_predictions=3, batch=4,
      # Long enough not to end before the signal; saves every 3 loops, so
      # that the stop mostly falls between two saves.
      trainer={"train_steps": 100000, "steps_per_loop": 2,
               "summary_interval": 2, "checkpoint_interval": 6,
               "validation_interval": 100000, "validation_steps": 1})
  model_dir = tmp_path / "run"
  command = utils.train_command(
      str(model_dir), [tiny], experiment=experiments.QUICKSTART,
      mode="train_and_eval", extra=[f"--quickstart_input_files={text}"])
  proc = subprocess.Popen(command, cwd=utils.REPO_ROOT,
                          env=utils.subprocess_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  # Generous: CI runs this beside another worker on 2 cores.
  deadline = time.time() + 420
  while not _latest_step(model_dir):
    assert proc.poll() is None, proc.stdout.read()[-3000:]
    assert time.time() < deadline, "no checkpoint in time"
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  output = proc.communicate(timeout=240)[0]
  assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
  latest = tf.train.latest_checkpoint(str(model_dir))
  step = run_directory.checkpoint_step(latest)
  (line,) = [l for l in output.splitlines() if l.startswith("stopped at ")]
  match = re.fullmatch(r"stopped at step (\d+) by SIGTERM; latest "
                       r"checkpoint: (\S+) \(step (\d+)\)\.", line)
  assert match, line
  assert (match.group(2), int(match.group(3))) == (latest, step)
  # The stopped step is saved, not only the last periodic checkpoint's.
  assert int(match.group(1)) == step > 0, (line, output[-3000:])
  assert f"saved checkpoint to {latest}." in output, output[-3000:]
  assert "Traceback" not in output
  assert not (model_dir / run_directory.LOCK_FILE).exists()

  # The same command resumes from that checkpoint. Issue 39 item 10: a
  # SIGTERM waited for the end of the train loop (`steps_per_loop` steps in
  # one TensorFlow call); with a loop of 10**6 steps (an hour here) it now
  # stops at the next step, saved.
  whole = 10 ** 6
  proc = subprocess.Popen(
      utils.train_command(
          str(model_dir), [tiny], experiment=experiments.QUICKSTART,
          mode="train", extra=[
              f"--quickstart_input_files={text}",
              "--params_override=" + ",".join(
                  f"trainer.{key}={whole}" for key in (
                      "train_steps", "steps_per_loop", "summary_interval",
                      "checkpoint_interval", "validation_interval"))]),
      cwd=utils.REPO_ROOT, env=utils.subprocess_env(), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True)
  lines = []
  for line in proc.stdout:
    lines.append(line)
    if "training until step" in line:
      break
  assert f"restored from checkpoint: {latest}" in "".join(lines), lines
  time.sleep(5)  # Inside the loop (or still tracing it: then no step).
  proc.send_signal(signal.SIGTERM)
  output = "".join(lines) + proc.communicate(timeout=240)[0]
  assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
  (line,) = [l for l in output.splitlines() if l.startswith("stopped at ")]
  stopped = int(re.match(r"stopped at step (\d+) by SIGTERM", line).group(1))
  assert step <= stopped < whole, line
  assert _latest_step(model_dir) == stopped, (line, output[-3000:])


# --------------------------------------------------------------------------
# Distribution: same losses as one device.
# --------------------------------------------------------------------------


def _worker_command(config, init, output, strategies, write_init=False):
  return [sys.executable, "-m", "tests.helpers.distributed_loss_worker",
          f"--config_file={config}", f"--init_checkpoint={init}",
          f"--strategies={strategies}", f"--output={output}", "--steps=3"] + (
              ["--write_init"] if write_init else [])


@pytest.fixture(scope="module")
def one_device_and_mirrored(tmp_path_factory):
  """Per-step losses on one device and on 2 mirrored logical CPUs."""
  tmp_path = tmp_path_factory.mktemp("mirrored")
  # scale_loss: each replica's gradient is divided by the replica count, so
  # the all-reduced (summed) gradient is the one-device mean gradient. (Model
  # Garden's default, False, sums replica gradients: N times larger.)
  # SGD: Adam's first steps divide each gradient coordinate by its own size,
  # so float-rounding differences in near-zero coordinates flip whole
  # updates and the runs drift apart by ~1e-3 within 3 steps; SGD keeps the
  # comparison at rounding level.
  run = utils.make_tiny_run(tmp_path, dropout=0.0, train_steps=3,
                            scale_loss=True, sgd=True, learning_rate=0.5)
  init = str(tmp_path / "init")
  output = str(tmp_path / "losses.json")
  proc = subprocess.run(
      _worker_command(run["config_file"], init, output,
                      "one_device,mirrored", write_init=True),
      cwd=utils.REPO_ROOT, env=utils.subprocess_env(), capture_output=True,
      text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(output) as f:
    return dict(json.load(f), config=run["config_file"], init=init,
                tmp_path=tmp_path)


def test_mirrored_strategy_matches_one_device(one_device_and_mirrored):
  one = one_device_and_mirrored["one_device"]
  mirrored = one_device_and_mirrored["mirrored"]
  assert (one["num_replicas"], mirrored["num_replicas"]) == (1, 2)
  assert one["global_step"] == mirrored["global_step"] == 3
  # Same weights, same examples, no dropout, mean gradients: the same losses
  # up to float rounding (reduction order).
  np.testing.assert_allclose(mirrored["losses"], one["losses"], rtol=1e-4)
  assert len(set(np.round(one["losses"], 4))) == 3  # It did train.


def test_multi_worker_mirrored_matches_one_device(one_device_and_mirrored):
  ref = one_device_and_mirrored
  tmp_path = ref["tmp_path"]
  workers = utils.local_cluster(2)
  procs = []
  for index in range(2):
    tf_config = utils.tf_config(workers, index)
    procs.append(subprocess.Popen(
        _worker_command(ref["config"], ref["init"],
                        str(tmp_path / f"worker{index}.json"),
                        "multi_worker_mirrored"),
        cwd=utils.REPO_ROOT, env=utils.subprocess_env({"TF_CONFIG": tf_config}),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  try:
    outputs = [p.communicate(timeout=300)[0] for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  for p, out in zip(procs, outputs):
    assert p.returncode == 0, out[-3000:]
  one = ref["one_device"]
  for index in range(2):
    with open(tmp_path / f"worker{index}.json") as f:
      worker = json.load(f)["multi_worker_mirrored"]
    assert worker["num_replicas"] == 2
    assert worker["global_step"] == 3
    np.testing.assert_allclose(worker["losses"], one["losses"], rtol=1e-4)


# --------------------------------------------------------------------------
# Bad values and damaged checkpoints: one line, exit 1 (issue 46).
# --------------------------------------------------------------------------


def _refusal_line(proc):
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return proc.stderr.rstrip("\n").splitlines()[-1]


@pytest.mark.parametrize("override, line", [
    ("trainer.optimizer_config.learning_rate.polynomial."
     "initial_learning_rate=1e300",
     "Config values out of range: trainer.optimizer_config.learning_rate."
     "polynomial.initial_learning_rate=1e+300 must be a finite number in "
     "float32 (at most 3.4e+38)."),
    ("task.model.encoder.any.hidden_size=0",
     "Config values out of range: task.model.encoder.any.hidden_size=0 must "
     "be positive."),
])
def test_a_bad_value_is_refused_before_anything_is_written(tmp_path, override,
                                                           line):
  """Before: the quickstart's data was built and params.yaml written, then
  Keras failed ("Can't convert Python sequence ...", "hidden_size must be a
  positive int")."""
  model_dir = tmp_path / "model"
  proc = utils.run_train(str(model_dir), experiment=experiments.QUICKSTART,
                         extra=[f"--params_override={override}"])
  assert _refusal_line(proc) == line
  assert not model_dir.exists()


def test_a_damaged_checkpoint_names_the_one_to_use(tmp_path):
  """A data file cut by 1 byte or 20 kB (less than the object graph, which
  the length check left out: a 214-line `IndexError: Read less bytes than
  requested`), or a flipped byte in a weight (a raw DataLossError)."""
  text = _quickstart_text(str(tmp_path / "text.txt"), max_lines=100)
  small = utils.write_quickstart_yaml(
      str(tmp_path / "small.yaml"), vocab_size=300, width=32, seq_length=32,
      max_predictions=5, batch=8, trainer={
          "train_steps": 4, "steps_per_loop": 2, "summary_interval": 2,
          "checkpoint_interval": 2, "validation_interval": 4,
          "max_to_keep": 5, "optimizer_config": {
              "learning_rate": {"polynomial": {"decay_steps": 4}},
              "warmup": {"polynomial": {"warmup_steps": 1}}}})
  run = tmp_path / "run"
  proc = utils.run_train(str(run), [small], experiment=experiments.QUICKSTART,
                         extra=[f"--quickstart_input_files={text}"])
  assert proc.returncode == 0, proc.stderr[-3000:]
  reader = tf.train.load_checkpoint(str(run / "ckpt-4"))
  weight = reader.get_tensor(
      "encoder/_transformer_layers/0/_intermediate_dense/kernel/"
      ".ATTRIBUTES/VARIABLE_VALUE").tobytes()
  for damage, mode in (("cut 1", "eval"), ("cut 20000", "train"),
                       ("flip", "eval")):
    copy = tmp_path / damage.replace(" ", "_")
    shutil.copytree(run, copy)
    data = copy / "ckpt-4.data-00000-of-00001"
    content = bytearray(data.read_bytes())
    if damage == "flip":
      content[content.find(weight) + 10] ^= 0xFF
    else:
      del content[-int(damage.split()[1]):]
    data.write_bytes(bytes(content))
    proc = utils.run_train(str(copy), [small], mode=mode,
                           experiment=experiments.QUICKSTART,
                           extra=[f"--quickstart_input_files={text}"])
    line = _refusal_line(proc)
    assert f"{copy}/ckpt-4" in line and (
        "is damaged" if damage == "flip" else "is not whole") in line, line
    older = str(copy / "ckpt-2")
    assert f"update_checkpoint_state({str(copy)!r}, {older!r})" in line, line
  # Export from the run reads the same checkpoint: the same answer.
  proc = subprocess.run(
      [sys.executable, "-m", "realformer_tf.serving.export",
       f"--model_dir={copy}", f"--export_dir={tmp_path / 'export'}"],
      cwd=utils.REPO_ROOT, env=utils.subprocess_env(), capture_output=True,
      text=True, timeout=600, check=False)
  assert _refusal_line(proc) == line
  assert not (tmp_path / "export").exists()
