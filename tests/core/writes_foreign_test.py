"""Writers that prove ownership by a manifest of ours (issue 46, item 3)
outside the kill suite's table (tests/core/writer_suite_test.py): the
reproduction's report (tf_keras face), its runs' result.json, the keras3
face's data and checkpoints. A user's file at each target path is kept and the refusal
names it.
"""

import os
import re

import numpy as np
import pytest

from realformer_tf.reproduce import keras3_data as data
from realformer_tf.reproduce import keras3_face as train
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import run
from realformer_tf.reproduce import tf_keras_face
from tests.helpers import file_trees
from tests.helpers import keras3_reproduction


def _named(path, call):
  """`call` refuses the user's file at `path`, naming it; nothing changes."""
  before = file_trees.files_under(os.path.dirname(path))
  with pytest.raises(FileExistsError, match=re.escape(
      f"{path} exists and no manifest of realformer_tf lists it (not written "
      "by us), so nothing was written: move it away")):
    call()
  assert file_trees.files_under(os.path.dirname(path)) == before


def test_the_tf_keras_reports_keep_a_users_file(tmp_path):
  for name in plan_lib.REPORT:
    (tmp_path / name).write_text("mine")
    _named(str(tmp_path / name), lambda: plan_lib.make_plan(
        plan_lib.Options(output_dir=str(tmp_path), face="tf_keras"),
        tf_keras_face))
    (tmp_path / name).unlink()


def test_a_keras3_run_keeps_a_users_result_file(tmp_path):
  out = str(tmp_path)
  plan = plan_lib.make_plan(plan_lib.Options(output_dir=out, size="tiny",
                                             seeds=1, archs=["post_ln"]),
                            train)
  result = os.path.join(plan.pretrain[0].run_dir, plan_lib.RESULT_FILE)
  os.makedirs(os.path.dirname(result))
  open(result, "w").write("{}")
  _named(result, lambda: run.execute(plan))


def test_the_keras3_data_and_checkpoint_keep_a_users_file(tmp_path):
  """vocab.txt and sequences.npz are one set (data.json, its manifest);
  a checkpoint records its writer: a user's file at each path is refused
  before anything is written; ours are replaced."""
  out = str(tmp_path / "out")
  plan = plan_lib.make_plan(plan_lib.Options(output_dir=out, size="tiny",
                                             seeds=1, archs=["post_ln"]),
                            train)
  data_dir = os.path.join(out, "data")
  checkpoint = os.path.join(plan.pretrain[0].run_dir, train.CHECKPOINT_FILE)
  for path in (os.path.join(data_dir, data.VOCAB_FILE),
               os.path.join(data_dir, data.SEQUENCES_FILE), checkpoint):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("mine")
    _named(path, lambda: run.execute(plan))
    os.remove(path)
  corpus = keras3_reproduction.write_corpus(str(tmp_path))
  data.prepare(data_dir, [corpus], vocab_size=200, seq_length=16)
  data.prepare(data_dir, [corpus], vocab_size=100, seq_length=16)  # Ours.
  data.check(data_dir)
  assert len(open(os.path.join(data_dir, data.VOCAB_FILE)).readlines()) <= 100
  state = ([np.zeros(2, np.float32)], [], [])
  for step in (1, 2):  # Ours: replaced.
    train.save_checkpoint(checkpoint, state, {"step": step})
    train.check_checkpoint(checkpoint)
  assert train.load_checkpoint(checkpoint, state)[1] == {"step": 2}
