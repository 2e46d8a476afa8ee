"""Tests of realformer_tf.utils."""

import gzip
import json
import os
from unittest import mock
import zlib

from absl.testing import parameterized
import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import writes
from tests.helpers import file_trees
from tests.helpers import kill_writer


class GfileWritesTest(tf.test.TestCase):
  """`core.writes` on this face's `GFILE_OPS`."""

  def test_writes_and_replaces(self):
    path = os.path.join(self.get_temp_dir(), "sub", "a.json")
    writes.replace_file(path, json.dumps({"a": 1}), utils.GFILE_OPS)
    writes.replace_file(path, json.dumps({"a": 2}), utils.GFILE_OPS)
    with open(path) as f:
      self.assertEqual(json.load(f), {"a": 2})
    self.assertEqual(os.listdir(os.path.dirname(path)), ["a.json"])

  def test_failure_leaves_old_file_and_no_temp(self):
    path = os.path.join(self.get_temp_dir(), "b.txt")
    writes.replace_lines(path, ["old"], utils.GFILE_OPS)

    def lines():
      yield "new"
      raise RuntimeError("killed")

    with self.assertRaisesRegex(RuntimeError, "killed"):
      writes.replace_lines(path, lines(), utils.GFILE_OPS)
    with open(path) as f:
      self.assertEqual(f.read(), "old\n")
    self.assertEqual(os.listdir(self.get_temp_dir()), ["b.txt"])

  def test_directory_replaces_existing(self):
    path = os.path.join(self.get_temp_dir(), "export")
    for name in ("first", "second"):
      with writes.staged(path, utils.GFILE_OPS) as tmp:
        os.makedirs(tmp)
        open(os.path.join(tmp, name), "w").close()
    self.assertEqual(os.listdir(path), ["second"])


  def test_directory_swap_keeps_the_old_one_until_the_new_is_in(self):
    path = os.path.join(self.get_temp_dir(), "swap")
    with writes.staged(path, utils.GFILE_OPS) as tmp:
      os.makedirs(tmp)
      open(os.path.join(tmp, "old"), "w").close()
    seen = []
    rename = tf.io.gfile.rename

    def watching_rename(source, target, overwrite=False):
      # At every rename, `path` or its set-aside copy holds a whole output.
      seen.append(sorted(os.listdir(path if os.path.exists(path) else
                                    path + f".old-{os.getpid()}")))
      return rename(source, target, overwrite)

    self.enter_context(tf.compat.v1.test.mock.patch.object(
        tf.io.gfile, "rename", watching_rename))
    with writes.staged(path, utils.GFILE_OPS) as tmp:
      os.makedirs(tmp)
      open(os.path.join(tmp, "new"), "w").close()
    self.assertEqual(seen, [["old"], ["old"]])
    self.assertEqual(os.listdir(path), ["new"])
    self.assertEqual(sorted(os.listdir(self.get_temp_dir())), ["swap"])


