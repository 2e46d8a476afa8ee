"""Errors raised when a checkpoint does not fit the model it is loaded into."""

from typing import Sequence


class CheckpointMismatchError(ValueError):
  """A checkpoint lacks, adds or reshapes variables relative to the model.

  The message lists every problem, one per line; nothing has been assigned.
  """


def format_shape(shape: Sequence[int]) -> str:
  return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def raise_if_problems(header: str, missing: Sequence[str],
                      unexpected: Sequence[str], mismatched: Sequence[str],
                      footer: str = "") -> None:
  """Raises a `CheckpointMismatchError` listing all problems, if any."""
  lines = [header]
  for title, items in (("Missing from the checkpoint", missing),
                       ("In the checkpoint but unused by the model",
                        unexpected),
                       ("Shape mismatches", mismatched)):
    if items:
      lines += [f"{title} ({len(items)}):"] + ["  " + i for i in items]
  if len(lines) > 1:
    raise CheckpointMismatchError("\n".join(lines + [footer] * bool(footer)))
