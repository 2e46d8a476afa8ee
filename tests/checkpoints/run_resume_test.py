"""Tests of realformer_tf/checkpoints/run_resume.py: a started run that
cannot be resumed as it is (issue 38 items 1, 2, 9) is refused before
anything is written, naming the way out."""

import os

import pytest
import tensorflow as tf

from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import run_resume
# 64 floats, the save counter and the object graph: 444 bytes a checkpoint.
from tests.checkpoints.run_directory_test import _save


def test_a_copy_without_its_state_file_is_refused_though_readers_read_it(
    tmp_path):
  """Readers take the newest whole `ckpt-N` of such a copy
  (`run_directory_test`); training would write over them."""
  d = str(tmp_path)
  _, second = _save(d, [5, 10])
  os.remove(os.path.join(d, "checkpoint"))
  assert run_directory.resolve_checkpoint(d, "--model_dir") == second
  with pytest.raises(ValueError, match="but no 'checkpoint' state file"):
    run_resume.resume_checkpoint(d)


def test_resume_checkpoint_refuses_a_started_run_it_cannot_resume(tmp_path):
  """Issue 38 items 1, 2, 9: the state file gone, or naming a checkpoint
  whose index is gone or whose data is cut short, made Model Garden train
  again from step 0 over `ckpt-*` (or restore the damaged one and fail).
  Any `ckpt-*` file makes a started run; not a killed save's `_temp`."""
  run_dir = str(tmp_path)
  assert run_resume.resume_checkpoint(run_dir) is None
  os.makedirs(os.path.join(run_dir, "ckpt-3_temp"))
  assert run_directory.checkpoint_prefixes(run_dir) == []
  assert run_resume.resume_checkpoint(run_dir) is None
  first, second = _save(run_dir, [1, 20])
  assert run_directory.checkpoint_prefixes(run_dir) == [second, first]
  assert run_resume.resume_checkpoint(run_dir) == second
  fix = ("tf.compat.v1.train.update_checkpoint_state("
         f"{run_dir!r}, {{!r}})")

  os.rename(os.path.join(run_dir, "checkpoint"),
            os.path.join(tmp_path, "state"))
  with pytest.raises(ValueError) as e:
    run_resume.resume_checkpoint(run_dir)
  assert str(e.value).startswith(
      f"--model_dir={run_dir!r} holds checkpoints (ckpt-20, ckpt-1) but no "
      "'checkpoint' state file naming the newest"), e.value
  assert "nothing was run or written" in str(e.value)
  assert fix.format(second) in str(e.value)
  os.rename(os.path.join(tmp_path, "state"),
            os.path.join(run_dir, "checkpoint"))

  for damage, why in (
      (lambda: os.remove(second + ".index"),
       f"{second}.index does not exist"),
      (lambda: open(second + ".data-00000-of-00001", "r+b").truncate(100),
       "hold 100 bytes, less than the 444 bytes")):
    assert _save(run_dir, [20]) == [second]  # Whole again.
    damage()
    with pytest.raises(ValueError) as e:
      run_resume.resume_checkpoint(run_dir)
    message = str(e.value)
    assert message.startswith(
        f"--model_dir={run_dir!r}: its newest checkpoint, ckpt-20 (named by "
        f"{run_dir}/checkpoint), is not whole: "), message
    assert why in message and fix.format(first) in message, message
    # Following the message resumes from the older one.
    tf.compat.v1.train.update_checkpoint_state(run_dir, first)
    assert run_resume.resume_checkpoint(run_dir) == first


def test_a_save_killed_before_the_first_checkpoint_is_whole(tmp_path):
  """Only a data file of ckpt-5 (no index, no state file): still a started
  run, which only the user can tell to start again."""
  (tmp_path / "ckpt-5.data-00000-of-00001").write_bytes(b"partial")
  with pytest.raises(ValueError, match=r"holds checkpoints \(ckpt-5\) but no "
                     r"'checkpoint' state file.*none of them is whole .*: "
                     r"remove them to start again, or use a new --model_dir"):
    run_resume.resume_checkpoint(str(tmp_path))
