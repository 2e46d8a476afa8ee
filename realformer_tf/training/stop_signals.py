"""SIGTERM and SIGINT end a run in words: step, latest checkpoint, lock freed.

A scheduler (or `kill`) sends SIGTERM, whose default ends the process at
once: exit 143, not a word, the run's lock left behind. Model Garden's
open-source train.py leaves its preemption watcher off, and Orbit has no
signal handling. Here, while a run is held (`raised_on_signals`), the first
SIGTERM or SIGINT raises `Stopped` in the main thread, as Python's own
SIGINT raises `KeyboardInterrupt`: it unwinds the run (TensorFlow returns
to Python between train loops), whose `finally` blocks release the lock and
leave every file whole (each is written atomically). `train_lib` logs
`stop_line`; `process_exit` ends with 128 + the signal (143, 130), the
shell's convention. A second signal gets the default behaviour back (a
stuck unwind can still be killed).
"""

import contextlib
import signal
import threading
from typing import Iterator, Optional

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
  """A stop signal arrived. A BaseException, as KeyboardInterrupt: a
  library's `except Exception` must not swallow it. `step`: the run's step
  when it stopped, once known."""

  def __init__(self, signum: int):
    super().__init__(f"stopped by {signal.Signals(signum).name}")
    self.signum = signum
    self.name = signal.Signals(signum).name
    self.step: Optional[int] = None

  @property
  def exit_code(self) -> int:
    return 128 + self.signum


def stop_line(stop: Stopped, step: int, checkpoint: Optional[str],
              checkpoint_step: Optional[int]) -> str:
  """The one line a stopped run ends with."""
  latest = (f"latest checkpoint: {checkpoint} (step {checkpoint_step})"
            if checkpoint else "no checkpoint yet")
  return f"stopped at step {step} by {stop.name}; {latest}."


@contextlib.contextmanager
def raised_on_signals() -> Iterator[None]:
  """`Stopped` is raised on the first SIGTERM/SIGINT within the block; the
  previous handlers come back after it. Only the main thread can handle
  signals: elsewhere (a test's worker thread) the block runs without."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = {signum: signal.getsignal(signum) for signum in SIGNALS}

  def handler(signum, frame):
    del frame
    for other in SIGNALS:  # The next one acts as the default.
      signal.signal(other, signal.SIG_DFL if other == signal.SIGTERM
                    else signal.default_int_handler)
    raise Stopped(signum)

  for signum in SIGNALS:
    signal.signal(signum, handler)
  try:
    yield
  finally:
    for signum, old in previous.items():
      signal.signal(signum, old if old is not None else signal.SIG_DFL)
