"""Tests for realformer_tf/core/writes.py: one naming rule for leftovers, the
owner records that prove a leftover ours, files and folders replaced whole,
sets published whole, foreign files refused."""

import dataclasses
import json
import os
import re

import pytest

from realformer_tf.core import ownership
from realformer_tf.core import writes
from tests.helpers import kill_writer


def _records(*leftovers):
  """{owner file: its text} as `claim` writes it, for (path, pid) pairs."""
  return {ownership.owner_path(path): ownership.owner_record(path, pid)
          for path, pid in leftovers}


def _stale(path, infix, entries, live, read):
  parent, name = os.path.split(path)
  return writes.scan(parent, infix, entries, live, read, name).stale


def test_leftovers_of_gone_writers_only():
  records = _records(("/d/run.tmp-12", 12), ("/d/run.tmp-13", 13),
                     ("/d/run.old-7", 7), ("/d/runs.tmp-5", 5),
                     ("/d/other.old-7", 7))
  entries = ["run", "run.tmp-12", "run.tmp-13/", "run.old-7", "run.tmp-x",
             "runs.tmp-5", "run.tmp-", "other.old-7"] + [
                 os.path.basename(path) for path in records]
  live = {13}
  writing = lambda pid, leftover: pid in live
  assert _stale("/d/run", writes.TMP_INFIX, entries, writing,
                        records.get) == [("/d/run.tmp-12", 12)]
  assert _stale("/d/run", writes.BACKUP_INFIX, entries, writing,
                        records.get) == [("/d/run.old-7", 7)]


def test_writing_is_asked_with_the_leftovers_path():
  asked = []
  _stale("/d/run", writes.TMP_INFIX, ["run.tmp-3"],
                 lambda pid, leftover: asked.append((pid, leftover)),
                 lambda _: None)
  assert asked == [(3, "/d/run.tmp-3")]


def test_a_name_alone_is_no_proof():
  """38.4: a user's dated copies fit the pattern; without our owner record
  (or with one naming another leftover or pid, or a pid above pid_max)
  they are kept, listed as unclaimed."""
  big = ownership.pid_max() + 1
  records = {
      "/d/mymodel.tmp-99.owner": ownership.owner_record("/d/mymodel.tmp-98",
                                                        99),
      "/d/mymodel.tmp-97.owner": ownership.owner_record("/d/mymodel.tmp-97", 5),
      f"/d/mymodel.old-{big}.owner": ownership.owner_record(
          f"/d/mymodel.old-{big}", big),
      "/d/mymodel.tmp-96.owner": "not json",
  }
  entries = ["mymodel", "mymodel.old-20240101", "mymodel.tmp-20240102",
             "mymodel.tmp-99", "mymodel.tmp-97", "mymodel.tmp-96",
             f"mymodel.old-{big}"] + [os.path.basename(p) for p in records]
  never = lambda pid, leftover: False
  for infix in (writes.TMP_INFIX, writes.BACKUP_INFIX):
    found = writes.scan("/d", infix, entries, never, records.get, "mymodel")
    assert found.stale == [] and found.orphans == []
  assert writes.scan("/d", writes.BACKUP_INFIX, entries, never, records.get,
                   "mymodel").unclaimed == [
                       "/d/mymodel.old-20240101", f"/d/mymodel.old-{big}"]


def test_orphan_owner_records_of_dead_writers():
  """An owner record whose leftover is gone (a kill after the rename) is an
  orphan of ours once its writer is dead; a record of another leftover's
  name is not."""
  records = _records(("/d/x.tmp-4", 4), ("/d/x.tmp-6", 6))
  records["/d/x.tmp-8.owner"] = ownership.owner_record("/d/y.tmp-8", 8)
  entries = [os.path.basename(path) for path in records]
  found = writes.scan("/d", writes.TMP_INFIX, entries,
                    lambda pid, _: pid == 6, records.get)
  assert found.orphans == ["/d/x.tmp-4.owner"] and found.stale == []


def test_pid_max_is_the_systems():
  if os.path.exists(ownership.PID_MAX_FILE):
    with open(ownership.PID_MAX_FILE) as f:
      assert ownership.pid_max() == int(f.read())
  assert 0 < ownership.pid_max() <= ownership.PID_MAX_LIMIT


