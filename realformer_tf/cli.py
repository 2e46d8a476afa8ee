"""How our command-line programs end: a refusal is its message alone.

absl's `app.run` calls `main` (`_run_main`: `sys.exit(main(argv))`,
absl/app.py:254 in absl-py 1.4.0) and re-raises whatever it raises but an
`app.UsageError` (app.py:327 and 330), so Python prints the exception's
traceback: some 25 lines through app.py before the one line that says what
is wrong. Our checks refuse a bad value, file or directory before anything
is written, with a message that names the flag, file and way out; the
traceback only shows where the check is. `run` prints such a refusal's
message alone, as the last line, with exit status 1, and the traceback
before it only with `--traceback`. Anything else is a crash and keeps its
traceback; `app.UsageError` and `sys.exit` end the program as absl and
Python make them.

This module imports absl only: every command imports it, from `data/` up
(train.py through `training/process_exit.py`).
"""

import sys
import traceback
from typing import Any, Callable, Tuple, Type

from absl import app
from absl import flags

_TRACEBACK = flags.DEFINE_bool(
    "traceback", False,
    "Print a refusal's Python traceback too (a bad value, file or "
    "directory); by default only its message, the last line printed.")

# What our checks raise: ValueError (a bad value, a damaged file),
# FileNotFoundError (a missing input), FileExistsError (an output that
# would replace what is not ours); and what the OS raises, naming the path,
# for a file where a directory must be or the reverse (an --output_dir
# under a file, a directory given as --vocab_file). A library's ValueError
# is printed the same way: --traceback shows where it came from.
REFUSALS: Tuple[Type[BaseException], ...] = (
    ValueError, FileNotFoundError, FileExistsError, NotADirectoryError,
    IsADirectoryError)


def print_refusal(error: BaseException) -> None:
  """Prints `error` as a refusal: its message alone on stderr (its type's
  name when it has none), after its traceback when --traceback is set."""
  # The flag's value, its default if the flags were never parsed (a
  # refusal can come before that in a test); `_TRACEBACK.value` would raise.
  if flags.FLAGS[_TRACEBACK.name].value:
    traceback.print_exception(error)
  print(str(error) or type(error).__name__, file=sys.stderr)


def run(main: Callable[[Any], Any],
        refusals: Tuple[Type[BaseException], ...] = REFUSALS,
        **run_kwargs) -> None:
  """`app.run(main, **run_kwargs)`; an exception of a `refusals` type ends
  the program with `print_refusal` and exit status 1 (`SystemExit(1)`), any
  other as `app.run` ends it (see the module docstring)."""
  try:
    app.run(main, **run_kwargs)
  except refusals as e:  # pylint: disable=catching-non-exception
    print_refusal(e)
    sys.exit(1)
