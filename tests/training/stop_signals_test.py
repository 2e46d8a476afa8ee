"""Tests for realformer_tf/training/stop_signals.py, in process (train.py
stopped by SIGTERM end to end: tests/train_test.py)."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from realformer_tf.training import stop_signals

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.mark.parametrize("signum, name, code", [
    (signal.SIGTERM, "SIGTERM", 143), (signal.SIGINT, "SIGINT", 130)])
def test_first_signal_raises_stopped_then_handlers_come_back(signum, name,
                                                             code):
  before = {s: signal.getsignal(s) for s in stop_signals.SIGNALS}
  with pytest.raises(stop_signals.Stopped) as e:
    with stop_signals.raised_on_signals():
      os.kill(os.getpid(), signum)
      for _ in range(10 ** 6):  # The handler runs between bytecodes.
        pass
  assert (e.value.signum, e.value.name, e.value.exit_code) == (signum, name,
                                                               code)
  assert not isinstance(e.value, Exception)  # `except Exception` misses it.
  assert {s: signal.getsignal(s) for s in stop_signals.SIGNALS} == before


def test_no_handlers_outside_the_main_thread():
  seen = []

  def worker():
    with stop_signals.raised_on_signals():
      seen.append(signal.getsignal(signal.SIGTERM))

  thread = threading.Thread(target=worker)
  thread.start()
  thread.join()
  assert seen == [signal.getsignal(signal.SIGTERM)]


def test_stop_line():
  stop = stop_signals.Stopped(signal.SIGTERM)
  assert stop_signals.stop_line(stop, 7, "/run/ckpt-6", 6) == (
      "stopped at step 7 by SIGTERM; latest checkpoint: /run/ckpt-6 "
      "(step 6).")
  assert stop_signals.stop_line(stop, 0, None, None) == (
      "stopped at step 0 by SIGTERM; no checkpoint yet.")


# A main thread inside one long TensorFlow call (as Orbit's train loop of
# `steps_per_loop` steps), which Python's signal handler cannot interrupt;
# `stop` ends it at the next iteration (`trainer.Trainer`'s loop) when the
# script registers it with `on_stop`.
_BUSY_IN_TENSORFLOW = r"""
import sys
import tensorflow as tf
from realformer_tf.training import stop_signals

stop = tf.Variable(False)
steps = tf.Variable(0)

@tf.function
def loop(n):
  x = tf.ones([64, 64])
  for _ in tf.range(n):
    if stop.read_value():
      break
    x = tf.linalg.normalize(tf.matmul(x, x))[0]
    steps.assign_add(1)

loop(tf.constant(1))  # Traced before the signals come.
try:
  with stop_signals.raised_on_signals():
    if sys.argv[1] == "on_stop":
      stop_signals.on_stop(lambda: stop.assign(True))
    print("ready", flush=True)
    loop(tf.constant(10 ** 9))  # Hours, unless stopped.
    print("loop ended", flush=True)
except stop_signals.Stopped as e:
  print(f"stopped by {e.name} after {int(steps.numpy())} steps", flush=True)
  sys.exit(e.exit_code)
"""


def _busy_process(tmp_path, mode):
  script = tmp_path / "busy.py"  # A file: AutoGraph reads the source.
  script.write_text(_BUSY_IN_TENSORFLOW)
  proc = subprocess.Popen(
      [sys.executable, str(script), mode], cwd=REPO_ROOT,
      env=dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES=""),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  assert proc.stdout.readline() == "ready\n", proc.communicate()
  time.sleep(0.5)  # Inside the loop.
  return proc


def test_first_signal_ends_a_tensorflow_loop_at_its_next_step(tmp_path):
  """Issue 39 item 10: SIGTERM waited for the whole `steps_per_loop`. The
  watcher thread's `on_stop` callback reaches the running loop."""
  proc = _busy_process(tmp_path, "on_stop")
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, (out, err)
  # Stopped is raised as soon as the loop returns, before the next line.
  match = re.fullmatch(r"stopped by SIGTERM after (\d+) steps\n", out)
  assert match, (out, err)
  assert 1 < int(match.group(1)) < 10 ** 9