class _Folder:
  """An in-memory folder as `writes.FileOps` sees it."""

  def __init__(self, **files):
    self.files = dict(files)
    self.ops = writes.FileOps(
        read=self.files.get, write=self.files.__setitem__,
        exists=self.files.__contains__,
        remove=lambda p: self.files.pop(p, None), rename=None, isdir=None,
        listdir=None, makedirs=None)


def test_claim_refuses_what_is_not_ours_and_release_forgets():
  tmp = f"/d/out.tmp-{os.getpid()}"
  folder = _Folder(**{tmp: "a user's file"})
  with pytest.raises(FileExistsError, match=r"out\.tmp-\d+ exists and was "
                     "not written by realformer_tf"):
    ownership.claim(tmp, folder.ops)
  assert folder.files == {tmp: "a user's file"}
  # This pid's own earlier temp (a dead writer that had our pid) is removed.
  folder.files[ownership.owner_path(tmp)] = ownership.owner_record(
      tmp, os.getpid())
  ownership.claim(tmp, folder.ops)
  assert list(folder.files) == [ownership.owner_path(tmp)]
  assert ownership.is_owned(tmp, os.getpid(),
                            folder.files[ownership.owner_path(tmp)])
  ownership.release(tmp, folder.ops)
  assert folder.files == {}


def test_check_replaceable_names_a_run():
  ownership.check_replaceable("/e", ["saved_model.pb", "variables/"],
                         ownership.is_saved_model_entry, "SavedModel")
  with pytest.raises(FileExistsError,
                     match=r"/e is a train.py run directory \(it holds "
                     r"params.yaml, train.lock\): ckpt-100.index, params.yaml,"
                     r" train.lock are not part of a SavedModel"):
    ownership.check_replaceable("/e", ["params.yaml", "train.lock",
                                  "ckpt-100.index"],
                           ownership.is_saved_model_entry, "SavedModel")
  with pytest.raises(FileExistsError, match=r"/e is not a SavedModel: run1 "
                     "is not part of a SavedModel"):
    ownership.check_replaceable("/e", ["run1"], ownership.is_saved_model_entry,
                           "SavedModel")


def _tree(root):
  found = {}
  for folder, _, names in os.walk(root):
    for name in names:
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        found[os.path.relpath(os.path.join(folder, name), root)] = f.read()
  return found


def _fingerprint(path):
  return dict(size=os.path.getsize(path))


def test_a_file_and_a_folder_are_replaced_whole(tmp_path):
  path = str(tmp_path / "a" / "x.json")
  writes.replace_file(path, json.dumps({"v": 1}), writes.OS_OPS)
  writes.replace_file(path, json.dumps({"v": 2}), writes.OS_OPS)
  with pytest.raises(RuntimeError):
    with writes.staged(path, writes.OS_OPS) as tmp:
      writes.OS_OPS.write(tmp, "half")
      raise RuntimeError("disk full")
  assert _tree(tmp_path) == {"a/x.json": '{"v": 2}'}
  folder = str(tmp_path / "f")
  for version in ("1", "2"):
    writes.replace_folder(folder, lambda tmp, v=version: writes.OS_OPS.write(
        os.path.join(tmp, "v"), v), writes.OS_OPS)
  assert _tree(tmp_path / "f") == {"v": "2"}
  assert sorted(os.listdir(tmp_path)) == ["a", "f"]
  with writes.staged(str(tmp_path / "m.keras"), writes.OS_OPS,
                     inner=True) as tmp:
    assert tmp.endswith(".tmp-%d/m.keras" % os.getpid())
    writes.OS_OPS.write(tmp, "zip")
  assert _tree(tmp_path / "a") == {"x.json": '{"v": 2}'}
  assert (tmp_path / "m.keras").read_text() == "zip"


