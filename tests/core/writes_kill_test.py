"""The kill suite of the writer layer (issue 46, item 3): every kind of write
(a file, a folder, an output set) SIGKILLed at each of its writes and
renames leaves the old output or the new one whole, and the next writer
says what it removed, restored or finished; a user's file at a target path
of a writer is kept, and the refusal names it.

The real writers' kills and users' files at their target paths are in one
table, tests/core/writer_suite_test.py.
"""

import logging
import os
import re

import pytest

from realformer_tf import utils
from realformer_tf.core import writes
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.keras3 import saving
from tests.helpers import file_trees
from tests.helpers import layer_writers
from tests.helpers import shared_data


def _leftovers(folder):
  return sorted(name for name in os.listdir(folder)
                if any(infix in name for infix in (".tmp-", ".old-",
                                                   ".pending-")))


@pytest.mark.parametrize("kind", ["file", "folder", "set"])
def test_a_kill_at_every_point_leaves_old_or_new_whole(tmp_path, kind,
                                                       caplog):
  folder = str(tmp_path)
  layer_writers.WRITERS[kind](folder, 1)
  points = layer_writers.count_points(kind, folder, 2)
  assert points >= {"file": 3, "folder": 6, "set": 12}[kind], points
  seen = set()
  for kill_at in range(1, points + 1):
    layer_writers.WRITERS[kind](folder, 1)  # The old output, whole.
    assert not _leftovers(folder)
    layer_writers.run_killed(kind, kill_at, folder, 2)
    left = _leftovers(folder)
    if kind != "set" or not any(".pending-" in name for name in left):
      # No reader sees a mix; a folder is missing only between its two
      # renames (its backup beside it is named by readers).
      found = layer_writers.read_whole(kind, folder)
      assert found in (1, 2) or (
          kind == "folder" and writes.interrupted_swap(
              os.path.join(folder, "export"), writes.OS_OPS)), found
    # The next writer's recovery step, then its own write: it says what
    # it did with each leftover, and writes whole.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="absl"):
      done = writes.sweep(folder, writes.OS_OPS)
    assert set(done) <= {os.path.join(folder, name) for name in left}
    assert bool(done) == any(not name.endswith(".owner") for name in left)
    for leftover in done:
      assert leftover in caplog.text
    seen.add(layer_writers.read_whole(kind, folder))
    assert not _leftovers(folder), _leftovers(folder)
    layer_writers.WRITERS[kind](folder, 3)
    assert layer_writers.read_whole(kind, folder) == 3
  # Killed before the point of no return (the last rename, the journal)
  # and, for a set, after it.
  assert seen == ({1, 2} if kind == "set" else {1})


def test_a_set_killed_in_its_renames_is_refused_until_finished(tmp_path):
  """Killed after the journal, between the renames: a reader of the
  manifest finds new files beside it and refuses; the next writer finishes
  the publish (new set whole), naming it."""
  folder = str(tmp_path)
  layer_writers.publish_set(folder, 1)
  points = layer_writers.count_points("set", folder, 2)
  layer_writers.publish_set(folder, 1)
  layer_writers.run_killed("set", points - 2, folder, 2)  # Before b and c.
  assert open(os.path.join(folder, "a.rec")).read() == "a.rec v2"
  assert open(os.path.join(folder, "b.rec")).read() == "b.rec v1"
  with pytest.raises(AssertionError):
    layer_writers.read_whole("set", folder)
  (journal,) = [n for n in os.listdir(folder) if ".pending-" in n]
  assert writes.sweep(folder, writes.OS_OPS) == [
      os.path.join(folder, journal)]
  assert layer_writers.read_whole("set", folder) == 2


# --- A user's file at a target path: kept, and the refusal names it ---


GOOD_ROWS = ("0\tA dog runs.\tAn animal moves.\tentailment\n"
             "1\tA cat sleeps.\tThe cat runs.\tnot_entailment\n")