class LeftoversTest(tf.test.TestCase):

  def _dir(self, path, *names, pid=None):
    """A folder holding `names`; a leftover of process `pid` if given."""
    os.makedirs(path)
    for name in names:
      open(os.path.join(path, name), "w").close()
    if pid is not None:
      file_trees.claim_as_ours(path, pid)
    return path

  def test_a_swap_killed_between_its_renames_is_undone(self):
    path = os.path.join(self.get_temp_dir(), "export")
    pid = kill_writer.dead_pid()
    self._dir(f"{path}.old-{pid}", "saved_model.pb", pid=pid)
    self._dir(f"{path}.tmp-{pid}", "half", pid=pid)
    with self.assertLogs(level="WARNING") as logs:
      writes.recover(path, utils.GFILE_OPS)
    self.assertIn("Restored", "".join(logs.output))
    self.assertEqual(os.listdir(path), ["saved_model.pb"])
    self.assertEqual(os.listdir(self.get_temp_dir()), ["export"])

  def test_a_finished_swap_loses_its_backup_and_live_ones_are_kept(self):
    path = self._dir(os.path.join(self.get_temp_dir(), "export"), "new")
    dead = kill_writer.dead_pid()
    self._dir(f"{path}.old-{dead}", "old", pid=dead)
    live = self._dir(f"{path}.old-{os.getppid()}", "another writer's",
                     pid=os.getppid())
    writes.recover(path, utils.GFILE_OPS)
    self.assertEqual(os.listdir(path), ["new"])
    self.assertEqual(sorted(os.listdir(self.get_temp_dir())),
                     ["export", os.path.basename(live),
                      os.path.basename(live) + ".owner"])

  def test_a_users_look_alikes_are_kept(self):
    """38.4: `mymodel.old-20240101/` and `mymodel.tmp-20240102/` (dated
    copies, 20240101 above any pid_max) and leftover-like names of live or
    dead pids without our owner record are never removed, and are named at
    INFO; a dead writer's proven backup is removed with a warning."""
    folder = os.path.join(self.get_temp_dir(), "users")
    path = self._dir(os.path.join(folder, "mymodel"), "weights")
    dead = kill_writer.dead_pid()
    kept = [self._dir(f"{path}.old-20240101", "v1"),
            self._dir(f"{path}.tmp-20240102", "v2"),
            self._dir(f"{path}.old-{dead}", "a user's")]
    open(f"{path}.tmp-{dead}", "w").close()
    kept.append(f"{path}.tmp-{dead}")
    other = kill_writer.dead_pid()
    ours = self._dir(f"{path}.old-{other}", "old", pid=other)
    before = {p: file_trees.files_under(p) for p in kept if os.path.isdir(p)}
    # absl's logger, at INFO here whatever verbosity earlier tests left.
    with self.assertLogs(logger="absl", level="INFO") as logs:
      writes.recover(path, utils.GFILE_OPS)
      removed = writes.sweep(folder, utils.GFILE_OPS)
    self.assertEqual(removed, [])
    self.assertEqual(sorted(os.listdir(folder)), sorted(
        ["mymodel"] + [os.path.basename(p) for p in kept]))
    self.assertEqual({p: file_trees.files_under(p) for p in before}, before)
    output = "\n".join(logs.output)
    self.assertIn(f"WARNING:absl:Removed {ours}, left by process", output)
    for leftover in kept:
      self.assertIn(f"INFO:absl:Kept {leftover}: named like a leftover of "
                    "ours but without our .owner record", output)

  def test_staged_leaves_no_owner_record_and_refuses_a_foreign_temp(
      self):
    folder = self._dir(os.path.join(self.get_temp_dir(), "atomic"))
    path = os.path.join(folder, "out.txt")
    writes.replace_file(path, "new", utils.GFILE_OPS)
    self.assertEqual(os.listdir(folder), ["out.txt"])
    foreign = f"{path}.tmp-{os.getpid()}"
    with open(foreign, "w") as f:
      f.write("a user's")
    with self.assertRaisesRegex(FileExistsError, "out.txt.tmp-.* exists and "
                                "was not written by realformer_tf"):
      writes.replace_file(path, "newer", utils.GFILE_OPS)
    with open(foreign) as f, open(path) as g:
      self.assertEqual((f.read(), g.read()), ("a user's", "new"))

  def test_scan_lists_dead_writers_only(self):
    path = os.path.join(self.get_temp_dir(), "run")
    dead = kill_writer.dead_pid()
    backup = self._dir(f"{path}.old-{dead}", pid=dead)
    self._dir(f"{path}.old-{os.getppid()}", pid=os.getppid())  # Live.
    self._dir(f"{path}.tmp-{dead}", pid=dead)
    self._dir(f"{path}.old-{dead + 1}")  # No owner record: not ours.
    self.assertEqual(writes.interrupted_swap(path, utils.GFILE_OPS), backup)

  def test_sweep_removes_dead_temps_only(self):
    folder = self.get_temp_dir()
    dead = kill_writer.dead_pid()
    self._dir(os.path.join(folder, f"export.tmp-{dead}"), "x", pid=dead)
    for name, pid in ((f"a.json.tmp-{dead}", dead),
                      (f"b.json.tmp-{os.getpid()}", os.getpid()),
                      ("c.tmp-notapid", None), (f"d.tmp-{dead}", None)):
      open(os.path.join(folder, name), "w").close()
      if pid:
        file_trees.claim_as_ours(os.path.join(folder, name), pid)
    # An orphan record: a writer killed after its rename, before cleaning.
    file_trees.claim_as_ours(os.path.join(folder, f"e.tmp-{dead}"), dead)
    self.assertEqual(writes.sweep(folder, utils.GFILE_OPS), [
        os.path.join(folder, f"a.json.tmp-{dead}"),
        os.path.join(folder, f"export.tmp-{dead}")])
    self.assertEqual(sorted(os.listdir(folder)), [
        f"b.json.tmp-{os.getpid()}", f"b.json.tmp-{os.getpid()}.owner",
        "c.tmp-notapid", f"d.tmp-{dead}"])


class GzipBytesTest(tf.test.TestCase):
  """`gzip_bytes` writes its own header: CPython 3.13's `gzip.compress(
  mtime=0)` writes OS byte 255 where 3.11/3.12 wrote 3 (issue 39)."""

  def test_header_fields_and_round_trip(self):
    data = "Docstrings, twice. ".encode() * 500
    with mock.patch.object(gzip, "compress",
                           side_effect=AssertionError("not used")):
      out = utils.gzip_bytes(data)
    # Magic, deflate, no flags, mtime 0, XFL 2 (level 9), OS 3 (Unix).
    self.assertEqual(out[:10], bytes.fromhex("1f8b0800000000000203"))
    self.assertEqual(gzip.decompress(out), data)
    self.assertEqual(int.from_bytes(out[-8:-4], "little"), zlib.crc32(data))
    self.assertEqual(int.from_bytes(out[-4:], "little"), len(data))
    # The body is zlib's level-9 raw deflate, as gzip wraps it.
    self.assertEqual(out[10:-8], zlib.compress(data, level=9, wbits=-15))

  def test_same_bytes_as_pythons_before_3_13(self):
    # What gzip.compress(mtime=0) gave on 3.11 and 3.12: zlib's own gzip
    # wrapper (wbits=31), whose header has OS 3 on Unix.
    data = bytes(range(256)) * 40
    self.assertEqual(utils.gzip_bytes(data),
                     zlib.compress(data, level=9, wbits=31))


class SmallHelpersTest(parameterized.TestCase, tf.test.TestCase):

  def test_dummy_inputs(self):
    inputs = utils.dummy_inputs(masked_positions=2)
    self.assertAllEqual(inputs["input_mask"], [[1, 1]])
    self.assertAllEqual(inputs["masked_lm_positions"].shape, [1, 2])
    self.assertNotIn("masked_lm_positions", utils.dummy_inputs())

  @parameterized.parameters((32, 4, False), (30, 4, True), (8, 0, True))
  def test_check_heads_divide(self, width, heads, fails):
    if fails:
      with self.assertRaisesRegex(ValueError, "encoder.hidden_size: width"):
        utils.check_heads_divide(width, heads, "encoder.hidden_size")
    else:
      utils.check_heads_divide(width, heads, "encoder.hidden_size")


if __name__ == "__main__":
  tf.test.main()
