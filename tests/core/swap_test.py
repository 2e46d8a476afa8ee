"""Tests for realformer_tf/core/swap.py: one naming rule for leftovers."""

from realformer_tf.core import swap


def test_leftovers_of_gone_writers_only():
  entries = ["run", "run.tmp-12", "run.tmp-13/", "run.old-7", "run.tmp-x",
             "runs.tmp-5", "run.tmp-", "other.old-7"]
  live = {13}
  writing = lambda pid, leftover: pid in live
  assert swap.leftovers("/d/run", swap.TMP_INFIX, entries, writing) == [
      ("/d/run.tmp-12", 12)]
  assert swap.leftovers("/d/run", swap.BACKUP_INFIX, entries, writing) == [
      ("/d/run.old-7", 7)]


def test_writing_is_asked_with_the_leftovers_path():
  asked = []
  swap.leftovers("/d/run", swap.TMP_INFIX, ["run.tmp-3"],
                 lambda pid, leftover: asked.append((pid, leftover)))
  assert asked == [(3, "/d/run.tmp-3")]
