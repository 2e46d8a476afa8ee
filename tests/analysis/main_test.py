"""End-to-end attention analysis on tiny model dirs (in-process and CLI)."""

import json
import math
import os
import sys
import types

from matplotlib import image as mpimg
import numpy as np
import pytest
from scipy import stats as sp_stats
from scipy.spatial import distance

from realformer_tf.analysis import runner
from tests.analysis import conftest
from tests.helpers import watchdog

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _check_outputs(output_dir, num_models, lengths):
  for name in ("entropy.png", "jsd.png"):
    png = mpimg.imread(os.path.join(output_dir, name))
    assert png.ndim == 3 and png.shape[0] > 300 and png.shape[1] > 300
  with open(os.path.join(output_dir, "summary.json")) as f:
    summary = json.load(f)
  assert len(summary["models"]) == num_models
  assert summary["settings"]["num_examples"] == len(lengths)
  tokens = sum(lengths)
  for model in summary["models"]:
    assert model["num_examples"] == len(lengths)
    assert model["num_tokens"] == tokens
    assert [row["layer"] for row in model["entropy"]] == [0, 1]
    assert [(row["layer"], row["previous_layer"]) for row in model["jsd"]] == [
        (1, 0)]
    for row in model["entropy"] + model["jsd"]:
      assert [h["head"] for h in row["heads"]] == [0, 1, 2, 3]
      for head in row["heads"]:
        assert head["count"] == tokens
        assert head["exact_quantiles"] is True
        assert head["q1"] <= head["median"] <= head["q3"]
    for head in model["entropy"][1]["heads"]:
      assert 0.0 <= head["min"] and head["max"] <= math.log(16) + 1e-5
    for head in model["jsd"][0]["heads"]:
      assert 0.0 <= head["min"] and head["max"] <= 1.0 + 1e-6  # bits
    magnitude = model["score_magnitude"]
    assert [m["layer"] for m in magnitude] == [0, 1]
    assert all(m["count"] == 4 * sum(n * n for n in lengths) for m in magnitude)
    assert all(0 < m["mean_abs"] <= m["max_abs"] for m in magnitude)
  return summary


def test_default_validation_data_matches_direct_scipy_computation(
    analysis_setup, tmp_path):
  out = str(tmp_path / "out")
  summary = runner.run_analysis(
      model_dir=analysis_setup["realformer"], output_dir=out,
      num_examples=6, batch_size=4)
  lengths = conftest.LENGTHS[:6]   # cut in the middle of the second batch
  assert _check_outputs(out, 1, lengths) == json.loads(json.dumps(summary))
  model = summary["models"][0]
  assert model["residual_attention"] == "sum"

  # Recompute every per-token value with scipy, straight from the encoder.
  loaded = runner.load_model(analysis_setup["realformer"])
  entropies, jsds = {}, {}
  sums = np.zeros(2)
  for batch in runner.build_dataset(loaded, batch_size=6).take(1):
    outputs = loaded.encoder(batch, training=False)
    probs = [p.numpy().astype(np.float64) for p in outputs["attention_scores"]]
    mask = batch["input_mask"].numpy()
    for b, n in enumerate(mask.sum(-1)):
      assert n == lengths[b]
      for layer in range(2):
        s = outputs["residual_scores"][layer].numpy()[b, :, :n, :n]
        sums[layer] += np.abs(s).sum()
        for h in range(4):
          for t in range(n):
            entropies.setdefault((layer, h), []).append(
                sp_stats.entropy(probs[layer][b, h, t, :n]))
            if layer:
              jsds.setdefault(h, []).append(distance.jensenshannon(
                  probs[0][b, h, t, :n], probs[1][b, h, t, :n], base=2) ** 2)
  for (layer, h), values in entropies.items():
    head = model["entropy"][layer]["heads"][h]
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    np.testing.assert_allclose([head["q1"], head["median"], head["q3"]],
                               [q1, median, q3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(head["mean"], np.mean(values), rtol=1e-5)
  for h, values in jsds.items():
    head = model["jsd"][0]["heads"][h]
    np.testing.assert_allclose(head["median"], np.median(values), rtol=1e-4,
                               atol=1e-6)
  count = 4 * sum(n * n for n in lengths)
  np.testing.assert_allclose(
      [m["mean_abs"] for m in model["score_magnitude"]], sums / count,
      rtol=1e-5)


def test_cli_with_compare_model(analysis_setup, tmp_path):
  out = str(tmp_path / "cli")
  result = watchdog.run(
      [sys.executable, "-m", "realformer_tf.analysis",
       f"--model_dir={analysis_setup['realformer']}",
       f"--compare_model_dir={analysis_setup['bert']}",
       f"--input_data={analysis_setup['records']}",
       f"--output_dir={out}", "--batch_size=3", "--num_examples=100"],
      cwd=REPO)
  assert result.returncode == 0, result.stderr[-3000:]
  summary = _check_outputs(out, 2, conftest.LENGTHS)
  assert [m["name"] for m in summary["models"]] == ["realformer", "bert"]
  assert [m["residual_attention"] for m in summary["models"]] == ["sum", "none"]
  assert summary["settings"]["num_examples_requested"] == 100
  # The printed per-layer table.
  assert "realformer (residual_attention=sum): 10 examples, 94 tokens" in (
      result.stdout)
  assert "bert (residual_attention=none)" in result.stdout
  # Not a terminal: line-based progress, and where the files went.
  assert "attention analysis: 10 examples done" in result.stdout
  assert f"Wrote entropy.png, jsd.png and summary.json to {out}" in (
      result.stdout)


def test_text_input(analysis_setup, tmp_path):
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
           "on", "mat", "##s"]
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(vocab) + "\n")
  text_file = tmp_path / "text.txt"
  text_file.write_text(
      "The cat sat\n\ncats sat on the mat\nthe dog\n" + "cat " * 20 + "\n")
  summary = runner.run_analysis(
      model_dir=analysis_setup["realformer"], output_dir=str(tmp_path / "o"),
      input_text=str(text_file), vocab_file=str(vocab_file), batch_size=2)
  model = summary["models"][0]
  # [CLS] + word pieces + [SEP]: 3+2, 6+2 ("cat ##s"), 2+2 ("dog" = [UNK]),
  # and 20 words truncated to seq_length 16.
  assert model["num_examples"] == 4
  assert model["num_tokens"] == 5 + 8 + 4 + 16
  assert model["entropy"][0]["heads"][0]["count"] == 33


