"""Tests for realformer_tf/core/swap.py: one naming rule for leftovers, and
the owner records that prove a leftover ours."""

import os

import pytest

from realformer_tf.core import swap


def _records(*leftovers):
  """{owner file: its text} as `claim` writes it, for (path, pid) pairs."""
  return {swap.owner_path(path): swap.owner_record(path, pid)
          for path, pid in leftovers}


def test_leftovers_of_gone_writers_only():
  records = _records(("/d/run.tmp-12", 12), ("/d/run.tmp-13", 13),
                     ("/d/run.old-7", 7), ("/d/runs.tmp-5", 5),
                     ("/d/other.old-7", 7))
  entries = ["run", "run.tmp-12", "run.tmp-13/", "run.old-7", "run.tmp-x",
             "runs.tmp-5", "run.tmp-", "other.old-7"] + [
                 os.path.basename(path) for path in records]
  live = {13}
  writing = lambda pid, leftover: pid in live
  assert swap.leftovers("/d/run", swap.TMP_INFIX, entries, writing,
                        records.get) == [("/d/run.tmp-12", 12)]
  assert swap.leftovers("/d/run", swap.BACKUP_INFIX, entries, writing,
                        records.get) == [("/d/run.old-7", 7)]


def test_writing_is_asked_with_the_leftovers_path():
  asked = []
  swap.leftovers("/d/run", swap.TMP_INFIX, ["run.tmp-3"],
                 lambda pid, leftover: asked.append((pid, leftover)),
                 lambda _: None)
  assert asked == [(3, "/d/run.tmp-3")]


def test_a_name_alone_is_no_proof():
  """38.4: a user's dated copies fit the pattern; without our owner record
  (or with one naming another leftover or pid, or a pid above pid_max)
  they are kept, listed as unclaimed."""
  big = swap.pid_max() + 1
  records = {
      "/d/mymodel.tmp-99.owner": swap.owner_record("/d/mymodel.tmp-98", 99),
      "/d/mymodel.tmp-97.owner": swap.owner_record("/d/mymodel.tmp-97", 5),
      f"/d/mymodel.old-{big}.owner": swap.owner_record(
          f"/d/mymodel.old-{big}", big),
      "/d/mymodel.tmp-96.owner": "not json",
  }
  entries = ["mymodel", "mymodel.old-20240101", "mymodel.tmp-20240102",
             "mymodel.tmp-99", "mymodel.tmp-97", "mymodel.tmp-96",
             f"mymodel.old-{big}"] + [os.path.basename(p) for p in records]
  never = lambda pid, leftover: False
  for infix in (swap.TMP_INFIX, swap.BACKUP_INFIX):
    found = swap.scan("/d", infix, entries, never, records.get, "mymodel")
    assert found.stale == [] and found.orphans == []
  assert swap.scan("/d", swap.BACKUP_INFIX, entries, never, records.get,
                   "mymodel").unclaimed == [
                       "/d/mymodel.old-20240101", f"/d/mymodel.old-{big}"]


def test_orphan_owner_records_of_dead_writers():
  """An owner record whose leftover is gone (a kill after the rename) is an
  orphan of ours once its writer is dead; a record of another leftover's
  name is not."""
  records = _records(("/d/x.tmp-4", 4), ("/d/x.tmp-6", 6))
  records["/d/x.tmp-8.owner"] = swap.owner_record("/d/y.tmp-8", 8)
  entries = [os.path.basename(path) for path in records]
  found = swap.scan("/d", swap.TMP_INFIX, entries,
                    lambda pid, _: pid == 6, records.get)
  assert found.orphans == ["/d/x.tmp-4.owner"] and found.stale == []


def test_pid_max_is_the_systems():
  if os.path.exists(swap.PID_MAX_FILE):
    with open(swap.PID_MAX_FILE) as f:
      assert swap.pid_max() == int(f.read())
  assert 0 < swap.pid_max() <= swap.PID_MAX_LIMIT


class _Folder:
  """An in-memory folder as `swap.FileOps` sees it."""

  def __init__(self, **files):
    self.files = dict(files)
    self.ops = swap.FileOps(read=self.files.get, write=self.files.__setitem__,
                            exists=self.files.__contains__,
                            remove=lambda p: self.files.pop(p, None))


def test_claim_refuses_what_is_not_ours_and_release_forgets():
  tmp = f"/d/out.tmp-{os.getpid()}"
  folder = _Folder(**{tmp: "a user's file"})
  with pytest.raises(FileExistsError, match=r"out\.tmp-\d+ exists and was "
                     "not written by realformer_tf"):
    swap.claim(tmp, folder.ops)
  assert folder.files == {tmp: "a user's file"}
  # This pid's own earlier temp (a dead writer that had our pid) is removed.
  folder.files[swap.owner_path(tmp)] = swap.owner_record(tmp, os.getpid())
  swap.claim(tmp, folder.ops)
  assert list(folder.files) == [swap.owner_path(tmp)]
  assert swap.is_owned(tmp, os.getpid(), folder.files[swap.owner_path(tmp)])
  swap.release(tmp, folder.ops)
  assert folder.files == {}


def test_check_replaceable_names_a_run():
  swap.check_replaceable("/e", ["saved_model.pb", "variables/"],
                         swap.is_saved_model_entry, "SavedModel")
  with pytest.raises(FileExistsError,
                     match=r"/e is a train.py run directory \(it holds "
                     r"params.yaml, train.lock\): ckpt-100.index, params.yaml,"
                     r" train.lock are not part of a SavedModel"):
    swap.check_replaceable("/e", ["params.yaml", "train.lock",
                                  "ckpt-100.index"],
                           swap.is_saved_model_entry, "SavedModel")
  with pytest.raises(FileExistsError, match=r"/e is not a SavedModel: run1 "
                     "is not part of a SavedModel"):
    swap.check_replaceable("/e", ["run1"], swap.is_saved_model_entry,
                           "SavedModel")
