"""Which checkpoint a resumed train.py run restores, checked before it writes
anything (`resume_checkpoint`): not the reader's newest whole one, since a
copy may still be writing it.
"""

import os
from typing import Optional

import tensorflow as tf

from realformer_tf.checkpoints import run_directory


def _state_file_fix(model_dir: str, prefix: Optional[str]) -> str:
  """How to point `model_dir`'s state file at `prefix` (None: no whole one)."""
  if prefix is None:
    return ("none of them is whole (a save killed before the run's first "
            "checkpoint was complete, or a copy still under way): remove "
            "them to start again, or use a new --model_dir")
  return ("to go on from the newest whole one, point the state file at it: "
          "python -c \"import tensorflow as tf; tf.compat.v1.train."
          f"update_checkpoint_state({model_dir!r}, {prefix!r})\"")


def resume_checkpoint(model_dir: str) -> Optional[str]:
  """The checkpoint a run in `model_dir` resumes from, checked (no fall-back:
  the user picks an older one; a ValueError says how to go on); None for a
  new run."""
  prefixes = run_directory.checkpoint_prefixes(model_dir) if model_dir else []
  if not prefixes:
    return None
  key = f"--model_dir={model_dir!r}"
  names = ", ".join(os.path.basename(p) for p in prefixes)
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None or not state.model_checkpoint_path:
    raise ValueError(
        f"{key} holds checkpoints ({names}) but no 'checkpoint' state file "
        "naming the newest (a copy that left it out?): training would start "
        "again from step 0 over them, so nothing was run or written. Copy "
        "the run's 'checkpoint' file too, or " +
        _state_file_fix(
            model_dir, run_directory.older_whole_checkpoint(model_dir)) + ".")
  newest = state.model_checkpoint_path
  if not os.path.isabs(newest):
    newest = os.path.join(model_dir, newest)
  why = run_directory.check_files(newest)
  if why:
    older = run_directory.older_whole_checkpoint(model_dir, newest)
    raise ValueError(
        f"{key}: its newest checkpoint, {os.path.basename(newest)} (named by "
        f"{os.path.join(model_dir, 'checkpoint')}), is not whole: {why}. "
        "Resuming would restore it and fail, or start again from step 0, "
        "so nothing was run or written. If a copy is still writing it, wait "
        "for it; else " + _state_file_fix(model_dir, older) +
        f" (its checkpoints: {names}).")
  return newest
