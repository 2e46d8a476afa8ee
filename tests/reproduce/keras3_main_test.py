"""`python -m realformer_tf.reproduce --face=keras3` at tiny size on JAX
(CPU) with TensorFlow unimportable: exact steps, identical batches and
initial weights, the report as a reader gets it, the attention analysis,
--dry_run, the default face, a bad flag."""
import json
import math
import os

from matplotlib import image
import numpy as np

from realformer_tf.reproduce import keras3_data as data
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from tests.helpers import keras3_reproduction

STEPS = keras3_reproduction.TRAIN_STEPS
ARCHS = ("post_ln", "pre_ln", "realformer")


def _results(output_dir):
  with open(os.path.join(output_dir, plan_lib.RESULTS_JSON)) as f:
    return json.load(f)


def test_every_architecture_trains_the_exact_steps(tiny_reproduction):
  output_dir, _, result = tiny_reproduction
  runs = _results(output_dir)["pretraining_runs"]
  assert list(runs) == list(ARCHS)
  size = plan_lib.SIZES["tiny"]  # 3 steps a call, 4 evaluations.
  for arch in ARCHS:
    (run,) = runs[arch]
    assert run["global_step"] == run["train_steps"] == STEPS
    assert [s for s, _ in run["curves"]["train"]] == list(range(
        size.steps_per_execution, STEPS + 1, size.steps_per_execution))
    assert [s for s, _ in run["curves"]["validation"]] == [3, 6, 9, 12]
    assert run["dtype_policy"] == "float32" and run["device"] == "cpu"
    assert f"{arch} seed 0: step {STEPS}/{STEPS}" in result.stdout
    assert run["seconds"] > 0 and run["config"]["dtype_policy"] == "float32"
  assert result.stdout.startswith("Face: keras3 (--face).\n")
  assert "This invocation: " in result.stdout.split("\n")[-2]


def test_all_architectures_saw_the_same_batches(tiny_reproduction):
  output_dir, corpus, _ = tiny_reproduction
  runs = _results(output_dir)["pretraining_runs"]
  size = plan_lib.SIZES["tiny"]
  # The batches again, here, from the command's own data (a cache hit).
  sequences = data.prepare(os.path.join(output_dir, "data"), [corpus],
                           size.vocab_size, size.seq_length)
  batches = data.Batches(sequences, size.batch_size, size.max_predictions,
                         seed=0)
  expected = ""
  for step in range(STEPS):
    expected = data.digest(expected, batches.train_batch(step))
  assert {runs[a][0]["batch_digest"] for a in ARCHS} == {expected}


def test_initial_weights_are_shared_where_shapes_allow(tiny_reproduction):
  output_dir, _, _ = tiny_reproduction
  runs = _results(output_dir)["pretraining_runs"]
  for arch in ARCHS:
    init = runs[arch][0]["initialization"]
    assert init["own"] == ([] if arch != "pre_ln" else
                           ["final_layer_norm/gamma", "final_layer_norm/beta"])
    assert "token_embedding/embeddings" in init["shared"]
    assert "transformer_layer_0/self_attention/query/kernel" in init["shared"]


def test_every_architecture_fine_tunes_mrpc_from_its_checkpoint(
    tiny_reproduction):
  output_dir, _, result = tiny_reproduction
  results = _results(output_dir)
  for arch in ARCHS:
    run_dir = os.path.join(output_dir, "finetune", arch, "seed0", "mrpc",
                           "ep3_lr0.0001", "seed0")
    with open(os.path.join(run_dir, plan_lib.RESULT_FILE)) as f:
      run = json.load(f)
    # ceil(3 epochs * 40 examples / batch 32); 40 dev rows, half positive.
    assert run["train_steps"] == 4 and run["eval_logs"]["train_steps"] == 4
    assert set(run["metrics"]) == {"f1", "accuracy"}
    assert run["eval_logs"]["majority_class_accuracy"] == 0.5
    assert 0.0 <= run["metrics"]["accuracy"] <= 1.0
    assert run["eval_logs"]["train_loss_first"] > 0
    assert (results["glue"][arch]["tasks"]["mrpc"]["best"]["metrics"][
        "accuracy"]["values"] == [run["metrics"]["accuracy"]])
    assert f"{run_dir}: new (fine-tune {arch} seed 0 on mrpc" in result.stdout


