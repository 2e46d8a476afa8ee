"""The analysis figures as a reader sees them: order, labels, sizes."""

from matplotlib import image as mpimg
from matplotlib import text as mtext
from matplotlib.backends import backend_agg
import numpy as np
import pytest

from realformer_tf.analysis import plots


def _panel(title, num_rows, first=0, num_heads=3, seed=0):
  rng = np.random.default_rng(seed)
  return plots.Panel(title, [
      (f"layer {l}", [rng.gamma(2.0 + l, 0.5, 50) for _ in range(num_heads)])
      for l in range(first, first + num_rows)])


def _drawn(fig):
  """The figure (closed after saving) drawn again on an Agg canvas."""
  backend_agg.FigureCanvasAgg(fig)
  fig.canvas.draw()
  return fig.canvas.get_renderer()


def _texts_outside(fig):
  """Visible texts whose box leaves the figure (1 px tolerance)."""
  renderer, box = _drawn(fig), fig.bbox
  outside = []
  for text in fig.findobj(mtext.Text):
    if not (text.get_visible() and text.get_text()):
      continue
    extent = text.get_window_extent(renderer)
    if (extent.x0 < box.x0 - 1 or extent.y0 < box.y0 - 1 or
        extent.x1 > box.x1 + 1 or extent.y1 > box.y1 + 1):
      outside.append(text.get_text())
  return outside


def test_layer_0_is_the_bottom_row_as_the_title_says(tmp_path):
  fig = plots.violin_figure([_panel("deep", 3), _panel("shallow", 2)],
                            str(tmp_path / "entropy.png"), "entropy")
  assert "layer 0 (the first) at the bottom" in fig.get_suptitle()
  for column in (0, 1):
    by_label = {ax.get_ylabel(): ax.get_position().y0
                for ax in fig.axes if ax.get_visible()
                and ax.get_subplotspec().colspan.start == column}
    layers = sorted(by_label, key=by_label.get)  # Bottom to top.
    assert layers == [f"layer {l}" for l in range(3 - column)], by_label
  # The shorter model's panels align with the deeper one's at the bottom.
  bottoms = sorted({round(ax.get_position().y0, 6) for ax in fig.axes
                    if ax.get_ylabel() == "layer 0"})
  assert len(bottoms) == 1, bottoms
  # Only the bottom row names the x axis; the top row of each column the model.
  assert {ax.get_ylabel() for ax in fig.axes
          if ax.get_xlabel()} == {"layer 0"}
  assert {ax.get_title(): ax.get_ylabel() for ax in fig.axes
          if ax.get_title()} == {"deep": "layer 2", "shallow": "layer 1"}


@pytest.mark.parametrize("metric,num_rows", [("jsd", 1), ("jsd", 3),
                                             ("entropy", 1)])
def test_labels_stay_inside_the_figure_and_beside_the_panels(
    tmp_path, metric, num_rows):
  path = str(tmp_path / f"{metric}.png")
  fig = plots.violin_figure([_panel("model", num_rows, first=1)], path, metric)
  assert _texts_outside(fig) == []
  # The axis label lies alongside the panels, not up into the header.
  renderer = _drawn(fig)
  label = fig._supylabel.get_window_extent(renderer)  # pylint: disable=protected-access
  panels = [ax.get_window_extent(renderer) for ax in fig.axes
            if ax.get_visible()]
  assert label.y0 >= min(p.y0 for p in panels) - 1
  assert label.y1 <= max(p.y1 for p in panels) + 1
  # The PNG has the figure's size at 100 dpi.
  width, height = fig.get_size_inches()
  assert mpimg.imread(path).shape[:2] == (round(100 * height),
                                          round(100 * width))


def _summary(num_layers, num_heads, seed):
  rng = np.random.default_rng(seed)

  def heads():
    out = []
    for h in range(num_heads):
      q1, median, q3 = np.sort(rng.uniform(0.0, 1.0, 3))
      out.append(dict(head=h, count=10, q1=q1, median=median, q3=q3))
    return out

  return dict(
      entropy=[dict(layer=l, heads=heads()) for l in range(num_layers)],
      jsd=[dict(layer=l, previous_layer=l - 1, heads=heads())
           for l in range(1, num_layers)])


def test_summary_figure_is_drawn_not_pasted_at_a_readable_size(tmp_path):
  path = str(tmp_path / "attention.png")
  summaries = {"Post-LN": _summary(4, 3, 0), "Pre-LN": _summary(4, 3, 1),
               "RealFormer": _summary(4, 3, 2)}
  fig = plots.summary_figure(summaries, path)
  # Two rows (entropy, JSD) of one column per model, drawn by matplotlib.
  assert len(fig.axes) == 6
  assert not [ax for ax in fig.axes if ax.images]
  assert [ax.get_title() for ax in fig.axes] == [
      "Post-LN: entropy", "Pre-LN: entropy", "RealFormer: entropy",
      "Post-LN: JSD", "Pre-LN: JSD", "RealFormer: JSD"]
  # One median mark per head and layer (JSD: per pair of layers).
  marks = [sum(len(line.get_xdata()) for line in ax.lines
               if line.get_marker() == "o") for ax in fig.axes]
  assert marks == [12, 12, 12, 9, 9, 9]
  # Every text at 9 pt or more, all of it inside the figure.
  sizes = [t.get_fontsize() for t in fig.findobj(mtext.Text)
           if t.get_visible() and t.get_text()]
  assert min(sizes) >= 9, sizes
  assert _texts_outside(fig) == []
  width, height = fig.get_size_inches()
  assert mpimg.imread(path).shape[:2] == (round(100 * height),
                                          round(100 * width))
  assert 1000 <= round(100 * width) <= 2000


