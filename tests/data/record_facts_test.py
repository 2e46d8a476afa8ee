"""`record_facts`: what a read of every record proves, from the manifest or
read once and cached; and (issue 46's target) a restart of a run over big
shards opens no shard before training does."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf.training import plan_facts
from tests.helpers import train_runs


def manifest_of(path):
  """The manifest listing `path`, as a run plan's reader finds it."""
  return plan_facts.Reader().meta_data(path)


def _shards(tmp_path, count=3, per_shard=6):
  pattern = train_runs.write_pretraining_shards(str(tmp_path / "train"),
                                                count, per_shard)
  return pattern, sorted(tf.io.gfile.glob(pattern))


def test_scan_counts_and_bounds_every_record(tmp_path):
  path = str(tmp_path / "a.tfrecord")
  train_runs.write_pretraining_records(path, 7, vocab_size=40, seed=3)
  found = record_facts.scan(path)
  ids = [int(i) for record in tf.data.TFRecordDataset(path)
         for i in tf.train.Example.FromString(record.numpy()).features
         .feature["masked_lm_ids"].int64_list.value]
  assert found.count == 7
  assert found.max["masked_lm_ids"] == max(ids)
  assert found.min["masked_lm_ids"] == min(ids)
  assert found.max["input_ids"] < 40 and found.min["input_ids"] == 0
  assert found.lengths == {
      "input_ids": train_runs.TINY_SEQ_LENGTH,
      "input_mask": train_runs.TINY_SEQ_LENGTH,
      "segment_ids": train_runs.TINY_SEQ_LENGTH,
      "masked_lm_positions": train_runs.TINY_MAX_PREDICTIONS,
      "masked_lm_ids": train_runs.TINY_MAX_PREDICTIONS,
      "masked_lm_weights": train_runs.TINY_MAX_PREDICTIONS,
      "next_sentence_labels": 1}
  assert "masked_lm_weights" not in found.max  # Floats: no id range.


def test_a_truncated_file_is_unreadable_from_its_batch(tmp_path, monkeypatch):
  monkeypatch.setattr(record_facts, "BATCH", 4)
  path = str(tmp_path / "a.tfrecord")
  train_runs.write_pretraining_records(path, 10)
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(data[:-10])
  with pytest.raises(record_facts.UnreadableRecords) as e:
    record_facts.scan(path)
  assert e.value.first == 8 and e.value.path == path
  assert "DataLossError" in e.value.reason


def _no_reads(monkeypatch):
  """Makes any read of a record file (or a scan) fail the test."""
  def refuse(*args, **kwargs):
    raise AssertionError(f"read {args}")
  monkeypatch.setattr(record_facts, "scan", refuse)
  monkeypatch.setattr(tf.data, "TFRecordDataset", refuse)


def test_the_manifest_entry_is_trusted_while_the_file_matches(tmp_path,
                                                            monkeypatch):
  _, files = _shards(tmp_path)
  written = {f: record_facts.scan(f) for f in files}
  monkeypatch.setattr(output_sets, "ALWAYS_HASH_BYTES", 100)  # "Big" shards.
  with monkeypatch.context() as patch:
    _no_reads(patch)
    found = record_facts.facts(files, manifest_of)
  assert {f: (x.source, x.as_dict()) for f, x in found.items()} == {
      f: ("manifest", x.as_dict()) for f, x in written.items()}
  # A file renamed in by another writer is not the one listed: read.
  train_runs.write_pretraining_records(files[1] + ".new", 4, seed=9)
  os.replace(files[1] + ".new", files[1])
  found = record_facts.facts(files, manifest_of)
  assert found[files[1]].source == "scan" and found[files[1]].count == 4


def test_unlisted_records_are_read_once_then_cached(tmp_path, monkeypatch):
  _, files = _shards(tmp_path)
  os.remove(str(tmp_path / "train_pretraining_meta_data.json"))
  cache = str(tmp_path / "run" / "data_scan.json")
  first = record_facts.facts(files, manifest_of, cache)
  assert {x.source for x in first.values()} == {"scan"}
  assert not os.path.exists(cache)  # Checks write nothing; `keep` does.
  record_facts.keep(cache, files)
  with monkeypatch.context() as patch:
    _no_reads(patch)
    patch.setattr(record_facts, "_READ", {})  # As a restarted process.
    again = record_facts.facts(files, manifest_of, cache)
  assert {x.source for x in again.values()} == {"cache"}
  assert ({f: x.as_dict() for f, x in again.items()} ==
          {f: x.as_dict() for f, x in first.items()})
  # Rewritten (other size or mtime): read again.
  train_runs.write_pretraining_records(files[0], 2, seed=5)
  found = record_facts.facts(files, manifest_of, cache)
  assert found[files[0]].source == "scan" and found[files[0]].count == 2
  assert found[files[1]].source == "cache"
  record_facts.keep(cache, files)
  # Without `read`, only what is known.
  other = str(tmp_path / "other.tfrecord")
  train_runs.write_pretraining_records(other, 3)
  assert list(record_facts.facts([files[1], other], manifest_of,
                                 cache, read=False)) == [files[1]]
  # Without a cache file, this process reads each file once.
  with monkeypatch.context() as patch:
    _no_reads(patch)
    assert record_facts.facts(files, manifest_of)[
        files[2]].source == "cache"