def test_every_architecture_fine_tunes_squad_from_its_checkpoint(
    tiny_reproduction):
  output_dir, _, result = tiny_reproduction
  results = _results(output_dir)
  with open(os.path.join(output_dir, plan_lib.RESULTS_MD)) as f:
    text = f.read()
  assert ("SQuAD v1.1 (epochs over its 24 training questions) seq 48, doc "
          "stride 16, question 8.") in result.stdout
  for arch in ARCHS:
    run_dir = os.path.join(output_dir, "finetune", arch, "seed0", "squad",
                           "ep3_lr0.0001", "seed0")
    with open(os.path.join(run_dir, plan_lib.RESULT_FILE)) as f:
      run = json.load(f)
    logs = run["eval_logs"]
    # ceil(3 epochs * 24 questions / batch 32); every third of the 24
    # contexts (60 words) needs 3 windows of 48: 8 * 3 + 16 features.
    assert run["train_steps"] == 3 and logs["train_steps"] == 3
    assert logs["train_features"] == logs["dev_features"] == 40
    assert set(run["metrics"]) == {"exact_match", "f1"}
    assert 0.0 <= run["metrics"]["exact_match"] <= run["metrics"]["f1"] <= 1
    # Two cross-entropies over 48 positions start near ln 48 = 3.87.
    assert abs(logs["train_loss_first"] - math.log(48)) < 0.3
    best = results["squad"][arch]["best"]["metrics"]
    assert best["f1"]["values"] == [run["metrics"]["f1"]]
    assert (f"| {plan_lib.ARCHS[arch].label} | "
            f"{100 * best['exact_match']['median']:.2f} (1 seed) | "
            f"{100 * best['f1']['median']:.2f} (1 seed) |") in text
    assert f"{run_dir}: new (fine-tune {arch} seed 0 on squad" in result.stdout
  assert "## Fine-tuning (paper Table 4): SQuAD v1.1 dev, x100" in text
  assert "squad" not in results["glue"]["realformer"]["tasks"]


def test_the_report_reads_as_table_2(tiny_reproduction):
  output_dir, corpus, result = tiny_reproduction
  results = _results(output_dir)
  with open(os.path.join(output_dir, plan_lib.RESULTS_MD)) as f:
    text = f.read()
  assert text in result.stdout  # Printed as written.
  assert text.startswith("# Post-LN vs Pre-LN vs RealFormer, size `tiny`, "
                         "face `keras3`\n")
  assert f"WordPiece tokens ({corpus})." in text
  for arch in ARCHS:
    mrpc = results["glue"][arch]["tasks"]["mrpc"]["best"]["metrics"]
    row = " / ".join(f"{100 * mrpc[m]['median']:.2f} (1 seed)"
                     for m in ("f1", "accuracy"))
    assert f"| {plan_lib.ARCHS[arch].label} | {row} |" in text
  assert f"Pre-training: {STEPS} steps, batch 8, seq 32" in text
  digest = results["pretraining_runs"]["realformer"][0]["batch_digest"]
  assert (f"Batches: the same for every architecture (SHA-256 of the masked "
          f"batches, seed 0: `{digest[:12]}`).") in text
  accuracy = {}
  for arch in ARCHS:
    logs = results["pretraining_runs"][arch][0]["eval_logs"]
    accuracy[arch] = logs["masked_lm_accuracy"]
    # The last evaluation is the table's number and the curve's last point.
    assert results["pretraining_runs"][arch][0]["curves"]["validation"][
        -1][1] == accuracy[arch]
    label = plan_lib.ARCHS[arch].label
    assert (f"| {label} | {100 * logs['masked_lm_accuracy']:.2f} (1 seed) | "
            f"{logs['lm_example_loss']:.2f} (1 seed) | "
            f"{report.PAPER_TABLE2['small'][1][arch]} |") in text
    seconds = results["pretraining_runs"][arch][0]["seconds"]
    assert (f"- {label}: pre-training {seconds:.0f} s; fine-tuning 2 runs, "
            in text)
    assert 0.0 < accuracy[arch] < 1.0 and logs["lm_example_loss"] > 0
  best = max(ARCHS, key=lambda a: (accuracy[a], -ARCHS.index(a)))
  assert (f"Ordering by held-out MLM accuracy: {plan_lib.ARCHS[best].label} "
          f"{100 * accuracy[best]:.2f} ") in text
  assert ("(the paper's, BERT-Small after 1M steps: RealFormer 62.02 > "
          "Post-LN 61.88 > Pre-LN 61.67).") in text
  png = image.imread(os.path.join(output_dir, plan_lib.CURVES_PNG))
  assert png.shape[:2] == (450, 1100)  # plots.curves_figure: 11 x 4.5 in.
  assert not [n for n in os.listdir(output_dir) if ".tmp-" in n]


