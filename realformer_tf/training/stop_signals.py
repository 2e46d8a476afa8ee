"""SIGTERM and SIGINT end a run in words: step, latest checkpoint, lock freed.

In a `raised_on_signals` block the first signal raises `Stopped` in the main
thread (held back while TensorFlow traces and in `held()` blocks); a watcher
thread calls the `on_stop` callbacks at once, and ends the process at a
second signal. `process_exit` then ends with 128 + the signal.
"""

import contextlib
import os
import signal
import sys
import threading
import weakref
from typing import Callable, Iterator, List, Optional

from absl import logging

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


def _end_at_once(signum: int) -> None:
  """A second stop signal: the process ends now, as without a handler."""
  os.write(2, (
      f"second stop signal ({signal.Signals(signum).name}): ending at once, "
      f"exit {128 + signum}. The run's lock is left; the next run takes it "
      "over and resumes from the latest complete checkpoint.\n").encode())
  os._exit(128 + signum)  # pylint: disable=protected-access


class _Watcher:
  """The stop signals of one `raised_on_signals` block, read as they arrive
  by a daemon thread from the wakeup file descriptor."""

  def __init__(self):
    self.received = 0
    self.first: Optional[int] = None  # The first signal's number.
    # Main thread only (the handler, `held`, `raise_if_stopped`):
    self.raised = False  # `Stopped` was raised for the first signal.
    self.held_back: Optional[int] = None  # A signal the handler held back.
    self.hold_depth = 0  # Nesting of `held()` blocks.
    self._callbacks: List[Callable[[], Optional[Callable[[], None]]]] = []
    self._lock = threading.Lock()
    self._read, self.write_fd = os.pipe()
    os.set_blocking(self.write_fd, False)  # As set_wakeup_fd requires.
    self._thread = threading.Thread(target=self._watch, daemon=True,
                                    name="stop_signals")

  def start(self) -> None:
    self._thread.start()

  def add(self, callback: Callable[[], None]) -> None:
    ref = (weakref.WeakMethod(callback) if hasattr(callback, "__self__")
           else (lambda: callback))
    with self._lock:
      self._callbacks.append(ref)
      stopped = self.received > 0
    if stopped:
      callback()

  def _watch(self) -> None:
    while True:
      try:
        data = os.read(self._read, 64)
      except OSError:
        return
      if not data:
        return  # Closed: the block ended.
      for signum in data:
        if signum in SIGNALS:
          self._receive(signum)

  def _receive(self, signum: int) -> None:
    with self._lock:
      self.received += 1
      first = self.received == 1
      if first:
        self.first = signum
      callbacks = [ref() for ref in self._callbacks]
    if not first:
      _end_at_once(signum)
    for callback in callbacks:
      if callback is None:
        continue
      try:
        callback()
      except Exception as e:  # pylint: disable=broad-except
        # The thread must live on to act on a second signal; the handler's
        # `Stopped` still ends the run, at the loop's end.
        logging.warning("Stop callback %r failed: %s", callback, e)

  def close(self) -> None:
    os.close(self.write_fd)
    self._thread.join(timeout=5)
    os.close(self._read)


_watcher: Optional[_Watcher] = None


def on_stop(callback: Callable[[], None]) -> None:
  """Calls `callback` (a bound method is held weakly) from the watcher
  thread when the first stop signal of the current `raised_on_signals`
  block arrives, even while the main thread is inside TensorFlow (at once
  if one already has); outside a block, never."""
  if _watcher is not None:
    _watcher.add(callback)


def raise_if_stopped() -> None:
  """Raises `Stopped` if a stop signal arrived in the current block: the
  handler's own can be caught on its way (a `MirroredStrategy` trace) or held
  back (`held()`)."""
  watcher = _watcher
  if watcher is None:
    return
  signum = watcher.first if watcher.first is not None else watcher.held_back
  if signum is not None:
    watcher.raised = True
    raise Stopped(signum)


def _building_graph() -> bool:
  """Whether the main thread traces a `tf.function` (TensorFlow loaded)."""
  tf = sys.modules.get("tensorflow")
  return bool(tf is not None and tf.inside_function())


def _raise_held_back(watcher: _Watcher) -> None:
  """`Stopped` for a signal the handler held back, once it may be raised."""
  if (watcher.held_back is not None and not watcher.raised and
      not watcher.hold_depth and not _building_graph()):
    watcher.raised = True
    raise Stopped(watcher.held_back)


@contextlib.contextmanager
def held() -> Iterator[None]:
  """A stop signal within the block is raised as `Stopped` at its end.

  For code an exception would leave half done (a checkpoint's save). A
  second signal still ends the process at once. Outside a
  `raised_on_signals` block, or off the main thread, a no-op.
  """
  watcher = _watcher
  if watcher is None or threading.current_thread() is not (
      threading.main_thread()):
    yield
    return
  watcher.hold_depth += 1
  try:
    yield
  finally:
    watcher.hold_depth -= 1
  _raise_held_back(watcher)


@contextlib.contextmanager
def raised_on_signals() -> Iterator[None]:
  """`Stopped` is raised on the first SIGTERM/SIGINT within the block, a
  second ends the process at once (the watcher thread); the previous
  handlers come back after it. A nested block is the outer one's; off the
  main thread the block runs without."""
  global _watcher
  if (threading.current_thread() is not threading.main_thread() or
      _watcher is not None):
    yield
    return
  previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
  watcher = _Watcher()

  def handler(signum, frame):
    del frame
    # Stays a Python handler: the default one made CPython drop a second
    # signal arriving while the main thread was inside TensorFlow.
    if watcher.raised or watcher.held_back is not None:
      return  # A later signal: the watcher thread acts on it.
    # An exception between two bytecodes of a trace or a checkpoint's save
    # breaks TensorFlow (a `SystemError` in `auto_control_deps`): held back.
    if watcher.hold_depth or _building_graph():
      watcher.held_back = signum  # Raised when that ends.
      return
    watcher.raised = True
    raise Stopped(signum)

  for signum in SIGNALS:
    signal.signal(signum, handler)
  # The wakeup fd is written at once, so the watcher acts on each signal
  # while the main thread is inside TensorFlow.
  previous_fd = signal.set_wakeup_fd(watcher.write_fd,
                                     warn_on_full_buffer=False)
  watcher.start()
  _watcher = watcher
  try:
    yield
    _raise_held_back(watcher)  # Held back to the end of the block.
  finally:
    _watcher = None
    signal.set_wakeup_fd(previous_fd)
    for signum, old in previous.items():
      signal.signal(signum, old if old is not None else signal.SIG_DFL)
    watcher.close()
