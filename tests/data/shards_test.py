"""Shard names and whole shard sets (realformer_tf.data.shards)."""

import glob
import os

import pytest

from realformer_tf.data import shards


def test_names_round_trip_and_the_pattern_matches_the_set(tmp_path):
  stem = str(tmp_path / "train")
  paths = shards.shard_paths(stem, 3, ".tfrecord")
  assert [os.path.basename(p) for p in paths] == [
      "train-00000-of-00003.tfrecord", "train-00001-of-00003.tfrecord",
      "train-00002-of-00003.tfrecord"]
  assert [shards.parse(p) for p in paths] == [
      (stem, i, 3, ".tfrecord") for i in range(3)]
  assert shards.parse(str(tmp_path / "train.tfrecord")) is None
  for p in paths:
    open(p, "w").close()
  assert sorted(glob.glob(shards.pattern(stem, 3, ".tfrecord"))) == paths
  with pytest.raises(ValueError, match="Shard index 3 is not in"):
    shards.shard_path(stem, 3, 3)


def test_a_whole_set_and_other_names_pass():
  shards.check_whole(shards.shard_paths("/d/train", 4, ".tfrecord") +
                     ["/d/eval.tfrecord", "/d/x-1-of-2"])


def test_a_missing_shard_is_named():
  paths = shards.shard_paths("/d/train", 4, ".tfrecord")
  with pytest.raises(ValueError) as e:
    shards.check_whole(paths[:1] + paths[2:], "task.train_data.input_path")
  message = str(e.value)
  for fragment in ("task.train_data.input_path",
                   "/d/train-?????-of-00004.tfrecord", "3 of 4 shards",
                   "missing train-00001-of-00004.tfrecord",
                   "write the set again"):
    assert fragment in message, message


def test_two_shard_counts_for_one_stem_are_refused():
  paths = (shards.shard_paths("/d/train", 2) + shards.shard_paths("/d/train", 3))
  with pytest.raises(ValueError, match=r"2 different sets .* 2 of 2, 3 of 3"):
    shards.check_whole(paths)
  # Another stem is another set.
  shards.check_whole(shards.shard_paths("/d/train", 2) +
                     shards.shard_paths("/d/eval", 3))
