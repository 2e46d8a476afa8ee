"""Output sets (realformer_tf.data.output_sets): swapped in whole, checked whole."""

import hashlib
import json
import os

import pytest

from realformer_tf.data import output_sets
from tests.helpers import file_trees
from tests.helpers import kill_writer

WRITER = "realformer_tf.data.glue"


def _write_set(directory, contents, **manifest):
  """Commits files {name: bytes} as one set; returns its manifest path."""
  manifest_path = os.path.join(directory, "set_meta_data.json")
  with output_sets.output_set(manifest_path, WRITER) as outputs:
    for name, data in contents.items():
      with open(outputs.stage(os.path.join(directory, name)), "wb") as f:
        f.write(data)
    outputs.commit(manifest)
  return manifest_path


def _read(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


def test_commit_lists_every_file_and_leaves_no_temporary(tmp_path):
  manifest_path = _write_set(str(tmp_path), {"a.rec": b"aaa", "b.rec": b"b"},
                             task="x")
  manifest = json.load(open(manifest_path))
  assert manifest["task"] == "x" and manifest["writer"] == WRITER
  assert sorted(manifest["files"]) == ["a.rec", "b.rec"]
  assert manifest["files"]["a.rec"]["size"] == 3
  assert manifest["files"]["a.rec"]["sha256"] == hashlib.sha256(
      b"aaa").hexdigest()
  assert sorted(os.listdir(tmp_path)) == ["a.rec", "b.rec",
                                          "set_meta_data.json"]
  output_sets.check_set(manifest_path, manifest)


def test_a_failed_writer_leaves_the_previous_set_byte_identical(tmp_path):
  _write_set(str(tmp_path), {"a.rec": b"old a", "b.rec": b"old b"})
  before = _read(tmp_path)
  with pytest.raises(RuntimeError, match="killed"):
    with output_sets.output_set(str(tmp_path / "set_meta_data.json"),
                                WRITER) as outputs:
      with open(outputs.stage(str(tmp_path / "a.rec")), "wb") as f:
        f.write(b"new a")
      raise RuntimeError("killed")
  assert _read(tmp_path) == before


def _rename_in(data):
  """Replaces a file as a later writer does: a new file renamed over it."""
  def change(path):
    with open(path + ".new", "wb") as f:
      f.write(data)
    os.replace(path + ".new", path)
  return change


@pytest.mark.parametrize("change, message", [
    (_rename_in(b"new a"), r"a\.rec has SHA-256 .*, the manifest"),
    (_rename_in(b"a longer new a"), r"a\.rec has 14 bytes, the manifest 5"),
    (os.remove, r"a\.rec is missing"),
])
def test_a_mixed_set_is_refused_naming_the_file(tmp_path, change, message):
  manifest_path = _write_set(str(tmp_path), {"a.rec": b"old a",
                                             "b.rec": b"old b"})
  change(str(tmp_path / "a.rec"))
  manifest = output_sets.read_manifest(manifest_path)
  assert output_sets.find_mismatch(manifest_path, manifest)
  with pytest.raises(ValueError, match=message + r".*set_meta_data\.json.*"
                     r"killed.*python -m realformer_tf\.data\.glue"):
    output_sets.check_set(manifest_path, manifest)


def test_big_files_are_checked_by_identity_and_copies_by_a_sample(
    tmp_path, monkeypatch):
  """Files over the threshold (here 4 bytes) are never hashed whole: while
  size, mtime and inode are those listed, nothing is read; a copy (new mtime)
  is checked once by the SHA-256 of its ends, remembered in `verified`."""
  monkeypatch.setattr(output_sets, "ALWAYS_HASH_BYTES", 4)
  manifest_path = _write_set(str(tmp_path), {"a.rec": b"old a",
                                             "b.rec": b"old b"})
  manifest = output_sets.read_manifest(manifest_path)
  assert "sha256" not in manifest["files"]["b.rec"]
  hashed, sampled = [], []
  sha256, sample = output_sets.file_sha256, output_sets._sample_sha256
  monkeypatch.setattr(output_sets, "file_sha256",
                      lambda path: hashed.append(path) or sha256(path))
  monkeypatch.setattr(output_sets, "_sample_sha256", lambda path, size: (
      sampled.append(path) or sample(path, size)))
  output_sets.check_set(manifest_path, manifest)
  assert not hashed and not sampled
  os.utime(tmp_path / "b.rec", ns=(1, 1))  # Same bytes, new mtime: a copy.
  verified = {}
  output_sets.check_set(manifest_path, manifest, verified)
  output_sets.check_set(manifest_path, manifest, verified)
  assert not hashed and sampled == [str(tmp_path / "b.rec")]
  assert list(verified) == [str(tmp_path / "b.rec")]
  _rename_in(b"new b")(str(tmp_path / "b.rec"))  # Same size, other bytes.
  with pytest.raises(ValueError, match=r"b\.rec has SHA-256 .*, the manifest"):
    output_sets.check_set(manifest_path, manifest, verified)


def test_small_file_changed_in_place_with_its_mtime_restored_is_caught(
    tmp_path):
  """A vocabulary edited in place (same size, same inode) and its mtime set
  back with os.utime: passed until issue 30, as only a changed mtime or
  inode led to hashing."""
  vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n".encode()
  manifest_path = _write_set(str(tmp_path), {"vocab.txt": vocab,
                                             "train.rec": b"records"})
  manifest = output_sets.read_manifest(manifest_path)
  path = tmp_path / "vocab.txt"
  before = os.stat(path)
  with open(path, "r+b") as f:  # In place: the inode stays.
    f.write(vocab.replace(b"the\ncat", b"cat\nthe"))
  os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
  after = os.stat(path)
  assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
      before.st_size, before.st_mtime_ns, before.st_ino)
  with pytest.raises(ValueError, match=r"vocab\.txt has SHA-256 .*, the "
                     "manifest"):
    output_sets.check_set(manifest_path, manifest)
  assert 1 << 20 < output_sets.ALWAYS_HASH_BYTES <= 64 << 20


