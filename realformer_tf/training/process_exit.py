"""train.py's process ends with its closing summary, not a minute later.

After the summary, Python's interpreter finalization (the garbage collection
of the whole module graph: TensorFlow's eager context, tf.functions,
datasets with their iterators and thread pools, whose destructors wait on
their worker threads) kept the process alive at low or no CPU for 10 s (tiny
runs) to 83 s (the quickstart). Everything a run writes is complete before
it: checkpoints synced and checked (`controller.Controller`), summaries
flushed by Orbit after each write, JSON written atomically. absl's
`app.run` has no way to skip it, hence `run_and_exit`.
"""

import atexit
import os
import sys
import traceback
from typing import Callable, Tuple, Type

from absl import app

from realformer_tf.training import stop_signals


def end_process(exit_code: int) -> None:
  """Runs the atexit callbacks as a normal exit does (TensorFlow's async
  checkpoint thread join, absl's log flush), flushes stdout and stderr, then
  ends the process with `exit_code`, skipping only the finalization."""
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # A closed pipe: nothing more to say.
      pass
  os._exit(exit_code)  # pylint: disable=protected-access


def _exit_code(error: SystemExit) -> int:
  """The exit status Python gives `error` (printing a message code)."""
  if error.code is None or isinstance(error.code, int):
    return error.code or 0
  print(error.code, file=sys.stderr)
  return 1


def run_and_exit(main: Callable[..., None],
                 refusals: Tuple[Type[BaseException], ...] = (),
                 show_traceback: Callable[[], bool] = lambda: False) -> None:
  """`app.run(main)`, then `end_process` with the status Python would give:
  0, `sys.exit`'s, 128 + the signal for a run stopped by SIGTERM/SIGINT
  (`stop_signals`: 143, 130, as the shell reports a signal), or 1 after
  printing an uncaught exception as Python does.

  An exception of a `refusals` type is a refusal (bad input, a busy or
  damaged run directory), whose message names the key, file and way out: it
  is printed alone, as the last line, exit status 1; its traceback (which
  only shows where the check is) too when `show_traceback()` says so.
  Anything else is a crash: its traceback is printed.
  """
  try:
    app.run(main)
    code = 0
  except SystemExit as e:
    code = _exit_code(e)
  except stop_signals.Stopped as e:  # Reported already (train_lib).
    code = e.exit_code
  except refusals as e:  # pylint: disable=catching-non-exception
    if show_traceback():
      traceback.print_exc()
    print(str(e) or type(e).__name__, file=sys.stderr)
    code = 1
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  end_process(code)
