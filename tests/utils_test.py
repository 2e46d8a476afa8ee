"""Tests of realformer_tf.utils."""

import json
import os
import subprocess
import sys

from absl.testing import parameterized
import tensorflow as tf

from realformer_tf import utils


class AtomicWriteTest(tf.test.TestCase):

  def test_writes_and_replaces(self):
    path = os.path.join(self.get_temp_dir(), "sub", "a.json")
    utils.write_json_atomically(path, {"a": 1})
    utils.write_json_atomically(path, {"a": 2})
    with open(path) as f:
      self.assertEqual(json.load(f), {"a": 2})
    self.assertEqual(os.listdir(os.path.dirname(path)), ["a.json"])

  def test_failure_leaves_old_file_and_no_temp(self):
    path = os.path.join(self.get_temp_dir(), "b.txt")
    utils.write_lines_atomically(path, ["old"])

    def lines():
      yield "new"
      raise RuntimeError("killed")

    with self.assertRaisesRegex(RuntimeError, "killed"):
      utils.write_lines_atomically(path, lines())
    with open(path) as f:
      self.assertEqual(f.read(), "old\n")
    self.assertEqual(os.listdir(self.get_temp_dir()), ["b.txt"])

  def test_directory_replaces_existing(self):
    path = os.path.join(self.get_temp_dir(), "export")
    for name in ("first", "second"):
      with utils.atomic_path(path) as tmp:
        os.makedirs(tmp)
        open(os.path.join(tmp, name), "w").close()
    self.assertEqual(os.listdir(path), ["second"])


  def test_directory_swap_keeps_the_old_one_until_the_new_is_in(self):
    path = os.path.join(self.get_temp_dir(), "swap")
    with utils.atomic_path(path) as tmp:
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
    with utils.atomic_path(path) as tmp:
      os.makedirs(tmp)
      open(os.path.join(tmp, "new"), "w").close()
    self.assertEqual(seen, [["old"], ["old"]])
    self.assertEqual(os.listdir(path), ["new"])
    self.assertEqual(sorted(os.listdir(self.get_temp_dir())), ["swap"])


def _dead_pid() -> int:
  return int(subprocess.run([sys.executable, "-c", "import os; print("
                             "os.getpid())"], capture_output=True, text=True,
                            check=True).stdout)


class LeftoversTest(tf.test.TestCase):

  def _dir(self, path, *names):
    os.makedirs(path)
    for name in names:
      open(os.path.join(path, name), "w").close()
    return path

  def test_a_swap_killed_between_its_renames_is_undone(self):
    path = os.path.join(self.get_temp_dir(), "export")
    pid = _dead_pid()
    self._dir(f"{path}.old-{pid}", "saved_model.pb")
    self._dir(f"{path}.tmp-{pid}", "half")
    with self.assertLogs(level="WARNING") as logs:
      utils.recover_interrupted_swap(path)
    self.assertIn("Restored", "".join(logs.output))
    self.assertEqual(os.listdir(path), ["saved_model.pb"])
    self.assertEqual(os.listdir(self.get_temp_dir()), ["export"])

  def test_a_finished_swap_loses_its_backup_and_live_ones_are_kept(self):
    path = self._dir(os.path.join(self.get_temp_dir(), "export"), "new")
    self._dir(f"{path}.old-{_dead_pid()}", "old")
    live = self._dir(f"{path}.old-{os.getppid()}", "another writer's")
    utils.recover_interrupted_swap(path)
    self.assertEqual(os.listdir(path), ["new"])
    self.assertEqual(sorted(os.listdir(self.get_temp_dir())),
                     ["export", os.path.basename(live)])

  def test_a_checkpoint_set_aside_by_a_killed_swap_is_named(self):
    path = os.path.join(self.get_temp_dir(), "converted")
    backup = self._dir(f"{path}.old-{_dead_pid()}", "ckpt-1.index")
    with self.assertRaisesRegex(ValueError, "init_checkpoint=.*does not "
                                f"exist, but {backup} holds it"):
      utils.resolve_checkpoint(path, "init_checkpoint")

  def test_remove_stale_temps(self):
    folder = self.get_temp_dir()
    dead = _dead_pid()
    self._dir(os.path.join(folder, f"export.tmp-{dead}"), "x")
    open(os.path.join(folder, f"a.json.tmp-{dead}"), "w").close()
    open(os.path.join(folder, f"b.json.tmp-{os.getpid()}"), "w").close()
    open(os.path.join(folder, "c.tmp-notapid"), "w").close()
    self.assertEqual(utils.remove_stale_temps(folder), [
        os.path.join(folder, f"a.json.tmp-{dead}"),
        os.path.join(folder, f"export.tmp-{dead}")])
    self.assertEqual(sorted(os.listdir(folder)), [
        f"b.json.tmp-{os.getpid()}", "c.tmp-notapid"])


class ResolveCheckpointTest(tf.test.TestCase):

  def _save(self, directory, steps):
    v = tf.Variable(1.0)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(v=v), directory, max_to_keep=5)
    return [manager.save(checkpoint_number=s) for s in steps]

  def test_prefix_and_directory(self):
    d = self.get_temp_dir()
    first, second = self._save(d, [1, 2])
    self.assertEqual(utils.resolve_checkpoint(d, "x"), second)
    self.assertEqual(utils.resolve_checkpoint(first, "x"), first)

  def test_falls_back_past_deleted_and_truncated(self):
    d = self.get_temp_dir()
    first, second, third = self._save(d, [1, 2, 3])
    os.remove(third + ".index")
    with open(second + ".index", "r+b") as f:
      f.truncate(10)
    with self.assertLogs(level="WARNING") as logs:
      self.assertEqual(utils.resolve_checkpoint(d, "x"), first)
    self.assertIn("unreadable", "".join(logs.output))

  def test_errors_name_the_argument(self):
    d = self.get_temp_dir()
    with self.assertRaisesRegex(ValueError, "task.init_checkpoint=.*without"):
      utils.resolve_checkpoint(d, "task.init_checkpoint")
    with self.assertRaisesRegex(ValueError, "ckpt-9.index does not exist"):
      utils.resolve_checkpoint(os.path.join(d, "ckpt-9"), "--checkpoint")
    (prefix,) = self._save(d, [4])
    with open(prefix + ".index", "r+b") as f:
      f.truncate(10)
    with self.assertRaisesRegex(ValueError, "--checkpoint=.*not a readable"):
      utils.resolve_checkpoint(prefix, "--checkpoint")
    with self.assertRaisesRegex(ValueError, "no readable checkpoint"):
      utils.resolve_checkpoint(d, "--checkpoint")


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
