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

INFIXES = killed_ops.INFIXES


def _leftovers(folder):
  """The layer's leftovers in and beside `folder` (not inside a leftover
  folder)."""
  found = []
  for top in killed_ops.state_paths(folder):
    if top != folder:
      found.append(top)
      continue
    for root, folders, names in os.walk(top):
      found += [os.path.join(root, name) for name in names + folders
                if any(infix in name for infix in INFIXES)]
      folders[:] = [f for f in folders if not any(i in f for i in INFIXES)]
  return sorted(found)


def _pidless(tree, pid):
  """`tree` with the writer's pid and the records' random tokens masked."""
  def mask(text):
    text = re.sub(rb'"token": "[0-9a-f]+"', b'"token": ""', text)
    return re.sub(rb"\b%s\b" % str(pid).encode(), b"PID", text)
  return {mask(name.encode()): mask(data) for name, (data, _) in tree.items()}


def _tree(folder):
  """`folder`'s files with the pid of the writer that left them masked."""
  pids = {match[1] for name in os.listdir(folder) for match in re.finditer(
      r"\.(?:tmp|old|pending)-(\d+)", name)}
  assert len(pids) <= 1, pids
  return _pidless(file_trees.files_under(folder), next(iter(pids), "none"))


def test_a_recorded_point_holds_what_a_real_sigkill_leaves(tmp_path):
  """A publish of the layer's output set, SIGKILLed at each of its writes
  and renames in a subprocess, leaves the files recorded before that call
  in-process, byte for byte (owner records hold a random token); the next
  sweep of each does the same."""
  real, emulated = str(tmp_path / "real"), str(tmp_path / "emulated")
  for folder in (real, emulated):
    os.makedirs(folder)
    layer_writers.publish_set(folder, 1)
  points = [state for op, _, state in killed_ops.record_points(
      lambda: layer_writers.publish_set(emulated, 2), emulated,
      str(tmp_path / "states")) if op in ("write", "rename")]
  assert len(points) == layer_writers.count_points("set", real, 2) >= 12
  for kill_at, state in enumerate(points, 1):
    shutil.rmtree(real)
    os.makedirs(real)
    layer_writers.publish_set(real, 1)
    layer_writers.run_killed("set", kill_at, real, 2)
    killed_ops.restore(state, emulated)
    assert _tree(real) == _tree(emulated), kill_at
    swept = [len(writes.sweep(folder, writes.OS_OPS))
             for folder in (real, emulated)]
    assert swept[0] == swept[1] and _tree(real) == _tree(emulated), kill_at


def _check_named(leftovers, text, point):
  """Every leftover of the killed writer (not its owner records) is named in
  what the next run logged: removed, restored, or renamed in by the
  journal it finished."""
  journals = [p for p in leftovers if writes.JOURNAL_INFIX in p and
              writes.TMP_INFIX not in os.path.basename(p)]
  for leftover in leftovers:
    if leftover.endswith(".owner"):
      continue
    target = os.path.basename(writes.target_of(leftover))
    assert leftover in text or (writes.TMP_INFIX in leftover and any(
        f"{journal} lists" in text and target in text
        for journal in journals)), (
            f"killed at {point}: the next run did not say what it did with "
            f"{leftover}:\n{text}")


def _signature(leftovers):
  """Which kinds of leftovers (temps, backups, journals) a kill left."""
  return frozenset(infix for path in leftovers for infix in INFIXES
                   if infix in os.path.basename(path))


def _skip(row):
  return [pytest.mark.skip(reason=row.skip)] if row.skip else []


ROWS = [pytest.param(row, id=row.name, marks=_skip(row) + (
    [pytest.mark.xfail(strict=True, reason=row.kill_xfail)]
    if row.kill_xfail else [])) for row in writer_rows.ROWS]


@pytest.mark.parametrize("row", ROWS)
def test_a_writer_killed_at_every_point_leaves_old_or_new_whole(
    tmp_path, row, caplog):
  """The next run is the writer itself at the first point that leaves each
  kind of leftovers (temps, backups, journals), and at the others the
  layer's sweep that it runs first."""
  tmp, out = str(tmp_path), writer_rows.out_dir(str(tmp_path))
  row.write(tmp, 1)
  assert row.read(tmp) == 1
  points = killed_ops.record_points(lambda: row.write(tmp, 2), out,
                                    str(tmp_path / "states"))
  assert row.read(tmp) == 2 and not _leftovers(out), _leftovers(out)
  assert len(points) >= 3, points
  seen, rerun = set(), {frozenset()}  # Nothing left: nothing to recover.
  for kill_at, (op, args, state) in enumerate(points, 1):
    point = f"point {kill_at}, {op} {args[0]}"
    killed_ops.restore(state, out)
    left = _leftovers(out)
    pending = any(writes.JOURNAL_INFIX in name for name in left)
    try:
      found = row.read(tmp)
    except (AssertionError, ValueError) as e:
      # A mix, refused by its readers: only while a journal is pending.
      assert pending, f"killed at {point}: a mix with no journal: {e}"
      found = "refused"
    else:
      assert found in (1, 2) or (found is None and any(
          writes.interrupted_swap(os.path.join(out, target), writes.OS_OPS)
          for target in row.targets)), (point, found)
    seen.add(found)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
      if _signature(left) in rerun:
        for folder in {os.path.dirname(path) for path in left}:
          writes.sweep(folder, writes.OS_OPS)
        assert row.read(tmp) in (1, 2), point
      else:
        rerun.add(_signature(left))
        row.write(tmp, 2)
        assert row.read(tmp) == 2, point
    _check_named(left, caplog.text, point)
    assert not _leftovers(out), (point, _leftovers(out))
  assert 1 in seen, seen  # Killed before its point of no return.
def _foreign_cases():
  for row in writer_rows.ROWS:
    for target in row.targets:
      marks = _skip(row) + (
          [pytest.mark.xfail(strict=True, reason=writer_rows.OWN)]
          if target in row.foreign_xfail else [])
      yield pytest.param(row, target, id=f"{row.name}-{target}", marks=marks)


@pytest.mark.parametrize("row,target", list(_foreign_cases()))
def test_a_users_file_at_a_target_path_is_kept_and_named(tmp_path, row,
                                                         target):
  """A file of the user's at `target` (in it, for a folder): the refusal
  names the path (or the folder and the file)."""
  tmp = str(tmp_path)
  out = writer_rows.out_dir(tmp)
  path = os.path.join(out, target) + ("mine.txt" if target.endswith("/")
                                       else "")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(b"mine\n")
  before = file_trees.files_under(out)
  with pytest.raises((FileExistsError, ValueError)) as refused:
    row.write(tmp, 1)
  message = str(refused.value)
  folder, name = os.path.split(path)
  named = os.path.join(out, target.rstrip("/"))  # A folder is named whole.
  assert named in message or (name in message and folder in message), message
  if row.flag:
    assert row.flag in message, message
  if row.refusal:
    assert message == row.refusal.format(path=path)
  assert file_trees.files_under(out) == before
  assert not _leftovers(out), _leftovers(out)
