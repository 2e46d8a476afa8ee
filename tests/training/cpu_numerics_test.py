"""Tests of realformer_tf.training.cpu_numerics: the quickstart's pinned CPU
numerics, and that they make a float32 gradient independent of the core
count while the unpinned settings do not (issue 39: command 1 printed MLM
0.2567, 0.2959 and 0.3142 on three CPUs)."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from realformer_tf.configs import experiments
from realformer_tf.training import cpu_numerics

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
QUICKSTART_ARGV = ["--experiment=realformer/quickstart", "--mode=train"]

# A two-layer step's loss and weight gradients, hashed: the 2,048-term sums
# of the weight gradients are what Eigen splits over its threads and what
# oneDNN's sgemm computes with the CPU's widest vectors.
_GRADIENT_HASH = textwrap.dedent("""
    import hashlib
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((2048, 64)), tf.float32)
    w1 = tf.Variable(rng.standard_normal((64, 256)) * 0.1, dtype=tf.float32)
    w2 = tf.Variable(rng.standard_normal((256, 64)) * 0.1, dtype=tf.float32)
    with tf.GradientTape() as tape:
      h = tf.nn.gelu(x @ w1) @ w2
      loss = tf.reduce_sum(h * h)
    grads = tape.gradient(loss, [w1, w2])
    print(hashlib.sha256(b"".join(
        t.numpy().tobytes() for t in [loss] + grads)).hexdigest())
""")


def _gradient_hash(env_vars, cores=None):
  """The hash in a fresh process with `env_vars` on top of a clean
  environment (none of `PINNED` inherited), on `cores` (taskset) or all."""
  env = {k: v for k, v in os.environ.items() if k not in cpu_numerics.PINNED}
  env.update(env_vars, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  command = [sys.executable, "-c", _GRADIENT_HASH]
  if cores is not None:
    command = ["taskset", "-c", cores] + command
  out = subprocess.run(command, env=env, capture_output=True, text=True,
                       timeout=600, check=True)
  return out.stdout.split()[-1]


def _pinned_env():
  env = {}
  cpu_numerics.pin(QUICKSTART_ARGV, env)
  return env


def test_experiment_of_reads_both_flag_forms():
  assert cpu_numerics.experiment_of(
      ["--experiment=realformer/quickstart"]) == "realformer/quickstart"
  assert cpu_numerics.experiment_of(
      ["--mode=train", "--experiment", "glue/mrpc"]) == "glue/mrpc"
  assert cpu_numerics.experiment_of(
      ["--experiment=a", "--experiment=b"]) == "b"  # absl: the last wins
  assert cpu_numerics.experiment_of(["--mode=train"]) is None


def test_name_is_the_experiments():
  assert cpu_numerics.QUICKSTART == experiments.QUICKSTART


def test_pin_sets_what_is_missing_for_the_quickstart_only():
  env = {"TF_NUM_INTRAOP_THREADS": "8", "PATH": "/bin"}
  assert cpu_numerics.pin(["--experiment=realformer/pretraining"], env) == {}
  assert env == {"TF_NUM_INTRAOP_THREADS": "8", "PATH": "/bin"}
  set_now = cpu_numerics.pin(QUICKSTART_ARGV, env)
  assert set_now == {"TF_ENABLE_ONEDNN_OPTS": "0", "ONEDNN_MAX_CPU_ISA": "AVX",
                     "TF_NUM_INTEROP_THREADS": "2"}
  assert env["TF_NUM_INTRAOP_THREADS"] == "8"  # the user's, kept


def test_summary_line_says_what_is_in_effect():
  pinned = _pinned_env()
  line = cpu_numerics.summary_line(pinned)
  assert line.startswith("CPU numerics pinned"), line
  assert "oneDNN kernels capped at AVX, 2 intra-op threads" in line, line
  pinned["TF_NUM_INTRAOP_THREADS"] = "8"
  del pinned["ONEDNN_MAX_CPU_ISA"]
  line = cpu_numerics.summary_line(pinned)
  assert line.startswith("CPU numerics not as pinned: ONEDNN_MAX_CPU_ISA="
                         "(unset) (pinned: AVX), TF_NUM_INTRAOP_THREADS=8 "
                         "(pinned: 2)"), line
  assert "can differ from the README's" in line, line


def test_train_py_pins_before_tensorflow_loads():
  """train.py's module body (not its main) in a fresh process: the
  variables are set and TensorFlow runs with the oneDNN rewrites off."""
  code = textwrap.dedent(f"""
      import os, runpy, sys
      sys.argv = ["train.py"] + {QUICKSTART_ARGV!r}
      runpy.run_path({os.path.join(_REPO, "train.py")!r}, run_name="loaded")
      from tensorflow.python.util import _pywrap_util_port
      print({{k: os.environ.get(k) for k in {list(cpu_numerics.PINNED)!r}}},
            _pywrap_util_port.IsMklEnabled())
  """)
  env = {k: v for k, v in os.environ.items() if k not in cpu_numerics.PINNED}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  out = subprocess.run([sys.executable, "-c", code], cwd=_REPO, env=env,
                       capture_output=True, text=True, timeout=600,
                       check=True).stdout.strip().splitlines()[-1]
  expected = {k: v for k, (v, _) in cpu_numerics.PINNED.items()}
  assert out == f"{expected!r} False", out


@pytest.mark.skipif(shutil.which("taskset") is None or
                    len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and two cores")
def test_pinned_gradient_is_the_same_on_one_core_and_two():
  """A 1-core machine stood in for by `taskset -c 0`: with the pins, the
  same bits as on two cores; without the thread pins, 1 and 2 threads give
  other bits (so this check can fail)."""
  pinned = _pinned_env()
  two_cores = _gradient_hash(pinned, cores="0,1")
  assert _gradient_hash(pinned, cores="0") == two_cores
  unpinned_threads = {k: v for k, v in pinned.items()
                      if not k.endswith("_THREADS")}
  assert (_gradient_hash(dict(unpinned_threads, TF_NUM_INTRAOP_THREADS="1"))
          != _gradient_hash(dict(unpinned_threads,
                                 TF_NUM_INTRAOP_THREADS="2")))