def test_bad_inputs_give_clear_errors(analysis_setup, tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    runner.run_analysis(str(tmp_path / "missing"), str(tmp_path / "o"))
  with pytest.raises(FileNotFoundError, match="params.yaml not found"):
    runner.run_analysis(str(tmp_path), str(tmp_path / "o"))
  with pytest.raises(FileNotFoundError, match="matches no files"):
    runner.run_analysis(analysis_setup["realformer"], str(tmp_path / "o"),
                        input_data=str(tmp_path / "nothing-*.tfrecord"))
  empty = conftest.write_pretraining_records(tmp_path / "empty.tfrecord", ())
  with pytest.raises(ValueError, match="no examples read from .*empty"):
    runner.run_analysis(analysis_setup["realformer"], str(tmp_path / "o"),
                        input_data=empty)
  with pytest.raises(ValueError, match="--input_text needs --vocab_file"):
    runner.run_analysis(analysis_setup["realformer"], str(tmp_path / "o"),
                        input_text=str(tmp_path / "x.txt"))
  with pytest.raises(ValueError, match="--batch_size must be >= 1"):
    runner.run_analysis(analysis_setup["realformer"], str(tmp_path / "o"),
                        batch_size=0)
  assert not os.path.exists(tmp_path / "o")


def test_same_named_model_dirs_get_distinct_names():
  models = [types.SimpleNamespace(name="run"), types.SimpleNamespace(name="run")]
  runner._unique_names(models)  # pylint: disable=protected-access
  assert [m.name for m in models] == ["A: run", "B: run"]


def test_cli_missing_model_dir(tmp_path):
  result = watchdog.run(
      [sys.executable, "-m", "realformer_tf.analysis",
       f"--model_dir={tmp_path / 'nope'}", f"--output_dir={tmp_path / 'o'}"],
      cwd=REPO)
  # A refusal: its message alone, the last line (`realformer_tf.cli`).
  assert result.returncode == 1
  assert result.stderr.rstrip("\n").splitlines()[-1] == (
      f"model dir {str(tmp_path / 'nope')!r} does not exist."), (
          result.stderr[-3000:])
  assert "Traceback" not in result.stderr


def test_figure_titles_name_the_architecture(tmp_path, monkeypatch):
  """Post-LN and Pre-LN both have residual_attention=none: the entropy and
  JSD panels name the architecture (both read "(residual_attention=none)"
  until issue 30)."""
  titles = {}

  def violin_figure(panels, path, metric):
    titles[metric] = [p.title for p in panels]
    with open(path, "wb") as f:  # The set needs each staged file written.
      f.write(b"not drawn")

  monkeypatch.setattr(runner.plots, "violin_figure", violin_figure)
  monkeypatch.setattr(runner, "format_table", lambda summary: "")
  stream = types.SimpleNamespace(sample=lambda key: np.zeros(3))
  result = types.SimpleNamespace(to_json=dict, entropy=stream, jsd=stream)
  models = [types.SimpleNamespace(
      name="seed0", model_dir="d", checkpoint="c", residual_attention=residual,
      norm_first=norm_first, num_layers=2, num_heads=2)
            for residual, norm_first in (("none", False), ("none", True),
                                         ("sum", False))]
  runner.write_outputs(models, [result] * 3, str(tmp_path), {})
  assert titles["entropy"] == titles["jsd"] == [
      "seed0: Post-LN", "seed0: Pre-LN", "seed0: RealFormer"]