def test_summary_figure_names_its_scale_and_uniform_attention(tmp_path):
  """Issue 39: a tiny model's heads near ln 64 looked like a finding; the
  figure says what scale it is and where uniform attention lies."""
  path = str(tmp_path / "attention.png")
  note = "Tiny scale (4 layers): a check that the pipeline runs."
  summaries = {"Post-LN": _summary(4, 3, 0), "RealFormer": _summary(4, 3, 2)}
  fig = plots.summary_figure(summaries, path, note=note, seq_length=64)
  assert fig.texts[0].get_text().endswith("\n" + note)
  legend, = fig.legends
  assert ("uniform attention over 64 tokens: ln 64 = 4.16 nats"
          in [t.get_text() for t in legend.get_texts()])
  uniform = [line for ax in fig.axes[:2] for line in ax.lines
             if line.get_linestyle() == ":"]
  assert [list(line.get_ydata()) for line in uniform] == [
      [pytest.approx(np.log(64))] * 2] * 2
  assert not [line for ax in fig.axes[2:] for line in ax.lines
              if line.get_linestyle() == ":"]  # JSD has no such line.
  assert _texts_outside(fig) == []
  # One model: a narrow figure, whose title and legend still fit.
  fig = plots.summary_figure({"RealFormer": _summary(4, 2, 2)}, path,
                             note=note * 2, seq_length=64)
  assert _texts_outside(fig) == []
  run = {"train": [[1, 0.1], [2, 0.2], [3, 0.3]], "validation": [[3, 0.25]]}
  fig = plots.curves_figure({"RealFormer": {0: run}},
                            str(tmp_path / "c.png"), note=note)
  title, = fig.texts
  assert title.get_text() == note  # Short enough for one line.
  extent = title.get_window_extent(_drawn(fig))
  assert fig.bbox.x0 <= extent.x0 and extent.x1 <= fig.bbox.x1
  assert fig.bbox.y0 <= extent.y0 and extent.y1 <= fig.bbox.y1


def test_coinciding_curves_stay_visible_apart_inside_the_figure(tmp_path):
  run = {"train": [[1, 0.1], [2, 0.2], [3, 0.3]], "validation": [[3, 0.25]]}
  curves = {label: {0: run, 1: run}
            for label in ("Post-LN", "Pre-LN", "RealFormer")}
  path = str(tmp_path / "curves.png")
  fig = plots.curves_figure(curves, path)
  for ax in fig.axes:
    styles = {(line.get_color(), line.get_linestyle(), line.get_marker(),
               line.get_linewidth()) for line in ax.get_lines()}
    assert len(styles) == 3  # Two seeds of one model share a style.
    assert len({s[1:3] for s in styles}) == 3
  legend, = fig.legends
  assert [t.get_text() for t in legend.get_texts()] == [
      "Post-LN", "Pre-LN", "RealFormer"]
  assert [ax.get_title() for ax in fig.axes] == [
      "training MLM accuracy", "held-out MLM accuracy"]
  # In %, as results.md reports them, under a human label (the axis read
  # "masked_lm_accuracy" over fractions until issue 30).
  assert fig.axes[0].get_ylabel() == "MLM accuracy (%)"
  assert [list(line.get_ydata()) for line in fig.axes[0].get_lines()][0] == (
      pytest.approx([10.0, 20.0, 30.0]))
  assert list(fig.axes[1].get_lines()[0].get_ydata()) == pytest.approx([25.0])
  # Legend, titles and axis labels inside the figure (tick labels past the
  # view limits exist but are not drawn).
  renderer, box = _drawn(fig), fig.bbox
  for text in [*legend.get_texts(), *(ax.title for ax in fig.axes),
               *(ax.xaxis.label for ax in fig.axes), fig.axes[0].yaxis.label]:
    extent = text.get_window_extent(renderer)
    assert box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1, text
    assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1, text
  # 11 x 4.5 inches at 100 dpi.
  assert mpimg.imread(path).shape[:2] == (450, 1100)


@pytest.mark.parametrize("residual, norm_first, name", [
    ("none", False, "Post-LN"), ("none", True, "Pre-LN"),
    ("sum", False, "RealFormer"), ("mean", False, "RealFormer (mean)"),
    ("sum", True, "RealFormer, Pre-LN")])
def test_architecture_name_tells_post_ln_from_pre_ln(residual, norm_first,
                                                     name):
  assert plots.architecture_name(residual, norm_first) == name
