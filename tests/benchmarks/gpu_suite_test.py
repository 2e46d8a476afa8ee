"""`benchmarks/gpu_suite.py --smoke`: every row runs at a tiny size on the CPU.

One subprocess (KERAS_BACKEND=jax; the suite spawns its groups itself). Every
Keras row must print a time, the TF-XLA stand-in too; the torch rows, without
CUDA, print why they skip.
"""

import json
import os
import re
import sys

import pytest

from tests.helpers import jax_subprocess

pytest.importorskip("jax")
pytest.importorskip("keras_hub")

sys.path.insert(0, os.path.join(jax_subprocess.REPO_ROOT, "benchmarks"))

import gpu_suite  # pylint: disable=g-import-not-at-top,wrong-import-position


def _table(stdout):
  rows = {}
  for line in stdout.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.startswith("| ") and len(cells) == 9 and cells[0] != "row":
      rows[cells[0]] = dict(ms=cells[2], ratio=cells[3], pipelined=cells[4],
                            pipelined_ratio=cells[5], note=cells[8])
  return rows


def test_smoke_prints_a_time_for_every_row_it_can_run(tmp_path):
  """The smoke runs its steps with no time budget: every row has its
  `steps` timed steps, however slow the machine."""
  out = jax_subprocess.run(
      [sys.executable, os.path.join("benchmarks", "gpu_suite.py"),
       "--smoke", "--profile=bert,sum_pallas_spe,sum_pallas_scan,xla_tiny",
       f"--profile_dir={tmp_path}"])
  assert out.returncode == 0, out.stderr[-3000:]
  assert "(no time budget)" in out.stderr, out.stderr[-3000:]
  rows = _table(out.stdout)
  for name in gpu_suite.KERAS_ROWS:
    assert name in rows, (name, out.stdout)
    for column in ("ms", "pipelined"):
      assert re.fullmatch(r"\d+\.\d\d", rows[name][column]), (
          name, rows[name])
      assert float(rows[name][column]) > 0
    # The smoke's fixed steps: steps each waited for in its one round;
    # a steps_per_execution or scan row runs as many calls of N steps.
    per_call = gpu_suite.suite_keras.steps_per_call(name)
    steps = f"steps {gpu_suite.SMOKE['steps'] * per_call}"
    assert steps in rows[name]["note"], (name, rows[name])
    assert ("steps_per_" in rows[name]["note"]) == (per_call > 1), (
        name, rows[name])
  # Issue 36's rows: steps_per_execution, a bare jax.jit loop, lax.scan.
  spe = gpu_suite.suite_keras.STEPS_PER_EXECUTION
  assert spe > 1
  for name, way in (("bert_spe", "steps_per_execution"),
                    ("sum_pallas_spe", "steps_per_execution"),
                    ("bert_scan", "steps_per_call"),
                    ("sum_pallas_scan", "steps_per_call")):
    assert rows[name]["note"] == (f"steps {gpu_suite.SMOKE['steps'] * spe}, "
                                  f"{way} {spe}"), rows[name]
  # The fused rows (`realformer_tf.keras3.fused_steps`): one dispatch an
  # execution, over the compile's 2 executions and the round's waited and
  # pipelined fits of `steps` executions each; no step run alone.
  dispatches = 2 + gpu_suite.SMOKE["rounds"] * 2 * gpu_suite.SMOKE["steps"]
  for name in ("bert_fused", "sum_pallas_fused"):
    assert rows[name]["note"] == (
        f"steps {gpu_suite.SMOKE['steps'] * spe}, steps_per_execution {spe}, "
        f"fused_dispatches {dispatches}, single_steps 0"), rows[name]
  assert rows["sum_pallas_jit"]["note"] == (
      f"steps {gpu_suite.SMOKE['steps']}"), rows["sum_pallas_jit"]
  # The headline: each row against its peers, the ratio of the table's
  # pipelined and waited times.
  headline = dict(((m[0], m[1]), (float(m[2]), float(m[3]))) for m in
                  re.findall(r"^  (\w+) / (\w+): ([\d.]+) \(([\d.]+)\)$",
                             out.stdout, re.M))
  assert sorted(headline) == sorted([
      ("sum_pallas", "bert"), ("sum_pallas_spe", "bert_spe"),
      ("sum_pallas_fused", "bert_fused"),
      ("sum_pallas_fused", "sum_pallas"), ("bert_fused", "bert"),
      ("sum_pallas_spe", "sum_pallas"), ("sum_pallas_jit", "sum_pallas"),
      ("sum_pallas_scan", "bert_scan"),
      ("sum_pallas_scan", "sum_pallas"), ("bert_spe", "bert"),
      ("bert_scan", "bert")]), out.stdout
  for (name, base), (piped, waited) in headline.items():
    assert piped == pytest.approx(float(rows[name]["pipelined"]) / float(
        rows[base]["pipelined"]), abs=2e-3), (name, base)
    assert waited == pytest.approx(float(rows[name]["ms"]) / float(
        rows[base]["ms"]), abs=2e-3), (name, base)
  # Keras rows' ratios are against `bert` (keras-hub's BertBackbone).
  assert float(rows["bert"]["ratio"]) == 1.0, rows["bert"]
  assert float(rows["sum_pallas"]["ratio"]) == pytest.approx(
      float(rows["sum_pallas"]["ms"]) / float(rows["bert"]["ms"]), abs=2e-3)
  assert re.fullmatch(r"\d+\.\d\d", rows["xla_tiny"]["ms"]), rows["xla_tiny"]
  for name in gpu_suite.TORCH_ROWS:  # no CUDA here: never a time
    assert rows[name]["note"].startswith("skipped: "), rows[name]
  assert "error" not in out.stdout, out.stdout
  # --profile: a line of figures for each row asked for, then its kernels.
  profiled = re.findall(r"^\| (\w+) \| ([\d.]+) \| ([\d.]+) \| (\d+)% \|",
                        out.stdout, re.M)
  assert sorted(p[0] for p in profiled) == [
      "bert", "sum_pallas_scan", "sum_pallas_spe", "xla_tiny"], out.stdout
  for _, wall, device, _ in profiled:
    assert float(wall) > 0 and float(device) > 0, profiled
  assert "bert: top kernels (cpu)" in out.stdout, out.stdout
  # --profile_dir: every kernel of each profiled row, as JSON.
  assert sorted(os.listdir(tmp_path)) == [
      "bert.json", "sum_pallas_scan.json", "sum_pallas_spe.json",
      "xla_tiny.json", "xla_tiny_waited.json"]
  # A TF-XLA row also traces its waited steps: a summary line of its own.
  waited = re.findall(r"^\| xla_tiny \(waited\) \| ([\d.]+) \| ([\d.]+) \|",
                      out.stdout, re.M)
  assert len(waited) == 1 and float(waited[0][1]) > 0, out.stdout
  with open(tmp_path / "xla_tiny_waited.json") as f:
    assert json.load(f)["steps"] == gpu_suite.SMOKE["profile_steps"]
  with open(tmp_path / "bert.json") as f:
    full = json.load(f)
  assert len(full["top"]) > 15 and full["steps"] == 3, full
  # steps_per_execution and lax.scan: the trace holds whole calls, its
  # figures are per step (the profile's steps, N per call).
  for name in ("sum_pallas_spe", "sum_pallas_scan"):
    with open(tmp_path / f"{name}.json") as f:
      full = json.load(f)
    assert full["steps"] == 2 * spe > gpu_suite.SMOKE["profile_steps"], full
    assert full["kernels"] > 0 and full["device_ms"] > 0, full


