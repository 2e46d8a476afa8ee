"""`python -m realformer_tf.reproduce` on the tf_keras face: --dry_run's
plan, nothing written; the default face; a refusal."""
import os
import sys

from tests.helpers import reproduce_inputs
from tests.helpers import watchdog

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def test_cli_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
  reproduce_inputs.write_mrpc(str(tmp_path / "glue"))
  reproduce_inputs.write_corpus(str(tmp_path / "corpus.txt"))
  before = reproduce_inputs.tree(str(tmp_path))
  out = watchdog.run(
      [sys.executable, "-m", "realformer_tf.reproduce", "--face=tf_keras",
       f"--output_dir={tmp_path / 'out'}", f"--corpus={tmp_path}/corpus.txt",
       f"--glue_dir={tmp_path / 'glue'}", "--glue_tasks=mrpc,cola",
       "--archs=post_ln,realformer", "--seeds=2", "--train_steps=10",
       "--dry_run"],
      cwd=_REPO)
  assert out.returncode == 0, out.stderr[-3000:]
  lines = out.stdout.strip().split("\n")
  assert lines[0] == "Face: tf_keras (--face).", lines
  assert lines[1].startswith("Size tiny: 2 layers, hidden 32"), lines
  runs = [l.split() for l in lines if l.split()[0] == "new"]
  assert len(runs) == 8  # (pre-train + MRPC) x 2 architectures x 2 seeds.
  assert runs[0][1] == str(tmp_path / "out" / "pretrain" / "post_ln" / "seed0")
  assert runs[1][1] == str(tmp_path / "out" / "finetune" / "post_ln" /
                           "seed0" / "mrpc" / "ep3_lr0.0001" / "seed0")
  assert f"Fine-tuning cola: skipped ({tmp_path / 'glue' / 'CoLA'} lacks" in (
      out.stdout)
  assert lines[-1].startswith("Estimated time: "), lines
  assert reproduce_inputs.tree(str(tmp_path)) == before  # Nothing written.



def test_cli_refusal_is_its_message_alone(tmp_path):
  """A bad flag value: its message, the last line, exit status 1, nothing
  written (before: absl's usage text above it, `app.UsageError`). No
  --face: TensorFlow is importable and JAX sees no GPU here, so tf_keras."""
  out = watchdog.run(
      [sys.executable, "-m", "realformer_tf.reproduce",
       f"--output_dir={tmp_path / 'out'}", "--archs=post_ln,bert"],
      cwd=_REPO)
  assert out.returncode == 1, out.stderr[-3000:]
  assert out.stdout.splitlines()[0] == (
      "Face: tf_keras (TensorFlow is importable and JAX sees no "
      "accelerator).")
  assert out.stderr.rstrip("\n").splitlines()[-1] == (
      "--archs: unknown ['bert']; use some of post_ln, pre_ln, realformer, "
      "realformer_2xlr."), out.stderr[-3000:]
  assert "Traceback" not in out.stderr and "Try --helpfull" not in out.stderr
  assert not os.listdir(tmp_path)
