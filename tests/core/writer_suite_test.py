"""The kill suite of every real writer (issue 46, item 3), one table
(`tests/helpers/writer_rows.py`): each writer killed at each of its file
operations that change the file system, while writing version 2 over
version 1, leaves version 1 or 2 whole (an output set whose journal is
pending is refused by its readers until the next writer rolls it forward);
the next run says what it removed or finished, writes whole and leaves no
leftover. A user's file at each target path is kept byte for byte, the
refusal names it (and the flag that allows replacing it) and nothing else
is written.

The kill is emulated in-process (`tests/helpers/killed_ops.py`); the first
test checks that it leaves what a real SIGKILL leaves (the layer's
subprocess writers, `tests/helpers/layer_writers.py`).
"""

import logging
import os
import re
import shutil

import pytest

from realformer_tf.core import writes
from tests.helpers import file_trees
from tests.helpers import killed_ops
from tests.helpers import layer_writers
from tests.helpers import writer_rows

INFIXES = (writes.TMP_INFIX, writes.BACKUP_INFIX, writes.JOURNAL_INFIX)


def _leftovers(tmp):
  """The layer's leftovers under `tmp` (not inside a leftover folder)."""
  found = []
  for root, folders, names in os.walk(tmp):
    for name in names + folders:
      if any(infix in name for infix in INFIXES):
        found.append(os.path.join(root, name))
    folders[:] = [f for f in folders if not any(i in f for i in INFIXES)]
  return sorted(found)


def _pidless(tree, pid):
  """`tree` with the writer's pid and the records' random tokens masked."""
  def mask(text):
    text = re.sub(rb'"token": "[0-9a-f]+"', b'"token": ""', text)
    return re.sub(rb"\b%s\b" % str(pid).encode(), b"PID", text)
  return {mask(name.encode()): mask(data) for name, (data, _) in tree.items()}


def test_the_emulated_kill_leaves_what_a_real_sigkill_leaves(tmp_path):
  """A publish of the layer's output set, killed at each of its writes and
  renames (the subprocess' points) in a subprocess (SIGKILL) and
  in-process: the same files, byte for byte (owner records hold a random
  token), and the same next sweep."""
  real, emulated = str(tmp_path / "real"), str(tmp_path / "emulated")
  kinds = ("write", "rename")
  for folder in (real, emulated):
    os.makedirs(folder)
    layer_writers.publish_set(folder, 1)
  points = killed_ops.count_points(
      lambda: layer_writers.publish_set(emulated, 2), kinds).points
  assert points == layer_writers.count_points("set", real, 2) >= 12
  for kill_at in range(1, points + 1):
    for folder in (real, emulated):
      shutil.rmtree(folder)
      os.makedirs(folder)
      layer_writers.publish_set(folder, 1)
    layer_writers.run_killed("set", kill_at, real, 2)
    run = killed_ops.run_killed(
        lambda: layer_writers.publish_set(emulated, 2), kill_at, kinds)
    assert run.dead
    real_pid = {match[1] for name in os.listdir(real) for match in re.finditer(
        r"\.(?:tmp|old|pending)-(\d+)", name)}
    assert len(real_pid) <= 1, real_pid
    left = [_pidless(file_trees.files_under(folder), pid) for folder, pid in (
        (real, next(iter(real_pid), "none")),
        (emulated, killed_ops.dead_pid()))]
    assert left[0] == left[1], kill_at
    swept = [sorted(os.path.basename(p) for p in writes.sweep(
        folder, writes.OS_OPS)) for folder in (real, emulated)]
    assert [len(s) for s in swept] == [len(s) for s in swept[::-1]]
    assert (_pidless(file_trees.files_under(real), "x") ==
            _pidless(file_trees.files_under(emulated), "x")), kill_at


def _restore(snapshot, tmp):
  out = writer_rows.out_dir(tmp)
  for leftover in _leftovers(tmp):
    if os.path.lexists(leftover):
      writes.OS_OPS.remove(leftover)
  shutil.rmtree(out, ignore_errors=True)
  shutil.copytree(snapshot, out, symlinks=True)


def _check_named(tmp, leftovers, text, kill_at, call):
  """Every leftover of the killed writer (not its owner records) is named in
  what the next run logged: removed, restored or finished."""
  for leftover in leftovers:
    if leftover.endswith(".owner") or writes.TMP_INFIX in os.path.dirname(
        os.path.relpath(leftover, tmp)):
      continue
    assert leftover in text, (
        f"killed at point {kill_at} ({call}): the next run did not say what "
        f"it did with {leftover}:\n{text}")


ROWS = [pytest.param(row, id=row.name) for row in writer_rows.ROWS]


@pytest.mark.parametrize("row", ROWS)
def test_a_writer_killed_at_every_point_leaves_old_or_new_whole(
    tmp_path, row, caplog):
  tmp = str(tmp_path)
  row.write(tmp, 1)
  assert row.read(tmp) == 1
  snapshot = str(tmp_path / "version1")
  shutil.copytree(writer_rows.out_dir(tmp), snapshot, symlinks=True)
  counted = killed_ops.count_points(lambda: row.write(tmp, 2))
  assert row.read(tmp) == 2 and not _leftovers(tmp), _leftovers(tmp)
  assert counted.points >= 3, counted.calls
  seen = set()
  for kill_at in range(1, counted.points + 1):
    _restore(snapshot, tmp)
    call = counted.calls[kill_at - 1]
    killed_ops.run_killed(lambda: row.write(tmp, 2), kill_at)
    left = _leftovers(tmp)
    pending = any(writes.JOURNAL_INFIX in name for name in left)
    try:
      found = row.read(tmp)
    except (AssertionError, ValueError) as e:
      # A mix, refused by its readers: only while a journal is pending.
      assert pending, (f"killed at point {kill_at} ({call}): a mix with no "
                       f"journal to finish it: {e}")
      found = "refused"
    else:
      assert found in (1, 2) or (
          found is None and writes.interrupted_swap(
              writer_rows.out_dir(tmp), writes.OS_OPS)), (kill_at, call, found)
    seen.add(found)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
      row.write(tmp, 2)
    _check_named(tmp, left, caplog.text, kill_at, call)
    assert row.read(tmp) == 2, (kill_at, call)
    assert not _leftovers(tmp), (kill_at, call, _leftovers(tmp))
  assert 1 in seen, seen  # Killed before its point of no return.


def _foreign_cases():
  for row in writer_rows.ROWS:
    for target in row.targets:
      marks = ([pytest.mark.xfail(strict=True, reason=writer_rows.OWN)]
               if target in row.foreign_xfail else [])
      yield pytest.param(row, target, id=f"{row.name}-{target}", marks=marks)


@pytest.mark.parametrize("row,target", list(_foreign_cases()))
def test_a_users_file_at_a_target_path_is_kept_and_named(tmp_path, row,
                                                         target):
  tmp = str(tmp_path)
  out = writer_rows.out_dir(tmp)
  path = os.path.join(out, target)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(b"mine\n")
  before = file_trees.files_under(out)
  with pytest.raises((FileExistsError, ValueError)) as refused:
    row.write(tmp, 1)
  message = str(refused.value)
  assert path in message or (target in message and out in message), message
  if row.flag:
    assert row.flag in message, message
  assert file_trees.files_under(out) == before
  assert sorted(os.listdir(tmp)) in (["out"], ["inputs", "out"])
