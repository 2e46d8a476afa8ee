"""Tests of realformer_tf.utils."""

import json
import os

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
