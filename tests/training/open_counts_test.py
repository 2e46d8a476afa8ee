"""Each fact a run depends on is read once (issue 46's targets): a train.py
fine-tune from a run of ours opens the run's vocabulary, its params.yaml and
the records' meta data at most twice each in the whole process; the sweep
accepts an init run that train.py accepts, and its --dry_run over the
paper's grid reads its train records a fixed number of times, not once per
run. Counted with `strace -f -e trace=openat` (skipped without strace)."""

import os
import shutil
import subprocess
import sys

import pytest

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import experiments
from realformer_tf.data import glue as glue_data
from realformer_tf.training import run_plan
from realformer_tf.training import sweep
from tests.helpers import reproduce_inputs
from tests.helpers import serving
from tests.helpers import train_runs

_STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(_STRACE is None, reason="needs strace")
_SEQ = 16


@pytest.fixture(scope="module")
def our_run(tmp_path_factory):
  """(run dir, its vocabulary, MRPC records converted with it): a
  pre-training run as train.py leaves it (params.yaml, a checkpoint)."""
  tmp = tmp_path_factory.mktemp("ours")
  vocab = serving.write_vocab(str(tmp / "vocab.txt"))
  encoder = dict(vocab_size=len(serving.VOCAB), hidden_size=16, num_layers=1,
                 num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=32)
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  params.override({"task": {"vocab_file": vocab,
                            "model": {"encoder": {"any": encoder}}}})
  params.task.model.cls_heads = []  # No pooler to restore.
  run_dir = str(tmp / "pretrain")
  os.makedirs(run_dir)
  train_utils.serialize_config(params, run_dir)
  train_runs.save_encoder_checkpoint(run_dir, 3, **encoder)
  glue_dir = str(tmp / "glue_in")
  reproduce_inputs.write_mrpc(glue_dir, rows=40)
  records = str(tmp / "glue")
  glue_data.convert("mrpc", vocab, records, max_seq_length=_SEQ,
                    glue_dir=glue_dir)
  return run_dir, vocab, records


def _lengths(records):
  return (f"task.train_data.seq_length={_SEQ},"
          f"task.validation_data.seq_length={_SEQ}")


def _opens(trace_file, path):
  """How often the traced processes opened `path` (successfully)."""
  with open(trace_file) as f:
    return sum(f'"{path}"' in line and "ENOENT" not in line for line in f)


def _traced(tmp_path, args):
  trace = str(tmp_path / "openat.trace")
  out = subprocess.run(
      [_STRACE, "-f", "-qq", "-e", "trace=openat", "-o", trace,
       sys.executable, *args], cwd=train_runs.REPO_ROOT, capture_output=True,
      text=True, timeout=600, check=False)
  assert out.returncode == 0, "\n".join(
      line for line in out.stderr.splitlines()
      if not line[:1] in "IW" or not line[1:5].isdigit())[-3000:]
  return trace, out


@needs_strace
def test_a_fine_tune_from_our_run_reads_each_of_its_files_at_most_twice(
    our_run, tmp_path):
  """Before: the run's params.yaml was opened 3 times and the records' meta
  data 6 (modes, vocabularies, globs and meta data read once per check)."""
  run_dir, vocab, records = our_run
  model_dir = tmp_path / "mrpc"
  trace, _ = _traced(tmp_path, [
      train_runs.TRAIN_PY, "--experiment=realformer/glue",
      "--mode=train_and_eval", f"--model_dir={model_dir}",
      "--config_file=official_configs/experiments/glue/mrpc.yaml",
      f"--params_override=task.init_checkpoint={run_dir},"
      f"task.train_data.input_path={records}/mrpc_train.tf_record,"
      f"task.validation_data.input_path={records}/mrpc_dev.tf_record,"
      f"{_lengths(records)},task.train_data.seed=1,trainer.train_steps=2,"
      "trainer.validation_steps=1"])
  assert os.path.exists(model_dir / "final_eval.json")  # It trained.
  counts = {path: _opens(trace, path) for path in (
      vocab, os.path.join(run_dir, "params.yaml"),
      os.path.join(records, "mrpc_meta_data.json"))}
  assert all(1 <= count <= 2 for count in counts.values()), counts


def test_the_sweep_accepts_the_init_run_that_train_py_accepts(our_run,
                                                              tmp_path):
  """Before: the sweep's own copy of the checks built BERT-Base for a run of
  ours and refused it ("Check that the encoder config belongs to this
  checkpoint"), while train.py took the run's encoder and trained."""
  run_dir, _, records = our_run
  config, _ = sweep.base_config(
      "mrpc", params_override=f"task.init_checkpoint={run_dir},"
      f"{_lengths(records)}", data_dir=records)
  planned = sweep.plan_runs("mrpc", str(tmp_path / "runs"), [2, 3],
                            [2e-5, 3e-5], range(2), config, 40)
  sweep.check_runs(planned)
  plan = run_plan.derive(planned[0].config, planned[0].MODE,
                         planned[0].model_dir)
  assert plan.params.task.model.encoder.any.hidden_size == 16
  assert plan.init.prefix == os.path.join(run_dir, "ckpt-3")
  assert not (tmp_path / "runs").exists()  # Checks write nothing.


@needs_strace
def test_the_sweeps_dry_run_reads_its_train_records_a_fixed_number_of_times(
    our_run, tmp_path):
  """The paper's grid (3 epochs x 7 rates x 5 seeds = 105 runs), each run
  checked as train.py checks it, from one read of the data: the first
  record, the token-id scan and the manifest's hash of a small file."""
  run_dir, _, records = our_run
  root = tmp_path / "runs"
  trace, out = _traced(tmp_path, [
      "-m", "realformer_tf.training.sweep", "--task=mrpc",
      f"--model_dir_root={root}", f"--data_dir={records}", "--dry_run",
      f"--params_override=task.init_checkpoint={run_dir},{_lengths(records)}"])
  assert out.stdout.strip().split("\n")[-1].startswith("105 runs (40 train "
                                                        "examples")
  assert _opens(trace, os.path.join(records, "mrpc_train.tf_record")) <= 2
  assert not root.exists()