def test_the_attention_analysis_of_every_architecture(tiny_reproduction):
  """Seed 0 of each architecture over the held-out sequences (tiny: up to
  16): per-token entropy and JSD of every unpadded token, and the figure."""
  output_dir, corpus, result = tiny_reproduction
  size = plan_lib.SIZES["tiny"]
  held_out = data.prepare(os.path.join(output_dir, "data"), [corpus],
                          size.vocab_size, size.seq_length).eval[
                              :size.analysis_examples]
  tokens = int(np.count_nonzero(held_out))
  results = _results(output_dir)
  assert results["analysis"] == {
      a: os.path.join(output_dir, "analysis", a) for a in ARCHS}
  for arch in ARCHS:
    with open(os.path.join(output_dir, "analysis", arch,
                           "summary.json")) as f:
      summary = json.load(f)
    (model,) = summary["models"]
    assert summary["settings"]["units"] == "entropy: nats; jsd: bits"
    assert summary["settings"]["num_examples"] == model["num_examples"] == (
        len(held_out))
    assert model["num_tokens"] == tokens and model["num_heads"] == 2
    assert [l["layer"] for l in model["entropy"]] == [0, 1]
    assert [l["layer"] for l in model["jsd"]] == [1]
    for layer in model["entropy"]:
      for head in layer["heads"]:
        assert head["count"] == tokens and head["exact_quantiles"]
        assert 0.0 <= head["min"] <= head["median"] <= head["max"] <= (
            math.log(size.seq_length) + 1e-5)
    for head in model["jsd"][0]["heads"]:
      assert 0.0 <= head["min"] <= head["max"] <= 1.0
    assert (f"attention analysis of {arch} seed 0: {size.analysis_examples} "
            "examples") in result.stdout
  # plots.summary_figure: 1.5 + 4.5 in per architecture x 8.5 in, 100 dpi.
  png = image.imread(os.path.join(output_dir, plan_lib.ATTENTION_PNG))
  assert png.shape[:2] == (850, 1500)


def test_a_rerun_and_a_dry_run_see_every_run_done(tiny_reproduction):
  output_dir, corpus, _ = tiny_reproduction
  result = lambda a: os.path.join(plan_lib.run_dir(output_dir, a, 0),
                                  plan_lib.RESULT_FILE)
  before = {a: os.path.getmtime(result(a)) for a in ARCHS}
  dry = keras3_reproduction.run_command(output_dir, corpus, "--dry_run")
  assert dry.returncode == 0, dry.stderr[-3000:]
  for arch in ARCHS:
    assert (f"  done  {plan_lib.run_dir(output_dir, arch, 0)}  pre-train "
            f"{arch} seed 0, {STEPS} steps") in dry.stdout
  assert "Data:" in dry.stdout and "step 1/" not in dry.stdout
  assert before == {a: os.path.getmtime(result(a)) for a in ARCHS}


def test_a_dry_run_writes_nothing_and_a_bad_flag_is_named(tmp_path):
  corpus = keras3_reproduction.write_corpus(str(tmp_path))
  out = tmp_path / "out"
  # No --face: TensorFlow is not importable here, so the keras3 face.
  dry = keras3_reproduction.run_command(str(out), corpus, "--dry_run", face="")
  assert dry.returncode == 0, dry.stderr[-3000:]
  assert dry.stdout.startswith(
      "Face: keras3 (TensorFlow is not importable).\n"), dry.stdout
  assert (f"   new  {plan_lib.run_dir(str(out), 'realformer', 0)}  pre-train "
          "realformer seed 0") in dry.stdout
  assert "Size tiny: 2 layers, hidden 32" in dry.stdout
  assert not out.exists()
  bad = keras3_reproduction.run_command(str(out), corpus,
                                        "--archs=post_ln,bert")
  # A refusal: its message alone, the last line (`realformer_tf.cli`).
  assert bad.returncode == 1
  assert bad.stderr.rstrip("\n").splitlines()[-1] == (
      "--archs: unknown ['bert']; use some of post_ln, pre_ln, "
      "realformer, realformer_2xlr."), bad.stderr[-3000:]
  assert "Traceback" not in bad.stderr and "Try --helpfull" not in bad.stderr
  assert not out.exists()


def test_the_output_dir_holds_only_what_the_plan_lists(tiny_reproduction):
  """`plan_lib.OUTPUT_ENTRIES` is what a rerun accepts in --output_dir: a
  name the reproduction writes but does not list would refuse its reruns.
  Its lock is there only while a run holds it (`core.run_lock`)."""
  output_dir, _, _ = tiny_reproduction
  assert set(os.listdir(output_dir)) == {
      "data", "pretrain", "finetune", "analysis", *plan_lib.REPORT}
  assert set(os.listdir(output_dir)) <= set(plan_lib.OUTPUT_ENTRIES)
