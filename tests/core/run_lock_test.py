"""One writer per run directory: busy, stale, foreign and unreadable locks."""

import errno
import json
import os
import re
import socket

import psutil
import pytest

from realformer_tf.checkpoints import run_directory
from realformer_tf.core import run_lock
from tests.helpers import kill_writer


def _lock(model_dir):
  return os.path.join(model_dir, run_directory.LOCK_FILE)


def _write_lock(model_dir, **fields):
  os.makedirs(model_dir, exist_ok=True)
  holder = dict(pid=os.getpid(), host=socket.gethostname(),
                since="2026-01-01T00:00:00+00:00",
                process_start=psutil.Process().create_time(), token="t0",
                command="train.py --model_dir=x")
  holder.update(fields)
  with open(_lock(model_dir), "w") as f:
    json.dump(holder, f)
  return holder


def test_second_holder_fails_naming_the_first(tmp_path):
  model_dir = str(tmp_path / "run")
  with run_lock.hold(model_dir) as holder:
    with open(_lock(model_dir)) as f:
      assert json.load(f) == holder
    assert holder["pid"] == os.getpid()
    assert holder["host"] == socket.gethostname()
    with pytest.raises(run_lock.ModelDirBusyError) as e:
      with run_lock.hold(model_dir):
        pass
    message = str(e.value)
    assert f"--model_dir={model_dir} is in use by another run: pid " \
           f"{os.getpid()} on host {socket.gethostname()!r} since " \
           f"{holder['since']}" in message
    assert os.path.exists(_lock(model_dir))  # The first one keeps it.
  assert not os.path.exists(_lock(model_dir))


def test_lock_is_released_on_an_exception_and_a_new_dir_removed(tmp_path):
  model_dir = str(tmp_path / "new" / "run")
  with pytest.raises(KeyError):
    with run_lock.hold(model_dir):
      assert os.path.exists(_lock(model_dir))
      raise KeyError("boom")
  assert not os.path.exists(model_dir)  # Created by the lock, left empty.
  kept = str(tmp_path / "kept")
  with pytest.raises(KeyError):
    with run_lock.hold(kept):
      open(os.path.join(kept, "params.yaml"), "w").close()
      raise KeyError("boom")
  assert os.listdir(kept) == ["params.yaml"]


def test_stale_lock_of_a_gone_process_is_taken_over(tmp_path):
  model_dir = str(tmp_path / "run")
  # A SIGKILLed run: its pid no longer exists.
  _write_lock(model_dir, pid=kill_writer.dead_pid(), token="dead")
  with run_lock.hold(model_dir) as holder:
    assert holder["pid"] == os.getpid() and holder["token"] != "dead"
  # A reused pid: it lives, but started after the lock was written.
  _write_lock(model_dir, process_start=psutil.Process().create_time() - 60,
              token="reused")
  with run_lock.hold(model_dir) as holder:
    assert holder["token"] != "reused"
  assert os.listdir(model_dir) == []


def test_lock_of_another_host_is_not_taken_over(tmp_path):
  model_dir = str(tmp_path / "run")
  _write_lock(model_dir, pid=kill_writer.dead_pid(), host="elsewhere")
  with pytest.raises(run_lock.ModelDirBusyError,
                     match=r"on host 'elsewhere' .* remove .*train\.lock"):
    run_lock.acquire(model_dir)


def test_unreadable_lock_is_named(tmp_path):
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  (model_dir / run_directory.LOCK_FILE).write_text("garbage")
  with pytest.raises(run_lock.ModelDirBusyError,
                     match=r"train\.lock exists but names no run .*'garbage'"):
    run_lock.acquire(str(model_dir))


def test_disabled_or_remote_takes_no_lock(tmp_path):
  with run_lock.hold(str(tmp_path / "worker"), enabled=False) as holder:
    assert holder is None
  assert not (tmp_path / "worker").exists()
  assert run_lock.acquire("gs://bucket/run") is None


@pytest.mark.parametrize("content, what", [
    (b"\xff\xfe{\"pid\": 1}", r"its bytes are not UTF-8 text \(invalid start "
     r"byte at byte 0"),
    (b'{"pid": -1, "host": "h", "token": "t"}',
     r"its pid -1 is not a process id"),
    (b'{"pid": 12345678901234567890, "host": "h", "token": "t"}',
     r"its pid 12345678901234567890 is not a process id"),
    (b'{"pid": "12", "host": "h", "token": "t"}',
     r"its pid '12' is not a process id"),
])
def test_a_lock_train_py_did_not_write_is_named(tmp_path, content, what):
  """Issue 30 item 4: a bare UnicodeDecodeError, ValueError or OverflowError
  not naming the file. Not taken over as stale: who holds it is unknown."""
  model_dir = str(tmp_path / "run")
  os.makedirs(model_dir)
  with open(_lock(model_dir), "wb") as f:
    f.write(content)
  with pytest.raises(run_lock.ModelDirBusyError) as e:
    run_lock.acquire(model_dir)
  assert str(e.value).startswith(
      f"{_lock(model_dir)} exists but names no run (")
  assert "remove that file and start again" in str(e.value)
  assert re.search(what, str(e.value)), str(e.value)
  with open(_lock(model_dir), "rb") as f:
    assert f.read() == content  # Left as it was.
  assert os.listdir(model_dir) == [run_directory.LOCK_FILE]


@pytest.mark.parametrize("fails", ["open", "write", "fsync"])
@pytest.mark.parametrize("errno_name", ["EROFS", "ENOSPC"])
def test_an_unwritable_model_dir_is_named_and_left_clean(
    tmp_path, monkeypatch, fails, errno_name):
  """Issue 30 item 4: a raw OSError from `_try_create`, and a 0-byte
  `train.lock.new-PID-TOKEN` left for good. (Root ignores a chmod'ed
  directory, so the failing call is patched.) Issue 38 item 8: on a
  read-only file system `os.remove` of the temporary name that open() could
  not create raises EROFS too, and that OSError replaced the ValueError."""
  error = OSError(getattr(errno, errno_name),
                  os.strerror(getattr(errno, errno_name)))
  existing = tmp_path / "existing"
  existing.mkdir()
  real_open, real_fsync = open, os.fsync

  def failing_open(path, *args, **kwargs):
    if fails == "open" and ".new-" in str(path):
      raise error
    f = real_open(path, *args, **kwargs)
    if fails == "write" and ".new-" in str(path):
      def write(_):
        raise error
      f.write = write
    return f

  def failing_fsync(fd):
    if fails == "fsync":
      raise error
    return real_fsync(fd)

  real_remove = os.remove

  def read_only_remove(path):
    if errno_name == "EROFS" and ".new-" in str(path):
      raise error  # What unlink says on a read-only file system.
    return real_remove(path)

  monkeypatch.setattr("builtins.open", failing_open)
  monkeypatch.setattr(os, "fsync", failing_fsync)
  monkeypatch.setattr(os, "remove", read_only_remove)
  for model_dir in (str(existing), str(tmp_path / "new")):
    with pytest.raises(ValueError) as e:
      with run_lock.hold(model_dir):
        pass
    assert str(e.value).startswith(
        f"--model_dir={model_dir}: cannot write its lock "
        f"{_lock(model_dir)} ({os.strerror(getattr(errno, errno_name))}; a "
        "read-only file system or a full disk?)"), str(e.value)
  if errno_name == "EROFS" and fails != "open":
    return  # Created, then not removable: a read-only disk cannot be.
  assert os.listdir(existing) == []  # No train.lock.new-PID-TOKEN.
  assert not (tmp_path / "new").exists()  # Made for the lock, removed.
