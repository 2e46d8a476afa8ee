"""Violin plots of per-head attention statistics in the paper's colours.

`violin_figure`: a panel per layer, a violin per head, coloured by its median
against the paper's thresholds; `summary_figure` compares several models'
`summary.json`, `curves_figure` draws the train and eval MLM accuracy curves.
"""

import dataclasses
import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")
from matplotlib import figure  # pylint: disable=g-import-not-at-top
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
from matplotlib import lines  # pylint: disable=g-import-not-at-top
from matplotlib import patches  # pylint: disable=g-import-not-at-top
from matplotlib import ticker  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top

ENTROPY_THRESHOLDS = (1.5, 4.5)
JSD_THRESHOLDS = (0.25, 0.75)
# Paper colours: red = high, yellow = middle, blue = low.
COLORS = ("#3b75af", "#f2c12e", "#d62728")  # low, middle, high

_METRICS = {
    "entropy": dict(
        thresholds=ENTROPY_THRESHOLDS,
        ylabel="entropy (nats)",
        title=("Attention entropy per token (nats), per head; heads sorted "
               "by median\none row per layer, layer 0 (the first) at the "
               "bottom"),
        what="entropy"),
    "jsd": dict(
        thresholds=JSD_THRESHOLDS,
        ylabel="JSD (bits)",
        title=("Jensen-Shannon divergence per token (bits, max 1) between\n"
               "head h of layer l-1 and head h of layer l; heads sorted by "
               "median\none row per pair of layers, the first pair at the "
               "bottom"),
        what="JSD"),
}


@dataclasses.dataclass
class Panel:
  """One model's data: a title and rows of (label, per-head samples)."""
  title: str
  rows: List[Tuple[str, Sequence[np.ndarray]]]


def architecture_name(residual_attention: str, norm_first: bool) -> str:
  """The paper's name of an encoder: Post-LN, Pre-LN or RealFormer (with its
  residual mode unless `sum`)."""
  if residual_attention and residual_attention != "none":
    return "RealFormer" + ("" if residual_attention == "sum" else
                           f" ({residual_attention})") + (
                               ", Pre-LN" if norm_first else "")
  return "Pre-LN" if norm_first else "Post-LN"


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


def violin_figure(panels: Sequence[Panel], path: str, metric: str
                  ) -> figure.Figure:
  """Writes a grid of violin plots (rows: layers, layer 0 at the bottom;
  columns: `panels`) of `metric` ("entropy" or "jsd") to the PNG `path`;
  returns the (closed) figure."""
  spec = _METRICS[metric]
  thresholds = spec["thresholds"]
  num_rows = max([len(p.rows) for p in panels] + [1])
  num_heads = max([len(samples) for p in panels for _, samples in p.rows] + [1])
  # Shared y axis: every value and both thresholds in view.
  y_max = 1.05 * max([thresholds[1]] + [
      float(np.max(s)) for p in panels for _, samples in p.rows
      for s in samples if np.size(s)])

  # Fixed margins in inches, so the layout reads the same for 1 or 24 rows.
  title_height = 0.22 * (spec["title"].count("\n") + 1)
  header, footer, left, row_height = 1.15 + title_height, 0.55, 1.1, 1.6
  width = max(7.0, left + len(panels) * (0.6 + 0.55 * max(num_heads, 4)))
  height = header + row_height * max(num_rows, 2) + footer
  fig, axes = plt.subplots(num_rows, len(panels), figsize=(width, height),
                           sharey=True, squeeze=False)
  for col, panel in enumerate(panels):
    top = num_rows - len(panel.rows)  # Grid row of the panel's last row.
    for grid_row in range(top):
      axes[grid_row][col].set_visible(False)
    for index, (label, samples) in enumerate(panel.rows):
      ax = axes[num_rows - 1 - index][col]
      heads = [(h, np.asarray(s)) for h, s in enumerate(samples) if np.size(s)]
      heads.sort(key=lambda hs: float(np.median(hs[1])))
      for x, (_, values) in enumerate(heads):
        _violin(ax, x, values, color_for(float(np.median(values)), thresholds))
      for t in thresholds:
        ax.axhline(t, color="gray", linestyle="--", linewidth=0.7, zorder=0)
      ax.set_xlim(-0.6, max(len(heads), 1) - 0.4)
      ax.set_ylim(0.0, y_max)
      ax.set_xticks(range(len(heads)))
      ax.set_xticklabels([f"h{h}" for h, _ in heads], fontsize=8)
      ax.tick_params(axis="y", labelsize=8)
      ax.set_ylabel(label, fontsize=9)
      ax.grid(axis="y", alpha=0.2)
      if index == len(panel.rows) - 1:
        ax.set_title(panel.title, fontsize=10, fontweight="bold")
      if index == 0:
        ax.set_xlabel("head (sorted by median)", fontsize=9)

  low, high = thresholds
  what = spec["what"]
  fig.suptitle(spec["title"], fontsize=11, y=1.0 - 0.12 / height, va="top")
  fig.legend(handles=_legend_handles(what, low, high), loc="upper center",
             ncol=5 if width >= 11 else 3, fontsize=8.5, frameon=False,
             bbox_to_anchor=(0.5, 1.0 - (0.2 + title_height) / height))
  # Centred on the panels (not the figure, whose header is taller).
  fig.supylabel(spec["ylabel"], fontsize=10, x=0.12 / width, ha="left",
                y=(footer + (height - header)) / 2 / height)
  fig.subplots_adjust(left=left / width, right=1.0 - 0.15 / width,
                      bottom=footer / height, top=1.0 - header / height,
                      hspace=0.6, wspace=0.12)
  # PNG by name: a staged `entropy.png.tmp-PID` has another suffix.
  fig.savefig(path, dpi=100, format="png")
  plt.close(fig)
  return fig


