"""train.py's process ends with its closing summary or its one-line error:
`run_and_exit`, around absl's `app.run`, prints it after the atexit callbacks
and skips interpreter finalization (TensorFlow's destructors wait on their
threads), which `app.run` cannot.
"""

import atexit
import functools
import os
import sys
import traceback
from typing import Callable, Tuple, Type

from absl import app

from realformer_tf import cli
from realformer_tf.training import stop_signals


def end_process(exit_code: int,
                last_words: Callable[[], None] = lambda: None) -> None:
  """Runs the atexit callbacks, then `last_words` (the process's last
  lines: after the callbacks' logs, as TensorFlow's "Joining the async save
  thread."), flushes stdout and stderr, then ends the process with
  `exit_code`, skipping only the finalization."""
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  last_words()
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # A closed pipe: nothing more to say.
      pass
  # Safe: a run's files are complete by now.
  os._exit(exit_code)  # pylint: disable=protected-access


def run_and_exit(main: Callable[..., None],
                 refusals: Tuple[Type[BaseException], ...] = cli.REFUSALS
                 ) -> None:
  """`app.run(main)`, then `end_process` with the status Python would give
  (128 + the signal for a stopped run, as the shell reports it), its last
  words a `refusals` error's `cli.print_refusal` (exit 1, as `cli.run`), a
  SystemExit's message or a crash's traceback."""
  last_words, code = (lambda: None), 1
  try:
    app.run(main)
    code = 0
  except refusals as e:  # pylint: disable=catching-non-exception
    last_words = functools.partial(cli.print_refusal, e)
  except SystemExit as e:
    if e.code is None or isinstance(e.code, int):
      code = e.code or 0
    else:  # A message: exit status 1.
      last_words = functools.partial(print, e.code, file=sys.stderr)
  except stop_signals.Stopped as e:  # Reported already (train_lib).
    code = e.exit_code
  except BaseException as e:  # pylint: disable=broad-except
    last_words = functools.partial(traceback.print_exception, e)
  end_process(code, last_words)
