"""A killed reproduction on the keras3 face resumes at its checkpoint's exact step and
ends where an uninterrupted one does (its attention analysis too, kept by a
rerun); one writer per output dir."""
import json
import os

import numpy as np
import pytest

from realformer_tf.core import run_lock
from realformer_tf.reproduce import keras3_face
from realformer_tf.reproduce import plan as plan_lib
from tests.helpers import keras3_reproduction
from tests.helpers import kill_writer


def test_a_killed_run_resumes_at_its_checkpoint_and_ends_the_same(
    tiny_reproduction, tmp_path, monkeypatch):
  corpus = keras3_reproduction.write_corpus(str(tmp_path))
  out = str(tmp_path / "out")
  for name, value in keras3_reproduction.jax_env().items():
    monkeypatch.setenv(name, value)
  # Renames into place: vocab.txt, sequences.npz, data.json (their set),
  # the checkpoints of steps 6 and 12: killed before the 5th, with step 12
  # trained, not saved.
  kill_writer.run_killed(
      5, "realformer_tf.reproduce.run", "reproduce", output_dir=out,
      face="keras3", size="tiny", seeds=1, archs=["realformer"],
      corpus=[corpus],
      train_steps=keras3_reproduction.TRAIN_STEPS, checkpoint_steps=6)
  run_dir = plan_lib.run_dir(out, "realformer", 0)
  with np.load(os.path.join(run_dir, keras3_face.CHECKPOINT_FILE)) as npz:
    assert json.loads(bytes(npz["meta"]))["step"] == 6
  assert not os.path.exists(os.path.join(run_dir, plan_lib.RESULT_FILE))
  assert [n for n in os.listdir(run_dir) if ".tmp-" in n]  # The killed write.

  resumed = keras3_reproduction.run_command(out, corpus, "--archs=realformer",
                                            "--checkpoint_steps=6")
  assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-5000:]
  assert "realformer seed 0: resuming at step 6" in resumed.stdout
  assert "step 9/12" in resumed.stdout and "step 6/12" not in resumed.stdout
  assert not [n for n in os.listdir(run_dir) if ".tmp-" in n]
  with open(os.path.join(run_dir, plan_lib.RESULT_FILE)) as f:
    result = json.load(f)
  # The same corpus, uninterrupted, in the shared tiny run: bit-identical.
  with open(os.path.join(plan_lib.run_dir(tiny_reproduction[0], "realformer",
                                         0), plan_lib.RESULT_FILE)) as f:
    uninterrupted = json.load(f)
  assert result["global_step"] == 12
  # The pre-training run, then its MRPC and SQuAD fine-tuning runs.
  assert "[1/3] " + run_dir + ": resume (pre-train" in resumed.stdout
  for key in ("eval_logs", "curves", "batch_digest", "initialization"):
    assert result[key] == uninterrupted[key], key
  # Its attention analysis too; a rerun keeps it (this run's config).
  summaries = []
  for root in (out, tiny_reproduction[0]):
    with open(os.path.join(root, "analysis", "realformer",
                           "summary.json")) as f:
      summaries.append(json.load(f)["models"][0])
  for key in ("num_tokens", "entropy", "jsd", "score_magnitude"):
    assert summaries[0][key] == summaries[1][key], key
  again = keras3_reproduction.run_command(out, corpus, "--archs=realformer",
                                          "--checkpoint_steps=6")
  assert again.returncode == 0, (again.stdout + again.stderr)[-5000:]
  assert "attention analysis of realformer seed 0: done" in again.stdout
  # Its checkpoint continues no run of another length.
  longer = keras3_reproduction.run_command(out, corpus, "--archs=realformer",
                                           "--train_steps=13")
  assert longer.returncode != 0
  assert "checkpoint.npz is a checkpoint of another run" in longer.stderr


def test_a_second_writer_is_refused(tmp_path):
  """The one lock (`core.run_lock`): the holder named, released after."""
  def hold():
    return run_lock.hold(str(tmp_path), name=plan_lib.LOCK_FILE,
                         flag="--output_dir")
  with hold():
    with pytest.raises(run_lock.ModelDirBusyError,
                       match=f"--output_dir={tmp_path} is in use by another "
                       rf"run: pid {os.getpid()} on host"):
      with hold():
        pass
    assert os.listdir(tmp_path) == [plan_lib.LOCK_FILE]
  assert os.listdir(tmp_path) == []
  with hold():  # Released.
    pass