def test_profile_steps_are_whole_executions():
  profile_steps = gpu_suite.suite_keras.profile_steps
  assert profile_steps(4, 1) == 4 and profile_steps(1, 1) == 2
  assert profile_steps(4, 8) == 16 and profile_steps(17, 8) == 24


def test_headline_pairs_each_row_with_its_peers():
  times = lambda piped, waited: dict(pipelined_ms=piped, ms=waited)
  results = dict(sum_pallas=times(45.0, 50.0), bert=times(50.0, 50.0),
                 xt_residual=times(40.0, 40.0),
                 sum_pallas_fused=times(32.0, 40.0),
                 bert_fused=times(40.0, 50.0),
                 sum_pallas_spe=times(36.0, 40.0),
                 bert_spe=times(40.0, 40.0),
                 sum_pallas_jit=dict(pipelined_ms=30.0),
                 sum_pallas_scan=times(33.0, 36.0),
                 bert_scan=times(44.0, 45.0),
                 xla_bert=dict(error="rc 1"),
                 **{"xla_realformer-default": times(40.0, 50.0),
                    "xla_realformer-default-keptprobs": times(36.0, 45.0)})
  assert gpu_suite.headline(results) == [
      ("sum_pallas", "bert", 0.9, 1.0),
      ("sum_pallas", "xt_residual", 45 / 40, 50 / 40),
      ("sum_pallas_fused", "bert_fused", 0.8, 0.8),
      ("sum_pallas_fused", "sum_pallas", 32 / 45, 0.8),
      ("sum_pallas_fused", "xt_residual", 0.8, 1.0),
      ("sum_pallas_spe", "bert_spe", 0.9, 1.0),
      ("sum_pallas_spe", "sum_pallas", 0.8, 0.8),
      ("sum_pallas_spe", "xt_residual", 0.9, 1.0),
      ("sum_pallas_jit", "sum_pallas", 30 / 45, None),
      ("sum_pallas_jit", "xt_residual", 0.75, None),
      ("sum_pallas_scan", "bert_scan", 0.75, 0.8),
      ("sum_pallas_scan", "sum_pallas", 33 / 45, 36 / 50),
      ("sum_pallas_scan", "xt_residual", 33 / 40, 0.9),
      ("bert_fused", "bert", 0.8, 1.0),
      ("bert_spe", "bert", 0.8, 0.8),
      ("bert_scan", "bert", 0.88, 0.9),
      ("xla_realformer-default", "bert", 0.8, 1.0),
      ("xla_realformer-default", "xt_residual", 1.0, 1.25),
      ("xla_realformer-default-keptprobs", "xla_realformer-default",
       36 / 40, 45 / 50)]


