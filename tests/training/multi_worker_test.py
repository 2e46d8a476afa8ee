"""A multi-worker run that loses a worker (realformer_tf/training/multi_worker.py).

The end-to-end case runs two real `train.py` workers (TF_CONFIG,
MultiWorkerMirroredStrategy, CPU) on a tiny sharded pre-training run: a
SIGTERM to one stops both at one step with a checkpoint there; the restarted
pair is SIGKILLed in one worker, and the other ends within the bound on one
line; the pair restarted again resumes from the latest checkpoint and ends
at `train_steps`.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import orbit
import pytest
import tensorflow as tf

from realformer_tf.training import multi_worker
from realformer_tf.training import stop_signals
from tests.helpers import train_runs as utils

TRAIN_STEPS = 80
# An uninterrupted run's first steps: the reference losses of the resumed one.
REFERENCE_STEPS = 16
# The survivor must end within this many seconds of its peer's death (it
# takes about one on 2 idle cores: the collective is aborted at once).
EXIT_BOUND_S = 60


class _TwoWorkers:
  """What `lost_worker_exit` reads of a two-worker strategy."""
  cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({"worker": ["127.0.0.1:1", "127.0.0.1:2"]}))


def test_lost_worker_exit_is_one_line_for_a_cluster_only():
  cluster, one = _TwoWorkers(), tf.distribute.OneDeviceStrategy("/cpu:0")
  error = tf.errors.UnavailableError(
      None, None, "{{function_node x}} Collective ops is aborted by: "
      "recvmsg:Connection reset by peer\nAdditional GRPC error information")
  lost = multi_worker.lost_worker_exit(error, cluster, "/run/ckpt-20", 20)
  assert lost.code == (
      "lost a worker of the 2-worker cluster (UnavailableError: {{function_"
      "node x}} Collective ops is aborted by: recvmsg:Connection reset by "
      "peer); this worker stops too. Restart every worker with the same "
      "command: it resumes from /run/ckpt-20 (step 20).")
  assert "no checkpoint yet" in multi_worker.lost_worker_exit(
      error, cluster, None, None).code
  assert multi_worker.lost_worker_exit(error, one, None, None) is None
  assert multi_worker.lost_worker_exit(
      tf.errors.InvalidArgumentError(None, None, "x"), cluster, None,
      None) is None


def test_preemption_checkpoint_then_stops_instead_of_training_on():
  action = object.__new__(orbit.actions.SaveCheckpointIfPreempted)
  action._preemption_handler = type("Handler", (), {})()  # pylint: disable=protected-access
  action._preemption_handler._exit_fn = lambda: None  # pylint: disable=protected-access
  multi_worker.stop_after_preemption_checkpoint([object(), action])
  with pytest.raises(stop_signals.Stopped) as e:
    action._preemption_handler._exit_fn()  # pylint: disable=protected-access
  assert e.value.signum == signal.SIGTERM and e.value.exit_code == 143


class _Extended:
  def __init__(self, chief):
    self.should_checkpoint = chief


def test_a_non_chief_worker_counts_the_save_interval_from_the_chiefs_step(
    tmp_path):
  """Restored at step 5 with interval 5, every worker next saves at 10."""
  saved = {}
  for chief in (True, False):
    step = tf.Variable(5, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(step=step), str(tmp_path / str(chief)),
        max_to_keep=3, step_counter=step, checkpoint_interval=5)
    strategy = type("Strategy", (), {"extended": _Extended(chief)})()
    if chief:  # The chief's count, as its restore sets it.
      manager._last_checkpoint_step = 5  # pylint: disable=protected-access
    multi_worker.align_checkpoint_interval(manager, strategy, 5)
    saved[chief] = []
    for value in range(6, 12):
      step.assign(value)
      if manager.save(check_interval=True):
        saved[chief].append(value)
  assert saved == {True: [10], False: [10]}


def _start(tmp_path, config, attempt, run="run"):
  workers = utils.local_cluster(2)
  procs, logs = [], []
  for index in range(2):
    logs.append(tmp_path / f"attempt{attempt}_worker{index}.log")
    procs.append(subprocess.Popen(
        utils.train_command(str(tmp_path / run), [config]),
        cwd=utils.REPO_ROOT, env=utils.subprocess_env(
            {"TF_CONFIG": utils.tf_config(workers, index)}),
        stdout=open(logs[-1], "w"), stderr=subprocess.STDOUT))
  return procs, logs


def _steps(log):
  return [int(s) for s in re.findall(r"train \| step: +(\d+) \| steps/sec",
                                     log.read_text())]


def _losses(log):
  """{step: training loss} as the worker logged them (one step a loop)."""
  return {int(step): float(loss) for step, loss in re.findall(
      r"train \| step: +(\d+) \| steps/sec[^{]*\{[^}]*'training_loss': "
      r"(?:np\.float32\()?([\d.e+-]+)", log.read_text())}


def _kill_in_a_step(procs, logs, victim, signum, after_step):
  """Sends `signum` to worker `victim` once worker 0 logged `after_step`."""
  start = time.time()
  while not any(s >= after_step for s in _steps(logs[0])):
    assert time.time() - start < 300 and procs[0].poll() is None, (
        logs[0].read_text()[-3000:])
    time.sleep(0.2)
  procs[victim].send_signal(signum)
  return time.time()


def _wait(procs, logs, timeout=300):
  codes = []
  for proc, log in zip(procs, logs):
    try:
      codes.append(proc.wait(timeout=timeout))
    except subprocess.TimeoutExpired:
      for p in procs:
        p.kill()
      pytest.fail(f"hung: {log.read_text()[-3000:]}")
  return codes


def test_two_workers_survive_sigterm_and_sigkill_of_one(tmp_path):
  pattern = utils.write_pretraining_shards(str(tmp_path / "train"), 4, 32)
  # SGD at a constant rate: the schedule does not depend on train_steps, so
  # a shorter uninterrupted run is the reference for the first steps.
  overrides = utils.tiny_overrides(pattern, "dummy",
                                   train_steps=TRAIN_STEPS, steps_per_loop=1,
                                   checkpoint_interval=20, batch_size=8,
                                   dropout=0.0, sgd=True, learning_rate=0.05)
  overrides["runtime"] = {"distribution_strategy": "multi_worker_mirrored"}
  overrides["trainer"]["validation_interval"] = 10 * TRAIN_STEPS
  # Seeded: the initial weights (train.py seeds them with it) and the record
  # order are the same in every run.
  overrides["task"]["train_data"]["seed"] = 7
  config = utils.write_yaml(str(tmp_path / "cluster.yaml"), overrides)
  overrides["trainer"]["train_steps"] = REFERENCE_STEPS
  reference_config = utils.write_yaml(str(tmp_path / "reference.yaml"),
                                      overrides)

  # The reference: the same cluster uninterrupted for its first steps.
  procs, logs = _start(tmp_path, reference_config, "_reference", "reference")
  assert _wait(procs, logs) == [0, 0], logs[0].read_text()[-3000:]
  reference = _losses(logs[0])
  assert sorted(reference) == list(range(1, REFERENCE_STEPS + 1)), reference

  # SIGTERM (a preemption notice) to worker 1: both stop at one step, the
  # chief saved it.
  procs, logs = _start(tmp_path, config, 0)
  _kill_in_a_step(procs, logs, 1, signal.SIGTERM, 3)
  assert _wait(procs, logs) == [143, 143]
  stops = [re.findall(r"stopped at step (\d+) by SIGTERM", log.read_text())
           for log in logs]
  assert stops[0] and stops[0] == stops[1], stops
  # Their last line (the async checkpointer's teardown logs no longer after).
  for log in logs:
    assert log.read_text().strip().splitlines()[-1].startswith(
        "stopped at step"), log.read_text()[-3000:]
  stopped = int(stops[0][0])
  assert os.path.exists(tmp_path / "run" / f"ckpt-{stopped}.index")

  # Restarted; SIGKILL of worker 0 (the chief, the cluster's coordination
  # leader) in a step: worker 1 ends on one line within the bound.
  procs, logs = _start(tmp_path, config, 1)
  killed_at = _kill_in_a_step(procs, logs, 0, signal.SIGKILL, stopped + 3)
  codes = _wait(procs, logs)
  took = time.time() - killed_at
  assert codes == [-signal.SIGKILL, 1], logs[1].read_text()[-3000:]
  assert took < EXIT_BOUND_S
  survivor = logs[1].read_text()
  assert "lost a worker of the 2-worker cluster (" in survivor, (
      survivor[-3000:])
  assert "Restart every worker with the same command: it resumes from " in (
      survivor)
  # Its last line: TensorFlow's preemption watcher thread, which dies of the
  # same reset connection, no longer prints a traceback over it.
  assert "Exception in thread PeerTerminationWatcher" not in survivor
  assert survivor.strip().splitlines()[-1].startswith("lost a worker of")
  # The resumed pair started where the SIGTERM left off: no step lost, and
  # on the uninterrupted run's batches (`resumable_pretraining`): its losses.
  assert min(_steps(logs[0])) == stopped + 1
  resumed = {s: loss for s, loss in _losses(logs[1]).items()
             if s <= REFERENCE_STEPS}
  assert len(resumed) >= 3, (stopped, resumed)
  np.testing.assert_allclose([resumed[s] for s in sorted(resumed)],
                             [reference[s] for s in sorted(resumed)],
                             rtol=1e-6)

  # Restarted again: from the latest checkpoint to the end.
  latest = int(re.search(r"ckpt-(\d+)", tf.train.latest_checkpoint(
      str(tmp_path / "run"))).group(1))
  killed_losses = _losses(tmp_path / "attempt1_worker1.log")
  procs, logs = _start(tmp_path, config, 2)
  assert _wait(procs, logs) == [0, 0], logs[0].read_text()[-3000:]
  # The steps the SIGKILL lost (after the latest checkpoint) are trained
  # again, with the losses they had.
  again = [s for s in killed_losses if s > latest]
  assert again, (latest, killed_losses)
  resumed_losses = _losses(logs[1])
  np.testing.assert_allclose([resumed_losses[s] for s in again],
                             [killed_losses[s] for s in again], rtol=1e-6)
  # ... and every step the reference ran: the uninterrupted run's losses.
  both = [s for s in resumed_losses if s <= REFERENCE_STEPS]
  np.testing.assert_allclose([resumed_losses[s] for s in both],
                             [reference[s] for s in both], rtol=1e-6)
  for log in logs:
    steps = _steps(log)
    assert steps[0] == latest + 1 and steps[-1] == TRAIN_STEPS, steps
    assert steps == list(range(latest + 1, TRAIN_STEPS + 1))
  assert os.path.exists(tmp_path / "run" / f"ckpt-{TRAIN_STEPS}.index")
  # One writer: the chief's model_dir; the other worker's temporary
  # checkpoint folders (Model Garden's) are gone, after every attempt.
  assert not [p for p in os.listdir(tmp_path / "run")
              if p.startswith("tmp") or "worker" in p]
  worker_dirs = set(re.findall(
      r"saved checkpoint to (\S+)/ckpt-\d+", "".join(
          (tmp_path / f"attempt{a}_worker1.log").read_text()
          for a in range(3))))
  assert worker_dirs and not any(os.path.exists(d) for d in worker_dirs)


def test_a_worker_whose_peers_never_join_ends_on_one_line_within_the_bound(
    tmp_path):
  """Worker 1 of 3: worker 0's address is a socket that never answers, no
  worker 2. TensorFlow's wait for them never ended (SIGTERM ignored)."""
  workers, bound = utils.local_cluster(3), 20
  host, port = workers[0].rsplit(":", 1)
  silent = socket.create_server((host, int(port)))  # Listens, never accepts.
  config = utils.write_yaml(str(tmp_path / "cluster.yaml"), {
      "runtime": {"distribution_strategy": "multi_worker_mirrored"}})
  log = tmp_path / "worker1.log"
  with silent, open(log, "w") as out:
    proc = subprocess.Popen(
        utils.train_command(str(tmp_path / "run"), [config],
                            extra=[f"--cluster_start_timeout_s={bound}"]),
        cwd=utils.REPO_ROOT, env=utils.subprocess_env(
            {"TF_CONFIG": utils.tf_config(workers, 1)}),
        stdout=out, stderr=subprocess.STDOUT)
    start = time.time()
    while "Waiting up to 20 s for the 3-worker cluster" not in (
        log.read_text()):
      assert proc.poll() is None and time.time() - start < 600, (
          log.read_text()[-3000:])
      time.sleep(0.2)
    armed = time.time()
    code = proc.wait(timeout=bound + 60)
  took = time.time() - armed
  lines = log.read_text().strip().splitlines()
  assert code == 1, lines[-20:]
  # The line at the bound, the exit 5 s later (the parent's faulthandler).
  assert bound + 4 < took < bound + 30, took
  assert lines[-1] == (
      "the 3-worker cluster did not start within 20 s "
      f"(--cluster_start_timeout_s): not joined: worker 0 at {workers[0]} "
      f"(listening, not joined), worker 2 at {workers[2]} (nothing listens "
      "there); this worker stops. Restart every worker with the same "
      "command, all within 20 s."), lines[-20:]
  assert not os.path.exists(tmp_path / "run")


