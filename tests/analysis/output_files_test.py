"""The analysis' entropy.png, jsd.png and summary.json change together (a
failed write leaves the previous set byte-identical; kills: the writer
suite, tests/core/writer_suite_test.py), and a folder holding one that no analysis of ours wrote is refused
before anything is written (issue 38)."""

import json
import os
import re

from matplotlib import image as mpimg
import pytest

from realformer_tf.analysis import output_files
from realformer_tf.analysis import runner
from realformer_tf.data import output_sets
from tests.helpers import file_trees

SET = sorted(output_files.OUTPUT_FILES)
FIGURES = sorted(output_files.FIGURE_FILES)


def _analyse(analysis_setup, output_dir, num_examples):
  return runner.run_analysis(
      model_dir=analysis_setup["realformer"], output_dir=str(output_dir),
      num_examples=num_examples, batch_size=4)


def _ours(files):
  return {name: files[name] for name in SET}


def _assert_whole(output_dir, num_examples):
  """`output_dir` holds one whole set of `num_examples` and nothing else."""
  assert sorted(os.listdir(output_dir)) == SET
  path = os.path.join(output_dir, output_files.SUMMARY_FILE)
  manifest = output_sets.read_manifest(path)
  assert manifest["writer"] == "realformer_tf.analysis"
  assert sorted(manifest["files"]) == ["entropy.png", "jsd.png"]
  assert output_sets.find_mismatch(path, manifest) is None
  assert manifest["settings"]["num_examples"] == num_examples
  for name in ("entropy.png", "jsd.png"):  # Still PNGs, though staged.
    png = mpimg.imread(os.path.join(output_dir, name), format="png")
    assert png.ndim == 3 and png.shape[0] > 300 and png.shape[1] > 300


def test_a_failed_second_figure_leaves_the_previous_set(analysis_setup,
                                                        tmp_path,
                                                        monkeypatch):
  out = tmp_path / "out"
  _analyse(analysis_setup, out, num_examples=6)
  before = file_trees.files_under(out)
  draw = runner.plots.violin_figure

  def failing(panels, path, metric):
    if metric == "jsd":
      with open(path, "wb") as f:
        f.write(b"\x89PNG half")
      raise OSError("No space left on device")
    return draw(panels, path, metric)

  monkeypatch.setattr(runner.plots, "violin_figure", failing)
  with pytest.raises(OSError, match="No space left"):
    _analyse(analysis_setup, out, num_examples=4)
  assert file_trees.files_under(out) == before


def test_files_no_analysis_wrote_are_refused_before_anything(analysis_setup,
                                                             tmp_path):
  """A user's entropy.png (or a summary.json not ours, beside a jsd.png it
  does not prove) is refused, named, before the analysis runs, and kept."""
  out = tmp_path / "mine"
  out.mkdir()
  (out / "entropy.png").write_bytes(b"my own plot")
  before = file_trees.files_under(out)
  with pytest.raises(ValueError, match=re.escape(
      f"--output_dir={out} holds entropy.png, which no earlier attention "
      "analysis wrote") + ".*would replace it. Pass another --output_dir, or "
      "remove it."):
    _analyse(analysis_setup, out, num_examples=4)
  assert file_trees.files_under(out) == before

  (out / "entropy.png").unlink()
  (out / "jsd.png").write_bytes(b"mine too")
  (out / "summary.json").write_text(json.dumps(
      {"files": {"jsd.png": {}}, "writer": "someone else"}))
  before = file_trees.files_under(out)
  with pytest.raises(ValueError, match=(
      "holds jsd.png, summary.json, which no earlier.*remove them")):
    _analyse(analysis_setup, out, num_examples=4)
  assert file_trees.files_under(out) == before
  (tmp_path / "file").write_text("x")
  with pytest.raises(ValueError, match="--output_dir=.*file' is a file, not"):
    _analyse(analysis_setup, tmp_path / "file", num_examples=4)
  with pytest.raises(ValueError, match="--output_dir=.*file/sub' is under .*"
                     "file', which is a file"):
    _analyse(analysis_setup, tmp_path / "file" / "sub", num_examples=4)
