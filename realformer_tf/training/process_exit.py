"""train.py's process ends with its closing summary, not a minute later.

After the summary, Python's interpreter finalization (the garbage collection
of the whole module graph: TensorFlow's eager context, tf.functions,
datasets with their iterators and thread pools, whose destructors wait on
their worker threads) kept the process alive at low or no CPU for 10 s (tiny
runs) to 83 s (the quickstart). Everything a run writes is complete before
it: checkpoints synced and checked (`controller.Controller`), summaries
flushed by Orbit after each write, JSON written atomically. absl's
`app.run` has no way to skip it, hence `run_and_exit`, around `cli.run` (a
refusal: its message alone, as every command of ours ends one).
"""

import atexit
import os
import sys
import traceback
from typing import Callable, Tuple, Type

from realformer_tf import cli
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
                 refusals: Tuple[Type[BaseException], ...] = cli.REFUSALS
                 ) -> None:
  """`cli.run(main, refusals)`, then `end_process` with the status Python
  would give: 0, `sys.exit`'s, 128 + the signal for a run stopped by
  SIGTERM/SIGINT (`stop_signals`: 143, 130, as the shell reports a signal),
  or 1 after printing an uncaught exception as Python does.

  An exception of a `refusals` type is a refusal (bad input, a busy or
  damaged run directory), whose message names the key, file and way out:
  `cli.run` prints it alone, as the last line, exit status 1; its traceback
  (which only shows where the check is) too with --traceback. Anything else
  is a crash: its traceback is printed.
  """
  try:
    cli.run(main, refusals)
    code = 0
  except SystemExit as e:
    code = _exit_code(e)
  except stop_signals.Stopped as e:  # Reported already (train_lib).
    code = e.exit_code
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  end_process(code)
