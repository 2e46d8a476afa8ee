"""How our command-line programs end: a refusal is its message alone.

`run` prints a refusal's message as the last line, exit status 1 (the
traceback with `--traceback`); a crash keeps its traceback. absl only.
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

# What our checks raise, and what the OS raises naming a path.
REFUSALS: Tuple[Type[BaseException], ...] = (
    ValueError, FileNotFoundError, FileExistsError, NotADirectoryError,
    IsADirectoryError)


def print_refusal(error: BaseException) -> None:
  """Prints `error`'s message (or type) alone on stderr, after its traceback
  with --traceback."""
  # Not `_TRACEBACK.value`: it raises if the flags were never parsed.
  if flags.FLAGS[_TRACEBACK.name].value:
    traceback.print_exception(error)
  print(str(error) or type(error).__name__, file=sys.stderr)


def run(main: Callable[[Any], Any],
        refusals: Tuple[Type[BaseException], ...] = REFUSALS,
        **run_kwargs) -> None:
  """`app.run(main, **run_kwargs)`; an exception of a `refusals` type ends
  the program with `print_refusal` and exit status 1, any other as `app.run`
  ends it."""
  try:
    app.run(main, **run_kwargs)
  except refusals as e:  # pylint: disable=catching-non-exception
    print_refusal(e)
    sys.exit(1)