def test_second_signal_acts_at_once_even_inside_tensorflow(tmp_path):
  """Issue 38 item 11: Ctrl-C then SIGTERM printed `OSError: Signal 15
  ignored due to race condition` (both were pending when the first handler
  reset the second's to the default), and the second signal waited as the
  first. Here nothing stops the loop: only the second signal ends it."""
  proc = _busy_process(tmp_path, "no callback")
  proc.send_signal(signal.SIGINT)
  time.sleep(0.2)
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, (out, err)
  assert "loop ended" not in out and "stopped by" not in out
  assert err.endswith(
      "second stop signal (SIGTERM): ending at once, exit 143. The run's "
      "lock is left; the next run takes it over and resumes from the latest "
      "complete checkpoint.\n"), err
  assert "race condition" not in err


def test_on_stop_outside_a_block_is_never_called():
  called = []
  stop_signals.on_stop(lambda: called.append(1))
  with pytest.raises(stop_signals.Stopped):
    with stop_signals.raised_on_signals():
      os.kill(os.getpid(), signal.SIGTERM)
      for _ in range(10 ** 6):
        pass
  assert not called


def _spin():
  """Bytecodes, between which Python runs a pending signal's handler."""
  for _ in range(10 ** 6):
    pass


def test_a_signal_in_a_held_block_is_raised_at_its_end():
  """Issue 36 CI: a `Stopped` raised inside a checkpoint's save broke
  TensorFlow's trace of the async copy function (exit 1, no stop line).
  Within `held()` the code runs to the block's end, then `Stopped`."""
  done = []
  with pytest.raises(stop_signals.Stopped) as e:
    with stop_signals.raised_on_signals():
      with stop_signals.held():
        with stop_signals.held():  # Nested: the outer block's end raises.
          os.kill(os.getpid(), signal.SIGTERM)
          _spin()
          done.append("inner")
        _spin()
        done.append("outer")
      done.append("after the block")
  assert e.value.name == "SIGTERM"
  assert done == ["inner", "outer"]


def test_a_stopped_on_its_way_is_not_raised_again_by_a_held_block():
  """`train_lib` saves the stopped step (a held save) while the handler's
  `Stopped` unwinds the run: that save must run to its end."""
  saved = []
  with pytest.raises(stop_signals.Stopped):
    with stop_signals.raised_on_signals():
      try:
        os.kill(os.getpid(), signal.SIGTERM)
        _spin()
      except stop_signals.Stopped:
        with stop_signals.held():
          _spin()
          saved.append(True)
        saved.append("after")
        raise
  assert saved == [True, "after"]


def test_a_signal_while_tracing_is_raised_after_the_trace(tmp_path):
  """A signal while a `tf.function` is traced (the async checkpoint's copy
  function at the second save) is held back: the trace completes, and
  `raise_if_stopped` (a train loop's end) or the block's end raises it."""
  script = tmp_path / "trace.py"  # A file: AutoGraph reads the source.
  script.write_text(r'''
import os, signal, sys
import tensorflow as tf
from realformer_tf.training import stop_signals

events = []

@tf.function
def traced(x):
  os.kill(os.getpid(), signal.SIGTERM)
  for _ in range(10 ** 5):  # Python bytecodes inside the trace.
    pass
  events.append("trace went on")
  return x + 1

where = sys.argv[1]
try:
  with stop_signals.raised_on_signals():
    y = traced(tf.constant(1))
    events.append(f"returned {int(y)}")
    if where == "raise_if_stopped":
      stop_signals.raise_if_stopped()
    events.append("block end")
except stop_signals.Stopped as e:
  events.append(f"stopped by {e.name}")
print("; ".join(events))
''')
  expected = {
      "raise_if_stopped": "trace went on; returned 2; stopped by SIGTERM",
      "block_end": "trace went on; returned 2; block end; stopped by SIGTERM",
  }
  for where, line in expected.items():
    proc = subprocess.run(
        [sys.executable, str(script), where], cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
                 CUDA_VISIBLE_DEVICES=""),
        capture_output=True, text=True, timeout=240, check=False)
    assert (proc.returncode, proc.stdout) == (0, line + "\n"), proc.stderr