def test_configure_coordination_sets_the_heartbeat_timeout():
  """In a fresh process (it configures the process's TensorFlow context)."""
  script = (
      "import json, os\n"
      "os.environ['TF_CONFIG'] = json.dumps({'cluster': {'worker': ["
      "'127.0.0.1:1', '127.0.0.1:2']}, 'task': {'type': 'worker', "
      "'index': 1}})\n"
      "from tensorflow.python.eager import context\n"
      "from realformer_tf.training import multi_worker\n"
      "assert not multi_worker.configure_coordination('mirrored')\n"
      "assert context.context().coordination_service is None\n"
      "assert multi_worker.configure_coordination('multi_worker_mirrored')\n"
      "config = context.context().coordination_service\n"
      "print(config.heartbeat_timeout_in_ms, config.service_leader,\n"
      "      [(j.name, j.num_tasks) for j in config.coordinated_job_list])\n"
      "assert not multi_worker.configure_coordination("
      "'multi_worker_mirrored')\n")
  result = subprocess.run([sys.executable, "-c", script],
                          env=utils.subprocess_env(), capture_output=True,
                          text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split("\n")[-2] == (
      f"{multi_worker.HEARTBEAT_TIMEOUT_S * 1000} /job:worker/replica:0/"
      "task:0 [('worker', 2)]")


@pytest.mark.parametrize("thread_name, error, printed", [
    ("PeerTerminationWatcher-1",
     tf.errors.UnavailableError(None, None, "Connection reset by peer"),
     False),
    ("WorkerTerminationSignalWatcher-0",
     tf.errors.AbortedError(None, None, "cluster aborted"), False),
    # Another error of the watcher, or a lost peer in another thread: as
    # Python prints it.
    ("PeerTerminationWatcher-1", ValueError("a bug"), True),
    ("Thread-7", tf.errors.UnavailableError(None, None, "reset"), True),
])
def test_watcher_threads_that_lose_a_peer_end_quietly(
    monkeypatch, capsys, thread_name, error, printed):
  """The survivor's last line was now and then the end of TensorFlow's
  PeerTerminationWatcher traceback, printed while the main thread printed
  `lost_worker_exit`'s line."""
  # Python's own hook (pytest's, installed for the test, keeps the errors).
  monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
  monkeypatch.setattr(multi_worker, "_default_excepthook",
                      multi_worker._default_excepthook)
  multi_worker.quiet_lost_peer_watchers()
  multi_worker.quiet_lost_peer_watchers()  # Installed once.

  def die():
    raise error

  thread = threading.Thread(target=die, name=thread_name)
  thread.start()
  thread.join()
  err = capsys.readouterr().err
  assert (f"Exception in thread {thread_name}" in err) == printed, err
  if printed:
    assert f"{type(error).__name__}: " in err and err.count("Traceback") == 1