def test_group_budgets_of_the_prepared_gpu_call():
  # benchmarks/README.md's prepared call: --budget_s=380, four keras rows, three
  # TF-XLA modules, one torch row. The xla group's cap grows per module.
  scale = 380 / 400
  assert gpu_suite.group_budget("keras", 4, 380, ["xla", "torch"],
                                380) == pytest.approx(190 * scale)
  # 50 s a module: a BERT-Base module compiles in 35-36 s on an H200.
  assert gpu_suite.group_budget("xla", 2, 200, ["torch"],
                                380) == pytest.approx(100 * scale)
  assert gpu_suite.group_budget("xla", 3, 300, ["torch"],
                                380) == pytest.approx(150 * scale)
  # Later groups keep their minimum; the last group takes what remains.
  assert gpu_suite.group_budget("xla", 3, 100, ["torch"], 380) == 55
  assert gpu_suite.group_budget("torch", 1, 123, [], 380) == 123



def test_the_prepared_gpu_call_names_rows_the_suite_has():
  """The prepared call in benchmarks/README.md runs: every row it names
  exists, and it holds the four keras and three TF-XLA rows its budget
  above assumes."""
  readme = os.path.join(os.path.dirname(gpu_suite.__file__), "README.md")
  with open(readme) as f:
    text = f.read()
  section = text[text.index("### The prepared GPU call"):]
  rows = re.search(r"gpu_suite\.py --budget_s=380 --rows=([\w,.-]+) ",
                   section).group(1).split(",")
  known = {n: group for n, (group, _) in
           gpu_suite._row_names().items()}  # pylint: disable=protected-access
  # TF-XLA rows exist once gpu_prepare.sh has dumped their modules into the
  # ignored .gpu_hlo/ (a clean clone has none): named from its specs
  # (model:score_dtype:dropout[:softmax] -> `xla_bert`,
  # `xla_realformer-<score dtype>[-librarydropout][-keptprobs]`, as
  # encoder_step.py names the dumps).
  with open(os.path.join(os.path.dirname(readme), "gpu_prepare.sh")) as f:
    specs = [s for s in re.search(r"for spec in ([^;]+);", f.read()).group(
        1).split() if ":" in s]
  for spec in specs:
    model, score_dtype, dropout, *softmax = spec.split(":")
    name = "xla_bert" if model == "bert" else (
        f"xla_realformer-{score_dtype}"
        + ("-librarydropout" if dropout == "library" else "")
        + ("-keptprobs" if softmax == ["kept"] else ""))
    known.setdefault(name, "xla")
  assert not [r for r in rows if r not in known], rows
  assert [known[r] for r in rows].count("keras") == 4, rows
  assert [known[r] for r in rows].count("xla") == 3, rows
  assert "xla_realformer-default-keptprobs" in rows, rows
  assert "sum_pallas_fused" in rows and "bert_fused" in rows, rows
  assert "bert" in rows and "xt_residual" in rows, rows