def test_sweep_restores_a_folder_set_aside_and_keeps_a_users(tmp_path):
  dead = kill_writer.dead_pid()
  backup = tmp_path / f"out.old-{dead}"
  backup.mkdir()
  (backup / "v").write_text("old")
  (tmp_path / ownership.owner_path(f"out.old-{dead}")).write_text(
      ownership.owner_record(str(backup), dead))
  (tmp_path / "out.old-20240101").mkdir()  # A user's dated copy.
  temp = tmp_path / f"out.tmp-{dead}"
  temp.write_text("half")
  (tmp_path / ownership.owner_path(temp.name)).write_text(
      ownership.owner_record(str(temp), dead))
  done = writes.sweep(str(tmp_path), writes.OS_OPS)
  assert sorted(done) == [str(backup), str(temp)]
  assert sorted(os.listdir(tmp_path)) == ["out", "out.old-20240101"]
  assert (tmp_path / "out" / "v").read_text() == "old"


def _publish(folder, version, files=("a", "b", "c")):
  manifest = os.path.join(folder, "set.json")
  with writes.output_set(manifest, "realformer_tf.test", writes.OS_OPS,
                         _fingerprint, [os.path.join(folder, n)
                                        for n in files]) as outputs:
    for name in files:
      writes.OS_OPS.write(outputs.stage(os.path.join(folder, name)),
                          f"{name}{version}")
    return outputs.commit({"version": version})


def test_a_set_is_published_whole_and_old_files_go(tmp_path):
  folder = str(tmp_path)
  _publish(folder, 1)
  manifest = _publish(folder, 2, files=("a", "b"))
  assert manifest["files"] == {"a": {"size": 2}, "b": {"size": 2}}
  assert sorted(os.listdir(tmp_path)) == ["a", "b", "set.json"]
  assert (tmp_path / "a").read_text() == "a2"


def test_a_foreign_file_at_a_target_path_is_refused_before_writing(tmp_path):
  folder = str(tmp_path)
  (tmp_path / "b").write_text("mine")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{tmp_path}/b exists and no manifest of realformer_tf lists it")):
    _publish(folder, 1)
  assert os.listdir(tmp_path) == ["b"]
  (tmp_path / "b").unlink()
  _publish(folder, 1, files=("a",))
  (tmp_path / "b").write_text("mine")  # Beside our set, not listed by it.
  with pytest.raises(FileExistsError, match="move it away"):
    _publish(folder, 2)
  assert (tmp_path / "b").read_text() == "mine"
  (tmp_path / "set.json").write_text("{}")  # Not ours any more.
  assert ownership.foreign([str(tmp_path / "a")], str(tmp_path / "set.json"),
                        writes.OS_OPS) == [str(tmp_path / "a")]
  with pytest.raises(FileExistsError, match="pass --overwrite to replace"):
    ownership.refuse_foreign(["x"], "--overwrite")


def test_a_publish_killed_in_its_renames_is_rolled_forward(tmp_path,
                                                           monkeypatch):
  """A kill after the journal: new `a` beside old `b`, `c` and the old
  manifest; the next writer (its sweep) finishes the publish."""
  folder = str(tmp_path)
  _publish(folder, 1)
  real = writes.OS_OPS.rename
  renames = []

  def dies_at_second(source, target):
    if ".pending-" not in target and ".tmp-" not in target:
      renames.append(target)
      if len(renames) == 2:
        raise SystemExit("killed")
    real(source, target)

  monkeypatch.setattr(writes, "OS_OPS", dataclasses.replace(
      writes.OS_OPS, rename=dies_at_second))
  with pytest.raises(SystemExit):
    _publish(folder, 2)
  monkeypatch.undo()
  assert (tmp_path / "a").read_text() == "a2"
  assert (tmp_path / "b").read_text() == "b1"
  assert json.loads((tmp_path / "set.json").read_text())["version"] == 1
  assert [n for n in os.listdir(tmp_path) if ".pending-" in n]
  # This process is alive, so a sweep keeps its journal; the roll forward
  # a later writer's sweep does for a dead one's:
  assert writes.sweep(folder, writes.OS_OPS) == []
  journal = [n for n in os.listdir(tmp_path) if ".pending-" in n][0]
  done = writes._roll_forward(str(tmp_path / journal), os.getpid(),
                              writes.OS_OPS)
  assert "renamed b, c, set.json" in done[0]
  assert json.loads((tmp_path / "set.json").read_text())["version"] == 2
  assert sorted(os.listdir(tmp_path)) == ["a", "b", "c", "set.json"]
  assert [(tmp_path / n).read_text() for n in "abc"] == ["a2", "b2", "c2"]
