"""Tests for realformer_tf/training/stop_signals.py, in process (train.py
stopped by SIGTERM end to end: tests/train_test.py)."""

import os
import signal
import threading

import pytest

from realformer_tf.training import stop_signals


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
