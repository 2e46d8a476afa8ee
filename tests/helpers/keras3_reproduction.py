"""The reproduction's command line on the keras3 face, run as on a GPU machine: a fresh
Python on JAX (CPU here) with TensorFlow unimportable
(`without_tensorflow/sitecustomize.py`)."""
import os
import subprocess
import sys

from tests.helpers import no_tensorflow
from tests.helpers import reproduce_inputs

REPO_ROOT = no_tensorflow.REPO_ROOT
# Small enough for seconds a run, big enough for one batch of 8 (tiny).
CORPUS_DOCUMENTS = 60
TRAIN_STEPS = 12


def jax_env() -> dict:
  """A JAX-on-CPU environment for the subprocess; XLA's backend
  optimisations off (compiling is most of a tiny run's time)."""
  env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
  env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""),
                               "--xla_backend_optimization_level=0"]).strip()
  return env


def write_corpus(folder: str) -> str:
  path = os.path.join(folder, "corpus.txt")
  reproduce_inputs.write_corpus(path, num_documents=CORPUS_DOCUMENTS)
  return path


def run_command(output_dir: str, corpus: str, *flags: str,
                face: str = "--face=keras3") -> subprocess.CompletedProcess:
  """`python -m realformer_tf.reproduce --face=keras3 --size=tiny
  --seeds=1` on `corpus`, fine-tuning on a tiny MRPC and SQuAD beside it (a later flag
  overrides an earlier one; `face=""`: the default face)."""
  env = no_tensorflow.env(jax_env())
  glue_dir = os.path.join(os.path.dirname(corpus), "glue")
  if not os.path.exists(glue_dir):
    reproduce_inputs.write_mrpc(glue_dir)
  squad_dir = os.path.join(os.path.dirname(corpus), "squad")
  if not os.path.exists(squad_dir):
    reproduce_inputs.write_squad(squad_dir)
  return subprocess.run(
      [sys.executable, "-m", "realformer_tf.reproduce", *filter(None, [face]),
       f"--output_dir={output_dir}", "--size=tiny", "--seeds=1",
       f"--corpus={corpus}", f"--glue_dir={glue_dir}", "--glue_tasks=mrpc",
       f"--squad_dir={squad_dir}",
       f"--train_steps={TRAIN_STEPS}", *flags],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900,
      check=False)
