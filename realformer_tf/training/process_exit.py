"""train.py's process ends with its closing summary: `run_and_exit`, around
`cli.run`, skips interpreter finalization (TensorFlow's destructors wait on
their threads), which absl's `app.run` cannot.
"""

import atexit
import os
import sys
import traceback
from typing import Callable, Tuple, Type

from absl import logging

from realformer_tf import cli
from realformer_tf.training import stop_signals


def end_process(exit_code: int) -> None:
  """Runs the atexit callbacks, flushes stdout and stderr, then ends the
  process with `exit_code`, skipping only the finalization."""
  # The run's last line stays last: the callbacks' INFO logs (TensorFlow's
  # "Joining the async save thread.") go unsaid, their warnings do not.
  if not logging.level_debug():
    logging.set_verbosity(logging.WARNING)
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # A closed pipe: nothing more to say.
      pass
  # Safe: a run's files are complete by now.
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
  would give (128 + the signal for a stopped run, as the shell reports it).
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