def test_files_the_new_set_lacks_are_removed(tmp_path):
  _write_set(str(tmp_path), {"a.rec": b"1", "schedule.yaml": b"old"})
  _write_set(str(tmp_path), {"a.rec": b"2"})
  assert _read(tmp_path).keys() == {"a.rec", "set_meta_data.json"}


def test_temporaries_of_killed_writers_are_removed_by_the_next(tmp_path):
  pid = kill_writer.dead_pid()
  dead = tmp_path / f"a.rec.tmp-{pid}"
  live = tmp_path / f"b.rec.tmp-{os.getpid()}"
  users = tmp_path / "a.rec.tmp-20240102"  # 38.4: a user's, not ours.
  dead.write_bytes(b"partial")
  live.write_bytes(b"being written")
  users.write_bytes(b"keep")
  file_trees.claim_as_ours(dead, pid)
  file_trees.claim_as_ours(live, os.getpid())
  _write_set(str(tmp_path), {"a.rec": b"1"})
  assert not dead.exists() and live.exists()
  assert users.read_bytes() == b"keep"
  assert not os.path.exists(f"{dead}.owner")


def test_misuse_is_an_error(tmp_path):
  with pytest.raises(RuntimeError, match="never committed"):
    with output_sets.output_set(str(tmp_path / "m.json"), WRITER) as outputs:
      outputs.stage(str(tmp_path / "a.rec"))
  with pytest.raises(ValueError, match="not in"):
    with output_sets.output_set(str(tmp_path / "m.json"), WRITER) as outputs:
      outputs.stage(str(tmp_path / "sub" / "a.rec"))
  assert not os.listdir(tmp_path)


def test_a_manifest_without_files_is_accepted_with_a_warning(tmp_path,
                                                             caplog):
  path = str(tmp_path / "old_meta_data.json")
  output_sets.check_set(path, {"task": "mrpc"})
  assert "cannot be checked" in caplog.text
