"""The keras3 face's data: packing, BERT's masking in numbers, the
same batch for a step in any process, the cached sequences file."""
import logging
import os

import numpy as np
import pytest

from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import wordpiece
from realformer_tf.reproduce import keras3_data as data
from tests.helpers import keras3_reproduction
from tests.helpers import kill_writer

PAD, UNK, CLS, SEP, MASK = range(5)


def _ids(rows=2000, seq=32, vocab=100, seed=0):
  """[CLS] random tokens [SEP], then padding; lengths 3..seq."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((rows, seq), np.int32)
  for r, length in enumerate(rng.integers(3, seq + 1, rows)):
    ids[r, :length] = [CLS] + list(rng.integers(5, vocab, length - 2)) + [SEP]
  return ids


def test_masking_is_berts_in_numbers():
  ids = _ids()
  m = data.mask(ids, np.random.default_rng(1), vocab_size=100,
                max_predictions=5)
  lengths = (ids != PAD).sum(1)
  count = np.minimum(5, np.maximum(1, np.round(lengths * 0.15)))
  count = np.minimum(count, lengths - 2)
  np.testing.assert_array_equal(m["mask_weights"].sum(1), count)
  rows, cols = np.nonzero(m["mask_weights"])
  positions = m["mask_positions"][rows, cols]
  # Never a special token or padding; first, distinct and ascending.
  assert not np.isin(ids[rows, positions], [PAD, CLS, SEP]).any()
  k = m["mask_weights"].sum(1).astype(int)
  assert all(m["mask_weights"][i, :k[i]].all() and
             (np.diff(m["mask_positions"][i, :k[i]]) > 0).all()
             for i in range(len(k)))
  np.testing.assert_array_equal(m["mask_ids"][rows, cols],
                                ids[rows, positions])
  # Padding slots: position 0, target 0, weight 0.
  assert (m["mask_positions"][m["mask_weights"] == 0] == 0).all()
  assert (m["mask_ids"][m["mask_weights"] == 0] == 0).all()
  new = m["token_ids"][rows, positions]
  old = ids[rows, positions]
  share = lambda x: x.mean()
  assert abs(share(new == MASK) - 0.8) < 0.02
  kept = (new == old)
  assert abs(share(kept) - 0.1) < 0.02  # (+ random draws of the same id)
  assert abs(share((new != MASK) & ~kept) - 0.1) < 0.02
  assert new.min() >= MASK  # A random token is never [PAD]..[SEP].
  # Only the chosen positions change.
  changed = m["token_ids"] != ids
  chosen = np.zeros_like(changed)
  chosen[rows, positions] = True
  assert not (changed & ~chosen).any()
  np.testing.assert_array_equal(m["padding_mask"], ids != PAD)
  assert not m["segment_ids"].any()


def _sequences(train_rows=20, eval_rows=5):
  vocab = list(wordpiece.RESERVED_TOKENS) + [f"w{i}" for i in range(95)]
  return data.Sequences(train=_ids(train_rows), eval=_ids(eval_rows, seed=1),
                        vocab=vocab, source="test")


def test_a_step_has_one_batch_and_an_epoch_uses_every_sequence_once():
  sequences = _sequences()
  one, other = (data.Batches(sequences, 4, 5, seed=3) for _ in range(2))
  # Out of order, in another object: the same batch.
  for step in (7, 0, 12, 7):
    a, b = one.train_batch(step), other.train_batch(step)
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
  assert one.steps_per_epoch == 5
  seen = []
  for step in range(5, 10):  # Epoch 1: the masked tokens put back.
    batch = one.train_batch(step)
    original = batch["token_ids"].copy()
    r, c = np.nonzero(batch["mask_weights"])
    original[r, batch["mask_positions"][r, c]] = batch["mask_ids"][r, c]
    seen += [tuple(row) for row in original]
  assert sorted(seen) == sorted(tuple(row) for row in sequences.train)
  stacked = one.train_batches(3, 2)
  np.testing.assert_array_equal(stacked["token_ids"][1],
                                one.train_batch(4)["token_ids"])
  assert data.digest("", one.train_batch(1)) != data.digest(
      "", one.train_batch(2))
  with pytest.raises(ValueError, match="fewer than one batch of 32"):
    data.Batches(sequences, 32, 5, seed=0)


def test_the_last_eval_batch_is_filled_with_zero_weights():
  batches = data.Batches(_sequences(eval_rows=5), 4, 5, seed=0)
  evals = batches.eval_batches(max_sequences=100)
  assert [b["token_ids"].shape for b in evals] == [(4, 32), (4, 32)]
  assert evals[1]["mask_weights"][1:].sum() == 0
  assert evals[1]["mask_weights"][0].sum() > 0
  assert len(batches.eval_batches(max_sequences=4)) == 1


def test_sequences_are_cached_and_rebuilt_for_other_arguments(tmp_path):
  corpus = keras3_reproduction.write_corpus(str(tmp_path))
  folder = str(tmp_path / "data")
  first = data.prepare(folder, [corpus], vocab_size=200, seq_length=16)
  path = os.path.join(folder, data.SEQUENCES_FILE)
  mtime = os.path.getmtime(path)
  again = data.prepare(folder, [corpus], vocab_size=200, seq_length=16)
  assert os.path.getmtime(path) == mtime
  np.testing.assert_array_equal(first.train, again.train)
  assert first.vocab == again.vocab
  with open(os.path.join(folder, data.VOCAB_FILE)) as f:
    assert f.read().split("\n")[:-1] == first.vocab
  # [CLS] text [SEP] 0...: at most 14 tokens of text a row.
  assert (first.train[:, 0] == CLS).all()
  lengths = (first.train != PAD).sum(1)
  assert (first.train[np.arange(len(lengths)), lengths - 1] == SEP).all()
  longer = data.prepare(folder, [corpus], vocab_size=200, seq_length=24)
  assert longer.train.shape[1] == 24 and os.path.getmtime(path) != mtime
  with open(path, "wb") as f:
    f.write(b"not ours")
  with pytest.raises(ValueError, match="is not a sequences file"):
    data.prepare(folder, [corpus], vocab_size=200, seq_length=24)


def test_writes_are_whole_and_only_own_temporaries_are_removed(tmp_path,
                                                               caplog):
  """Issue 38 item 4: any `name.tmp-*` was deleted, a user's dated copy
  (`sequences.npz.tmp-20240102`) too. Only a temporary its owner record
  proves ours, of a process that is gone, is removed, and said."""
  path = str(tmp_path / "sequences.npz")
  writes.replace_file(path, "new", writes.OS_OPS)
  assert os.listdir(tmp_path) == ["sequences.npz"]
  killed = f"{path}.tmp-{kill_writer.dead_pid()}"
  for name in ("sequences.npz.tmp-20240102", "sequences.npz.tmp-123",
               "vocab.txt.tmp-9", "sequences.npz.x", "mine.tmp-1",
               os.path.basename(killed)):
    (tmp_path / name).write_bytes(b"user's")
  pid = int(killed.rsplit("-", 1)[1])
  writes.OS_OPS.write(ownership.owner_path(killed),
                      ownership.owner_record(killed, pid))
  with caplog.at_level(logging.WARNING, logger="absl"):
    assert writes.sweep(str(tmp_path), writes.OS_OPS,
                        "sequences.npz") == [killed]
  assert f"Removed {killed}, left by process {pid}" in caplog.text
  assert sorted(os.listdir(tmp_path)) == [
      "mine.tmp-1", "sequences.npz", "sequences.npz.tmp-123",
      "sequences.npz.tmp-20240102", "sequences.npz.x", "vocab.txt.tmp-9"]
  with open(path, "rb") as f:
    assert f.read() == b"new"