def test_a_users_data_scan_json_is_neither_trusted_nor_replaced(
    tmp_path, monkeypatch):
  """The cache is ours by its writer key: a user's file of its name that
  claims other facts is not read, and `keep` refuses to replace it."""
  _, files = _shards(tmp_path)
  os.remove(str(tmp_path / "train_pretraining_meta_data.json"))
  monkeypatch.setattr(record_facts, "_READ", {})
  cache = tmp_path / "data_scan.json"
  claims = {"identity": output_sets.file_identity(files[0]),
            record_facts.RECORDS_KEY: {"count": 999, "lengths": {},
                                       "min": {}, "max": {}}}
  text = json.dumps({"scans": {files[0]: claims}, "verified": {}})
  cache.write_text(text)
  found = record_facts.facts(files, manifest_of, str(cache))
  assert found[files[0]].source == "scan" and found[files[0]].count != 999
  with pytest.raises(FileExistsError, match=re.escape(
      f"{cache} exists and no manifest of realformer_tf lists it")):
    record_facts.keep(str(cache), files)
  assert cache.read_text() == text


def test_a_copied_set_is_sampled_once_then_remembered(tmp_path, monkeypatch):
  monkeypatch.setattr(output_sets, "ALWAYS_HASH_BYTES", 100)
  _shards(tmp_path / "a")
  shutil.copytree(tmp_path / "a", tmp_path / "b")  # New inodes and mtimes.
  manifest_path = str(tmp_path / "b" / "train_pretraining_meta_data.json")
  manifest = output_sets.read_manifest(manifest_path)
  cache = str(tmp_path / "data_scan.json")
  sampled = []
  sample = output_sets._sample_sha256  # pylint: disable=protected-access
  monkeypatch.setattr(output_sets, "_sample_sha256", lambda path, size: (
      sampled.append(os.path.basename(path)) or sample(path, size)))
  monkeypatch.setattr(output_sets, "file_sha256", None)  # Never whole.
  record_facts.check_set(manifest_path, manifest, cache)
  assert sorted(sampled) == [f"train-0000{i}-of-00003.tfrecord"
                             for i in range(3)]
  files = sorted(tf.io.gfile.glob(str(tmp_path / "b" / "train-*")))
  record_facts.keep(cache, files)
  monkeypatch.setattr(record_facts, "_VERIFIED", {})  # A restarted process.
  record_facts.check_set(manifest_path, manifest, cache)
  record_facts.facts(files, manifest_of, cache)
  assert len(sampled) == 3  # Neither a restart nor the facts read again.


_RESTART = textwrap.dedent("""\
    import os
    import sys
    from official.core import exp_factory
    from realformer_tf.configs import registry
    from realformer_tf.data import output_sets
    from realformer_tf.data import record_facts
    from realformer_tf.training import plan_facts
    from realformer_tf.training import plan_rules
    from realformer_tf.training import run_plan
    from tests.helpers import train_runs
    # The shards (a few kB) count as big, as real ones over 16 MiB are.
    output_sets.ALWAYS_HASH_BYTES = 1000
    pattern, cache = sys.argv[1:]
    params = exp_factory.get_exp_config("realformer/pretraining")
    params.override(train_runs.tiny_overrides(pattern, "dummy"))
    open(cache + ".start", "w").close()  # Marks where the checks begin.
    # What train.py does before training: the plan, its rules, the cache.
    plan = run_plan.derive(params, "train", os.path.dirname(cache),
                           reader=plan_facts.Reader(cache_path=cache))
    plan_rules.check(plan)
    record_facts.keep(cache, [f for s in plan.splits for f in s.files])
    open(cache + ".end", "w").close()
    """)


def _shard_opens(tmp_path, pattern, cache):
  """Shard files the checks before training open (strace), by name."""
  log = str(tmp_path / "strace.log")
  subprocess.run(
      ["strace", "-f", "-e", "trace=openat", "-o", log, sys.executable, "-c",
       _RESTART, pattern, cache], check=True,
      env=dict(os.environ, PYTHONPATH=os.getcwd()), capture_output=True)
  lines = open(log).read().splitlines()
  start = next(i for i, l in enumerate(lines) if ".start" in l)
  end = next(i for i, l in enumerate(lines) if ".end" in l)
  return sorted(os.path.basename(l.split('"')[1]) for l in lines[start:end]
                if "-of-00003.tfrecord" in l and "ENOENT" not in l)


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_restart_opens_no_shard_before_training(tmp_path):
  """Issue 46: shards with our manifest are opened by no check; shards
  without one are read at the first start only (the cache beside the run)."""
  pattern, files = _shards(tmp_path / "data")
  cache = str(tmp_path / "run" / "data_scan.json")
  os.makedirs(tmp_path / "run")
  assert _shard_opens(tmp_path, pattern, cache) == []  # Start.
  assert _shard_opens(tmp_path, pattern, cache) == []  # Restart.
  os.remove(str(tmp_path / "data" / "train_pretraining_meta_data.json"))
  first = _shard_opens(tmp_path, pattern, cache)
  assert set(first) == {os.path.basename(f) for f in files}
  assert _shard_opens(tmp_path, pattern, cache) == []  # Restart.
