"""Errors raised when a checkpoint does not fit the model it is loaded into."""

from typing import Sequence


class CheckpointMismatchError(ValueError):
  """A checkpoint lacks, adds or reshapes variables relative to the model.

  The message lists every problem, one per line, each naming the variable
  (and, for shape mismatches, both shapes), so one run shows all of them.
  Nothing has been assigned when this is raised.
  """


def format_shape(shape: Sequence[int]) -> str:
  return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def raise_if_problems(header: str, missing: Sequence[str],
                      unexpected: Sequence[str], mismatched: Sequence[str],
                      footer: str = "") -> None:
  """Raises a `CheckpointMismatchError` listing all problems, if any."""
  if not (missing or unexpected or mismatched):
    return
  lines = [header]
  if missing:
    lines.append(f"Missing from the checkpoint ({len(missing)}):")
    lines.extend("  " + m for m in missing)
  if unexpected:
    lines.append(f"In the checkpoint but unused by the model "
                 f"({len(unexpected)}):")
    lines.extend("  " + u for u in unexpected)
  if mismatched:
    lines.append(f"Shape mismatches ({len(mismatched)}):")
    lines.extend("  " + s for s in mismatched)
  if footer:
    lines.append(footer)
  raise CheckpointMismatchError("\n".join(lines))
