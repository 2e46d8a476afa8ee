"""The attention analysis' outputs as one set: `entropy.png`, `jsd.png` and
`summary.json` (the manifest) change together, and only ours are replaced.
"""

import os
from typing import Any, Callable, Dict

import tensorflow as tf

from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import output_sets

# The module to run again (`output_sets.check_set`'s `python -m ...`).
WRITER = "realformer_tf.analysis"
SUMMARY_FILE = "summary.json"
FIGURE_FILES = ("entropy.png", "jsd.png")
OUTPUT_FILES = FIGURE_FILES + (SUMMARY_FILE,)


def check_output_dir(output_dir: str) -> None:
  """Raises ValueError, naming them, if `output_dir` is a file or holds one of
  `OUTPUT_FILES` that no analysis of ours wrote (after the sweep)."""
  utils.check_directory_path(output_dir, "--output_dir",
                             "pass a directory for "
                             f"{', '.join(OUTPUT_FILES)}")
  if not tf.io.gfile.isdir(output_dir):
    return
  writes.sweep(output_dir, utils.GFILE_OPS)
  theirs = [os.path.basename(path) for path in ownership.foreign(
      [os.path.join(output_dir, name) for name in OUTPUT_FILES],
      os.path.join(output_dir, SUMMARY_FILE), utils.GFILE_OPS, WRITER)]
  if theirs:
    raise ValueError(
        f"--output_dir={output_dir} holds {', '.join(theirs)}, which no "
        f"earlier attention analysis wrote (its {SUMMARY_FILE} lists the "
        f"files it wrote; an older version's lists none); the analysis "
        f"writes {', '.join(OUTPUT_FILES)} and would replace "
        f"{'them' if len(theirs) > 1 else 'it'}. Pass another --output_dir, "
        f"or remove {'them' if len(theirs) > 1 else 'it'}.")


def write_set(output_dir: str, summary: Dict[str, Any],
              figures: Dict[str, Callable[[str], Any]]) -> Dict[str, Any]:
  """Writes `figures` ({name: draw(path)}) and `summary` into `output_dir` as
  one set (refused as `check_output_dir`); returns the summary written."""
  check_output_dir(output_dir)
  with output_sets.output_set(os.path.join(output_dir, SUMMARY_FILE),
                              WRITER) as outputs:
    for name, draw in figures.items():
      draw(outputs.stage(os.path.join(output_dir, name)))
    written = outputs.commit(summary)
  return written