def _refused(path, call, error=FileExistsError, match=None):
  before = file_trees.files_under(os.path.dirname(path))
  with pytest.raises(error, match=match or re.escape(
      f"{path} exists and no manifest of realformer_tf lists it")):
    call()
  assert file_trees.files_under(os.path.dirname(path)) == before


def _corpus(tmp_path):
  path = tmp_path / "corpus.txt"
  path.write_text("".join(
      f"Sentence {i} of document {d} is here.\nAnd another one {i}.\n\n"
      for d in range(6) for i in range(3)))
  return str(path)


def test_the_pretraining_converters_keep_a_users_files(tmp_path):
  corpus = _corpus(tmp_path)
  out = tmp_path / "out"
  out.mkdir()
  records = out / "train.tfrecord"
  records.write_bytes(b"my records")
  options = dict(max_seq_length=32, max_predictions_per_seq=4)
  _refused(str(records), lambda: pretraining_data.create_pretraining_data(
      [corpus], shared_data.vocab_file(), str(records), **options))
  cli = dict(input_files=[corpus], output_file=str(records), vocab_file=None,
             vocab_size=100, do_lower_case=True, masked_lm_prob=0.15,
             dupe_factor=1, short_seq_prob=0.1, random_seed=1, **options)
  _refused(str(records), lambda: create_pretraining_data.run(**cli),
           match="pass --overwrite to replace it")
  create_pretraining_data.run(**cli, overwrite=True)
  meta = pretraining_data.meta_data_path(str(records))
  output_sets.check_set(meta, output_sets.read_manifest(meta))


def test_beam_keeps_a_users_vocab_and_shards(tmp_path):
  """Issue 46's two Beam bugs: a user's vocab.txt beside the prefix, and a
  user's shard that no manifest of ours lists, were replaced."""
  beam_pretraining_data = pytest.importorskip(
      "realformer_tf.data.beam_pretraining_data")
  corpus = _corpus(tmp_path)
  out = tmp_path / "out"
  out.mkdir()
  kwargs = dict(input_files=[corpus], output_prefix=str(out / "train"),
                vocab_file=None, vocab_size=64, vocab_sample_documents=6,
                num_shards=2, do_lower_case=True, max_seq_length=32,
                max_predictions_per_seq=4, masked_lm_prob=0.15,
                dupe_factor=1, short_seq_prob=0.1, random_seed=1,
                pipeline_args=["--runner=DirectRunner"])
  vocab = out / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nmine\n")
  _refused(str(vocab), lambda: beam_pretraining_data.run(**kwargs),
           error=ValueError, match=re.escape(
               f"{vocab} exists and was not written by this command"))
  vocab.unlink()
  beam_pretraining_data.run(**kwargs)  # Ours now: 2 shards.
  shard = out / "train-00000-of-00004.tfrecord"
  shard.write_bytes(b"my shard")
  _refused(str(shard), lambda: beam_pretraining_data.run(
      **dict(kwargs, num_shards=4)), match=re.escape(
          f"{shard} exists and no manifest of realformer_tf lists it (not "
          "written by us), so nothing was written: pass --overwrite"))


def test_a_keras_save_keeps_a_users_folder(tmp_path):
  folder = tmp_path / "model.keras"
  folder.mkdir()
  (folder / "mine").write_text("x")
  with pytest.raises(FileExistsError, match=re.escape(
      f"{folder} is a directory, not a .keras file; not replaced")):
    saving.save_model(None, str(folder))
  assert (folder / "mine").read_text() == "x"


def test_claimed_temps_are_the_only_names_a_writer_makes(tmp_path):
  """A user's file at a writer's temp name is refused, not replaced."""
  path = str(tmp_path / "final_eval.json")
  tmp = f"{path}{writes.TMP_INFIX}{os.getpid()}"
  with open(tmp, "w") as f:
    f.write("mine")
  with pytest.raises(FileExistsError, match="was not written by "
                     "realformer_tf"):
    writes.replace_file(path, "{}", utils.GFILE_OPS)
  assert open(tmp).read() == "mine" and not os.path.exists(path)
