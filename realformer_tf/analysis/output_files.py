"""The attention analysis' outputs as one set: `entropy.png`, `jsd.png` and
`summary.json` change together, and only ours are replaced.

They are read together (the figures draw what the summary lists), so each
written whole is not enough: a kill between the summary and the figures
left a new summary beside old figures. `write_set` writes them as an
`data.output_sets` set whose manifest is `summary.json` (it gains `files`,
each figure's fingerprint, and `writer`: this package): every file staged
as `<name>.tmp-PID`, then renamed in, the summary last, so a kill before
the renames leaves the previous set byte-identical.

An analysis writes into a folder that may hold anything (`--output_dir`):
before anything is written, `check_output_dir` refuses the folder when it
holds one of the three names that no analysis of ours wrote there (a
user's `entropy.png`), naming it. Ours are those that our `summary.json`
lists, and, after a kill between the renames (new figures, the old
summary or none), those whose bytes the killed writer's staged summary
(`summary.json.tmp-PID`, claimed by its owner file, `core.swap`) records.
"""

import os
from typing import Any, Callable, Dict, Set

import tensorflow as tf

from realformer_tf import utils
from realformer_tf.data import output_sets

# The module to run again (`output_sets.check_set`'s `python -m ...`).
WRITER = "realformer_tf.analysis"
SUMMARY_FILE = "summary.json"
FIGURE_FILES = ("entropy.png", "jsd.png")
OUTPUT_FILES = FIGURE_FILES + (SUMMARY_FILE,)


def _listed_by_ours(manifest) -> Dict[str, Any]:
  """The files a manifest of ours lists ({} for anything else)."""
  if not manifest or manifest.get(output_sets.WRITER_KEY) != WRITER:
    return {}
  return manifest.get(output_sets.FILES_KEY) or {}


def ours(output_dir: str) -> Set[str]:
  """The names of `OUTPUT_FILES` in `output_dir` that an analysis of ours
  wrote (see the module docstring)."""
  summary_path = os.path.join(output_dir, SUMMARY_FILE)
  listed = _listed_by_ours(output_sets.read_manifest(summary_path))
  found = set(listed) | ({SUMMARY_FILE} if listed else set())
  for staged, _ in utils.swap_leftovers(summary_path, utils.TMP_INFIX):
    for name, expected in _listed_by_ours(
        output_sets.read_manifest(staged)).items():
      path = os.path.join(output_dir, name)
      if (tf.io.gfile.exists(path) and
          output_sets.file_sha256(path) == expected.get("sha256")):
        found.add(name)
  return found & set(OUTPUT_FILES)


def check_output_dir(output_dir: str) -> None:
  """Raises before anything is written if `output_dir` holds one of
  `OUTPUT_FILES` that no analysis of ours wrote.

  Raises:
    ValueError: Naming those files, --output_dir and what to do; or if
      `output_dir` is a file.
  """
  utils.check_directory_path(output_dir, "--output_dir",
                             "pass a directory for "
                             f"{', '.join(OUTPUT_FILES)}")
  if not tf.io.gfile.isdir(output_dir):
    return
  own = ours(output_dir)  # Reads the manifests, hashes: once.
  theirs = [name for name in OUTPUT_FILES
            if tf.io.gfile.exists(os.path.join(output_dir, name))
            and name not in own]
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
  """Writes `figures` (`{name in FIGURE_FILES: draw(path)}`) and `summary`
  as `summary.json` into `output_dir`, as one set; returns the summary
  written (with the set's `files` and `writer`).

  Raises:
    ValueError: As `check_output_dir`, before anything is written.
  """
  check_output_dir(output_dir)
  with output_sets.output_set(os.path.join(output_dir, SUMMARY_FILE),
                              WRITER) as outputs:
    for name, draw in figures.items():
      draw(outputs.stage(os.path.join(output_dir, name)))
    written = outputs.commit(summary)
  return written
