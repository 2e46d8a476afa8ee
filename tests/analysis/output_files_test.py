"""The analysis' entropy.png, jsd.png and summary.json change together (a
kill leaves the previous set byte-identical; the next run replaces it
whole), and a folder holding one that no analysis of ours wrote is refused
before anything is written (issue 38)."""

import json
import os
import re
import signal

from matplotlib import image as mpimg
import pytest

from realformer_tf.analysis import output_files
from realformer_tf.analysis import runner
from realformer_tf.data import output_sets
from tests.helpers import file_trees
from tests.helpers import kill_writer

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


def analyse_killed_in_second_figure(model_dir, output_dir, num_examples):
  """`kill_writer`'s target (K=0: it kills itself): the analysis SIGKILLed
  while it writes jsd.png, half of it on disk (the point at which the
  in-place writer had already replaced summary.json and entropy.png)."""
  draw = runner.plots.violin_figure

  def killed_in_jsd(panels, path, metric):
    if metric == "jsd":
      with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n half")
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return draw(panels, path, metric)

  runner.plots.violin_figure = killed_in_jsd
  runner.run_analysis(model_dir=model_dir, output_dir=output_dir,
                      num_examples=num_examples, batch_size=4)


def test_a_kill_inside_the_write_leaves_the_previous_set(analysis_setup,
                                                         tmp_path):
  """Killed while writing the second figure: the previous set is
  byte-identical (not rewritten: same mtimes); a rerun into its own folder
  removes the killed run's temps and replaces the set whole."""
  out = tmp_path / "out"
  summary = _analyse(analysis_setup, out, num_examples=6)
  assert summary == json.loads((out / "summary.json").read_text())
  _assert_whole(out, 6)
  before = file_trees.files_under(out)
  kill_writer.run_killed(0, "tests.analysis.output_files_test",
                         "analyse_killed_in_second_figure",
                         model_dir=analysis_setup["realformer"],
                         output_dir=str(out), num_examples=4)
  after = file_trees.files_under(out)
  assert _ours(after) == _ours(before)
  assert sorted(re.sub(r"-\d+", "-PID", name) for name in set(after) - set(
      before)) == [f"{name}.tmp-PID{owner}" for name in FIGURES
                   for owner in ("", ".owner")]
  _analyse(analysis_setup, out, num_examples=4)
  _assert_whole(out, 4)
  replaced = file_trees.files_under(out)
  assert all(replaced[name][0] != before[name][0] for name in SET)


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


def test_a_first_run_killed_between_its_renames_is_rerun(analysis_setup,
                                                         tmp_path):
  """Killed after entropy.png was renamed in, into an empty folder: no
  summary.json lists it, but the killed run's journal names the set's
  renames, so the next run finishes that set and writes the whole new one."""
  out = tmp_path / "out"
  # Before its second rename into a final path (jsd.png).
  kill_writer.run_killed(
      2, "realformer_tf.analysis.runner", "run_analysis",
      model_dir=analysis_setup["realformer"], output_dir=str(out),
      num_examples=4, batch_size=4)
  assert "entropy.png" in os.listdir(out)
  assert not (out / "summary.json").exists()
  assert [name for name in os.listdir(out) if ".pending-" in name]
  _analyse(analysis_setup, out, num_examples=6)
  _assert_whole(out, 6)


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
