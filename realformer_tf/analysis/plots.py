"""Violin plots of per-head attention statistics in the paper's colours.

One figure per metric. Each model is a column of panels; each panel row is
one layer (for JSD: one pair of adjacent layers) with one violin per head,
heads sorted by their median (ascending). A violin's colour encodes its
median against the paper's thresholds:

* entropy (nats): red > 4.5, yellow 1.5-4.5, blue < 1.5;
* JSD (bits, in [0, 1]): red > 0.75, yellow 0.25-0.75, blue < 0.25.
"""

import dataclasses
from typing import List, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
from matplotlib import lines  # pylint: disable=g-import-not-at-top
from matplotlib import patches  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

ENTROPY_THRESHOLDS = (1.5, 4.5)
JSD_THRESHOLDS = (0.25, 0.75)
# Paper colours: red = high, yellow = middle, blue = low.
COLORS = ("#3b75af", "#f2c12e", "#d62728")  # low, middle, high

_METRICS = {
    "entropy": dict(
        thresholds=ENTROPY_THRESHOLDS,
        ylabel="entropy (nats); one row per layer",
        title=("Attention entropy per token (nats), per head; heads sorted "
               "by median\nlayer 0 = bottom layer"),
        what="entropy"),
    "jsd": dict(
        thresholds=JSD_THRESHOLDS,
        ylabel="JSD (bits); one row per pair of adjacent layers",
        title=("Jensen-Shannon divergence per token (bits, max 1) "
               "between\nhead h of layer l-1 and head h of layer l; heads "
               "sorted by median"),
        what="JSD"),
}


@dataclasses.dataclass
class Panel:
  """One model's data: a title and rows of (label, per-head samples)."""
  title: str
  rows: List[Tuple[str, Sequence[np.ndarray]]]


def color_for(median: float, thresholds: Tuple[float, float]) -> str:
  """Paper colour of a median: blue < low <= yellow <= high < red."""
  return COLORS[int(median >= thresholds[0]) + int(median > thresholds[1])]


def _violin(ax, position: float, values: np.ndarray, color: str) -> None:
  """One violin; a flat bar when the values have (almost) no spread."""
  median = float(np.median(values))
  bodies = []
  if values.size >= 2 and np.ptp(values) > 1e-6 * max(1.0, abs(median)):
    try:
      bodies = ax.violinplot([values], positions=[position], widths=0.8,
                             showmedians=False, showextrema=False)["bodies"]
    except (np.linalg.LinAlgError, ValueError):  # singular KDE
      pass
  for body in bodies:
    body.set(facecolor=color, edgecolor="black", linewidth=0.5, alpha=0.85)
  if not bodies:
    ax.add_patch(patches.Rectangle((position - 0.4, median - 0.01), 0.8, 0.02,
                                   facecolor=color, edgecolor="black",
                                   linewidth=0.5))
  q1, q3 = np.quantile(values, [0.25, 0.75])
  ax.vlines(position, q1, q3, color="black", linewidth=1.5)
  ax.hlines(median, position - 0.25, position + 0.25, color="black",
            linewidth=1.5)


def violin_figure(panels: Sequence[Panel], path: str, metric: str) -> None:
  """Writes a grid of violin plots (rows: layers, columns: models) to `path`.

  Args:
    panels: One `Panel` per model (drawn side by side).
    path: Output PNG path.
    metric: "entropy" or "jsd" (selects thresholds and labels).
  """
  spec = _METRICS[metric]
  thresholds = spec["thresholds"]
  num_rows = max([len(p.rows) for p in panels] + [1])
  num_heads = max([len(samples) for p in panels for _, samples in p.rows] + [1])
  # Shared y axis: every value and both thresholds in view.
  y_max = 1.05 * max([thresholds[1]] + [
      float(np.max(s)) for p in panels for _, samples in p.rows
      for s in samples if np.size(s)])

  # Fixed margins in inches, so the layout reads the same for 1 or 24 rows.
  header, footer, left, row_height = 1.6, 0.55, 1.0, 1.6
  width = max(7.0, left + len(panels) * (0.6 + 0.55 * max(num_heads, 4)))
  height = header + row_height * num_rows + footer
  fig, axes = plt.subplots(num_rows, len(panels), figsize=(width, height),
                           sharey=True, squeeze=False)
  for col, panel in enumerate(panels):
    for row in range(num_rows):
      ax = axes[row][col]
      if row >= len(panel.rows):
        ax.set_visible(False)
        continue
      label, samples = panel.rows[row]
      heads = [(h, np.asarray(s)) for h, s in enumerate(samples) if np.size(s)]
      heads.sort(key=lambda hs: float(np.median(hs[1])))
      for x, (_, values) in enumerate(heads):
        _violin(ax, x, values, color_for(float(np.median(values)), thresholds))
      for t in thresholds:
        ax.axhline(t, color="gray", linestyle="--", linewidth=0.7, zorder=0)
      ax.set_xlim(-0.6, max(len(heads), 1) - 0.4)
      ax.set_ylim(0.0, y_max)
      ax.set_xticks(range(len(heads)))
      ax.set_xticklabels([f"h{h}" for h, _ in heads], fontsize=7)
      ax.tick_params(axis="y", labelsize=7)
      ax.set_ylabel(label, fontsize=9)
      ax.grid(axis="y", alpha=0.2)
      if row == 0:
        ax.set_title(panel.title, fontsize=10, fontweight="bold")
      if row == len(panel.rows) - 1:
        ax.set_xlabel("head (sorted by median)", fontsize=8)

  low, high = thresholds
  what = spec["what"]
  handles = [
      patches.Patch(facecolor=COLORS[2], edgecolor="black",
                    label=f"median {what} > {high:g}"),
      patches.Patch(facecolor=COLORS[1], edgecolor="black",
                    label=f"{low:g} \u2264 median \u2264 {high:g}"),
      patches.Patch(facecolor=COLORS[0], edgecolor="black",
                    label=f"median {what} < {low:g}"),
      lines.Line2D([], [], color="black", linewidth=1.5,
                   label="median (\u2014) and quartiles (|)"),
      lines.Line2D([], [], color="gray", linestyle="--", linewidth=0.7,
                   label="colour thresholds"),
  ]
  fig.suptitle(spec["title"], fontsize=11, y=1.0 - 0.12 / height, va="top")
  fig.legend(handles=handles, loc="upper center",
             ncol=5 if width >= 11 else 3, fontsize=8.5, frameon=False,
             bbox_to_anchor=(0.5, 1.0 - 0.6 / height))
  fig.supylabel(spec["ylabel"], fontsize=10)
  fig.subplots_adjust(left=left / width, right=1.0 - 0.15 / width,
                      bottom=footer / height, top=1.0 - header / height,
                      hspace=0.6, wspace=0.12)
  fig.savefig(path, dpi=100)
  plt.close(fig)

