"""Table 2, its ordering line and the curves figure both reproductions
write."""
from matplotlib import image
import pytest

from realformer_tf.reproduce import tables

LABELS = {"post_ln": "Post-LN", "pre_ln": "Pre-LN", "realformer": "RealFormer"}


def _pretraining(accuracies, losses=None):
  return tables.summarize_pretraining({
      arch: [{"eval_logs": {"masked_lm_accuracy": a,
                            "lm_example_loss": (losses or {}).get(arch, 3.0)}}
             for a in values] for arch, values in accuracies.items()})


def test_rows_in_label_order_then_the_ordering_best_first():
  lines = tables.pretraining_table(LABELS, _pretraining(
      {"post_ln": [0.30], "pre_ln": [0.25], "realformer": [0.35]},
      {"realformer": 2.5}))
  assert lines[:5] == [
      "| Architecture | MLM accuracy (%) | MLM loss |", "|---|---|---|",
      "| Post-LN | 30.00 (1 seed) | 3.00 (1 seed) |",
      "| Pre-LN | 25.00 (1 seed) | 3.00 (1 seed) |",
      "| RealFormer | 35.00 (1 seed) | 2.50 (1 seed) |"]
  assert lines[-1] == (
      "Ordering by held-out MLM accuracy: RealFormer 35.00 > Post-LN 30.00 > "
      "Pre-LN 25.00 (the paper's, BERT-Base after 1M steps: RealFormer 73.94 "
      "> Post-LN 73.64 > Pre-LN 73.21).")


def test_a_tie_at_the_shown_precision_is_a_tie_in_label_order():
  line = tables.ordering(LABELS, _pretraining(
      {"post_ln": [0.300001], "pre_ln": [0.3], "realformer": [0.2]}))
  assert line.startswith("Ordering by held-out MLM accuracy: Post-LN 30.00 = "
                         "Pre-LN 30.00 > RealFormer 20.00 (")


def test_medians_over_seeds_order_the_architectures():
  line = tables.ordering(LABELS, _pretraining(
      {"post_ln": [0.1, 0.5, 0.4], "pre_ln": [0.3, 0.3, 0.3],
       "realformer": [0.45, 0.0, 0.44]}))
  assert "Realformer" not in line and line.index("RealFormer 44.00") < (
      line.index("Post-LN 40.00")) < line.index("Pre-LN 30.00")


def test_the_curves_figure(tmp_path):
  path = str(tmp_path / "curves.png")
  tables.curves_figure(
      {"realformer": {0: {"train": [[1, 0.1], [2, 0.2]],
                          "validation": [[2, 0.15]]}}}, LABELS, path)
  assert image.imread(path).shape[:2] == (450, 1100)


def test_an_output_dir_is_used_only_if_it_holds_a_reproductions_names():
  """Issue 38: a reproduction wrote results.md (and the rest) into any
  --output_dir, over a user's files of those names."""
  own = ("data", "results.md", "curves.png")
  tables.check_output_dir("o", [], own)
  tables.check_output_dir("o", ["data/", "results.md",
                                "curves.png.tmp-12", "curves.png.tmp-12.owner"],
                          own)
  with pytest.raises(ValueError) as e:
    tables.check_output_dir("/runs/r", ["ckpt-5.index", "data", "params.yaml",
                                        "train.lock"], own)
  assert str(e.value) == (
      "--output_dir='/runs/r' holds ckpt-5.index, params.yaml, train.lock, "
      "which a reproduction does not write (a train.py run: it holds "
      "params.yaml, train.lock); a reproduction writes curves.png, data, "
      "results.md there, so nothing was written. Pass a new or empty "
      "--output_dir, or one a reproduction wrote.")
  with pytest.raises(ValueError, match="holds notes.txt, which a "):
    tables.check_output_dir("o", ["notes.txt", "results.md"], own)
  with pytest.raises(ValueError, match="is a file, not a directory"):
    tables.check_output_dir("o", None, own)