def _legend_handles(what: str, low: float, high: float) -> List[Any]:
  """The colour key of the paper's thresholds, median and quartile marks."""
  return [
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


def summary_figure(summaries: Dict[str, Dict[str, Any]], path: str,
                   note: Optional[str] = None,
                   seq_length: Optional[int] = None) -> figure.Figure:
  """Entropy and JSD of several models, drawn from their `summary.json`.

  A column per model (`summaries`: {title: a model of `summary.json`}), a row
  per metric, per layer each head's median and quartiles; `note` goes under
  the title; with `seq_length`, uniform attention's entropy is drawn. Writes
  the PNG `path`; returns the (closed) figure.
  """
  fig, axes = plt.subplots(
      2, len(summaries), squeeze=False, sharey="row", layout="constrained",
      figsize=(1.5 + 4.5 * len(summaries), 8.5))
  for row, metric in enumerate(("entropy", "jsd")):
    spec = _METRICS[metric]
    thresholds = spec["thresholds"]
    for col, (title, model) in enumerate(summaries.items()):
      ax = axes[row][col]
      layers = [r["layer"] for r in model[metric]]
      for layer_row in model[metric]:
        heads = sorted((h for h in layer_row["heads"]
                        if h["median"] is not None),
                       key=lambda h: h["median"])
        offsets = np.linspace(-0.3, 0.3, len(heads)) if len(heads) > 1 else [0]
        for x, head in zip(layer_row["layer"] + np.asarray(offsets), heads):
          ax.vlines(x, head["q1"], head["q3"], color="black", linewidth=1.2)
          ax.plot(x, head["median"], "o", markersize=6, markeredgecolor="black",
                  markeredgewidth=0.6,
                  color=color_for(head["median"], thresholds))
      for t in thresholds:
        ax.axhline(t, color="gray", linestyle="--", linewidth=0.8, zorder=0)
      if metric == "entropy" and seq_length:
        ax.axhline(np.log(seq_length), color="purple", linestyle=":",
                   linewidth=1.4, zorder=0)
      ax.set_xticks(layers)
      if metric == "jsd":
        ax.set_xticklabels([f"{l - 1}\u2192{l}" for l in layers])
      if layers:
        ax.set_xlim(min(layers) - 0.6, max(layers) + 0.6)
      ax.set_ylim(bottom=0.0)
      ax.tick_params(labelsize=10)
      ax.grid(axis="y", alpha=0.25)
      ax.set_title(f"{title}: {spec['what']}", fontsize=12)
      ax.set_xlabel("layer pair (l-1\u2192l)" if metric == "jsd" else "layer",
                    fontsize=11)
      if col == 0:
        ax.set_ylabel(spec["ylabel"], fontsize=11)
  (e_low, e_high), (j_low, j_high) = ENTROPY_THRESHOLDS, JSD_THRESHOLDS
  handles = [
      patches.Patch(facecolor=color, edgecolor="black",
                    label=label)
      for color, label in zip(COLORS[::-1], (
          "median above the high threshold", "median between the thresholds",
          "median below the low threshold"))] + [
          lines.Line2D([], [], color="black", linewidth=1.2,
                       label="quartiles (q1-q3)"),
          lines.Line2D([], [], color="gray", linestyle="--", linewidth=0.8,
                       label=f"thresholds: entropy {e_low:g} / {e_high:g} "
                             f"nats, JSD {j_low:g} / {j_high:g} bits")]
  if seq_length:
    handles.append(lines.Line2D(
        [], [], color="purple", linestyle=":", linewidth=1.4,
        label=f"uniform attention over {seq_length} tokens: ln {seq_length} "
              f"= {np.log(seq_length):.2f} nats"))
  # Lines as wide as the figure (one model's column is narrow).
  chars = int(fig.get_figwidth() * 100 / 9)
  title = ["Attention per head (median \u25cf, quartiles |; heads sorted by "
           "median within each layer)"] + ([note] if note else [])
  fig.suptitle("\n".join(textwrap.fill(t, chars) for t in title),
               fontsize=13)
  fig.legend(handles=handles, loc="outside lower center",
             ncol=min(3, len(summaries)), fontsize=10, frameon=False)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return fig


# One style per model, so coinciding curves stay visible.
CURVE_STYLES = (
    dict(linestyle="-", marker="o", linewidth=2.6, markersize=8),
    dict(linestyle="--", marker="s", linewidth=1.8, markersize=6),
    dict(linestyle=":", marker="^", linewidth=1.4, markersize=5),
    dict(linestyle="-.", marker="x", linewidth=1.0, markersize=4))


def curves_figure(curves: Dict[str, Dict[int, Dict]], path: str,
                  note: Optional[str] = None) -> figure.Figure:
  """Train and eval MLM accuracy (fractions, drawn as %) of every run, one
  style per model; `curves`: {label: {seed: {"train": [[step, value], ...],
  "validation": [...]}}}. Writes a PNG to `path` (a path or a binary file);
  returns the (closed) figure."""
  fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True,
                           layout="constrained")
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for i, (label, by_seed) in enumerate(curves.items()):
    for seed, run in sorted(by_seed.items()):
      for ax, split in zip(axes, ("train", "validation")):
        if run[split]:
          steps, values = zip(*run[split])
          ax.plot(steps, 100 * np.asarray(values),
                  color=colours[i % len(colours)],
                  markerfacecolor="none", alpha=0.85,
                  markevery=max(1, len(steps) // 12),
                  label=label if seed == min(by_seed) else None,
                  **CURVE_STYLES[i % len(CURVE_STYLES)])
  for ax, title in zip(axes, ("training MLM accuracy",
                             "held-out MLM accuracy")):
    ax.set_title(title, fontsize=12)
    ax.set_xlabel("step", fontsize=11)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.tick_params(labelsize=10)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("MLM accuracy (%)", fontsize=11)
  # Above the panels, where it hides no curve; one entry per model.
  by_label = {}
  for ax in axes:
    for handle, label in zip(*ax.get_legend_handles_labels()):
      by_label.setdefault(label, handle)
  fig.legend(by_label.values(), by_label.keys(), loc="outside upper center",
             ncol=max(len(by_label), 1), fontsize=10, frameon=False)
  if note:  # Below the panels: the legend holds the space above them.
    fig.supxlabel(textwrap.fill(note, 130), fontsize=10)
  fig.savefig(path, dpi=100, format="png")
  plt.close(fig)
  return fig
