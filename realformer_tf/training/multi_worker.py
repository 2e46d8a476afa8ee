"""A multi-worker run that loses a worker ends in words, on every worker.

A lost peer's collective error becomes one line; every worker stops after
Orbit's preemption checkpoint; a restarted cluster saves at the same steps;
a cluster that does not start within a bound ends on one line.
"""

import faulthandler
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Iterable, Optional

from absl import logging
import orbit
import tensorflow as tf

# pylint: disable=g-direct-tensorflow-import
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context
# pylint: enable=g-direct-tensorflow-import

from realformer_tf import utils
from realformer_tf.compat import model_garden as compat_model_garden
from realformer_tf.compat import tensorflow as compat_tf
from realformer_tf.training import stop_signals

# The errors a collective or the coordination service raises when a peer
# is gone (its connection reset, its heartbeat missed, the cluster aborted).
LOST_WORKER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                      tf.errors.DeadlineExceededError,
                      tf.errors.CancelledError)


# The coordination service's heartbeat timeout: TensorFlow's default declared
# starved workers of loaded machines dead.
HEARTBEAT_TIMEOUT_S = 60
_COORDINATED_JOBS = ("chief", "worker")
# The bound on the strategy's wait for every peer (TensorFlow's never ends,
# tensorflow/tensorflow#46931): workers started together join once the
# slowest has imported TensorFlow (24 s to over 120 s on 2 cores at load 8-10).
START_TIMEOUT_S = 300

# The start-up watchdog, a child process (the wait holds the GIL: no thread of
# ours would run) prints its line at the bound; 5 s later the parent's
# faulthandler (no GIL needed) ends it, exit 1. On the child's stdin, "d"
# (disarmed) or EOF (the parent ended otherwise) keep it quiet; faulthandler's
# traceback (the parent ends) does not.
_WATCHDOG = """
import select, socket, sys
timeout, line, peers = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
if select.select([sys.stdin], [], [], timeout)[0]:
  if sys.stdin.buffer.read(1) in (b"d", b""):
    sys.exit(0)
def state(peer):
  host, port = peer.rsplit(" at ", 1)[1].rsplit(":", 1)
  try:
    socket.create_connection((host.strip("[]"), int(port)), 1).close()
    return "listening, not joined"
  except OSError:
    return "nothing listens there"
print(line % ", ".join(f"{p} ({state(p)})" for p in peers), file=sys.stderr)
sys.exit(1)
"""
_watchdog: Optional[subprocess.Popen] = None


def _arm_start_watchdog(resolver, timeout_s: int) -> None:
  """Ends this worker on one line naming its peers (TF_CONFIG) if the
  cluster has not started (`cluster_started`) within `timeout_s`."""
  global _watchdog
  spec = resolver.cluster_spec()
  peers = [f"{job} {i} at {spec.task_address(job, i)}"
           for job in _COORDINATED_JOBS if job in spec.jobs
           for i in spec.task_indices(job)
           if (job, i) != (resolver.task_type, resolver.task_id)]
  line = (f"the {len(peers) + 1}-worker cluster did not start within "
          f"{timeout_s} s (--cluster_start_timeout_s): not joined: %s; this "
          "worker stops. Restart every worker with the same command, all "
          f"within {timeout_s} s.")
  _watchdog = subprocess.Popen(
      [sys.executable, "-I", "-c", _WATCHDOG, str(timeout_s), line] + peers,
      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
  faulthandler.dump_traceback_later(timeout_s + 5, exit=True,
                                    file=_watchdog.stdin)
  logging.info("Waiting up to %d s for the %d-worker cluster to start "
               "(--cluster_start_timeout_s).", timeout_s, len(peers) + 1)


def cluster_started() -> None:
  """Disarms the start-up watchdog (the strategy is built: every peer
  joined); ends the process, exit 1, if it fired already (its line said)."""
  global _watchdog
  if _watchdog:
    faulthandler.cancel_dump_traceback_later()
    try:
      _watchdog.stdin.write(b"d")
      _watchdog.stdin.close()
    except OSError:  # It ended: its line is said.
      pass
    if _watchdog.wait():
      os._exit(1)  # pylint: disable=protected-access
    _watchdog = None


def configure_coordination(distribution_strategy: str,
                           heartbeat_timeout_s: int = HEARTBEAT_TIMEOUT_S,
                           start_timeout_s: int = START_TIMEOUT_S) -> bool:
  """For a `multi_worker_mirrored` run with a TF_CONFIG cluster, configures
  the coordination service with `heartbeat_timeout_s` (before the strategy
  is built) and arms the start-up watchdog (`start_timeout_s`, 0: none);
  returns whether it did."""
  if distribution_strategy != "multi_worker_mirrored":
    return False
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  spec = resolver.cluster_spec()
  if (resolver.task_type not in _COORDINATED_JOBS or
      context.context().coordination_service is not None):
    return False
  context.context().configure_coordination_service(
      service_type="standalone",
      service_leader=multi_worker_util.coordination_leader(spec),
      heartbeat_timeout_in_ms=heartbeat_timeout_s * 1000,
      coordinated_jobs=[coordination_config_pb2.CoordinatedJob(
          name=job, num_tasks=spec.num_tasks(job))
                        for job in _COORDINATED_JOBS if job in spec.jobs])
  quiet_lost_peer_watchers()
  if start_timeout_s:
    _arm_start_watchdog(resolver, start_timeout_s)
  return True


# TensorFlow's preemption watcher threads (`failure_handling`): they die of
# the lost-peer error too, and their traceback came after our one line.
_WATCHER_THREADS = ("PeerTerminationWatcher-",
                    "WorkerTerminationSignalWatcher-")


_default_excepthook = threading.excepthook  # Replaced when installed.


def _watcher_excepthook(args: threading.ExceptHookArgs) -> None:
  thread = args.thread
  if (thread is not None and thread.name.startswith(_WATCHER_THREADS) and
      isinstance(args.exc_value, LOST_WORKER_ERRORS)):
    first_line = (str(args.exc_value).strip().splitlines() or [""])[0]
    logging.vlog(1, "%s ended: %s: %s", thread.name, args.exc_type.__name__,
                 first_line)
    return
  _default_excepthook(args)


def quiet_lost_peer_watchers() -> None:
  """TensorFlow's preemption watcher threads that die of a lost peer do so
  quietly (to `--v=1`: the main thread's line says it); other threads'
  errors are printed as before."""
  global _default_excepthook
  if threading.excepthook is not _watcher_excepthook:
    _default_excepthook = threading.excepthook
    threading.excepthook = _watcher_excepthook


def align_checkpoint_interval(manager: Optional[tf.train.CheckpointManager],
                              strategy: tf.distribute.Strategy,
                              latest_step: Optional[int]) -> None:
  """A non-chief worker's checkpoint manager counts its save interval from
  the chief's restored checkpoint (of step `latest_step`): saves are
  collective, every worker must save at the same steps."""
  if (manager is None or latest_step is None or
      strategy.extended.should_checkpoint):
    return
  compat_tf.set_last_checkpoint_step(manager, latest_step)


def remove_worker_checkpoints(controllers: Iterable,
                              strategy: tf.distribute.Strategy) -> None:
  """Deletes a non-chief worker's checkpoint folder, which Model Garden's
  `train_lib` makes in the temporary folder and never removes (only a folder
  there is deleted)."""
  if strategy.extended.should_checkpoint:
    return
  for controller in controllers:
    manager = getattr(controller, "checkpoint_manager", None)
    directory = manager.directory if manager else ""
    if directory and os.path.dirname(os.path.abspath(directory)) == (
        os.path.abspath(tempfile.gettempdir())):
      utils.remove(directory)


def num_workers(strategy: tf.distribute.Strategy) -> int:
  """The tasks of `strategy`'s cluster (1 without a cluster resolver)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None:
    return 1
  spec = resolver.cluster_spec()
  return sum(spec.num_tasks(job) for job in spec.jobs) or 1


def _raise_preempted() -> None:
  raise stop_signals.Stopped(signal.SIGTERM)


def stop_after_preemption_checkpoint(train_actions: Optional[Iterable]
                                    ) -> None:
  """Makes each Orbit `SaveCheckpointIfPreempted` in `train_actions` stop
  the run after its checkpoint (`Stopped(SIGTERM)`, exit 143) instead of
  training on (Model Garden's `keep_running_after_save=True` lost it)."""
  for action in train_actions or ():
    if isinstance(action, orbit.actions.SaveCheckpointIfPreempted):
      compat_model_garden.set_preemption_exit(action, _raise_preempted)


def lost_worker_exit(error: Exception, strategy: tf.distribute.Strategy,
                     latest: Optional[str], latest_step: Optional[int]
                    ) -> Optional[SystemExit]:
  """The SystemExit (its message one line, exit status 1) that ends a
  worker whose `strategy` lost a peer with `error`; None when `error` is not
  that (one worker, or another error). `latest`: the newest checkpoint, if
  any, of step `latest_step`."""
  workers = num_workers(strategy)
  if workers < 2 or not isinstance(error, LOST_WORKER_ERRORS):
    return None
  cause = str(getattr(error, "message", error)).strip().splitlines()
  cause = next((line for line in cause if "aborted" in line.lower()),
               cause[0] if cause else "")
  resume = (f"it resumes from {latest} (step {latest_step})" if latest else
            "there is no checkpoint yet: it starts again")
  return SystemExit(
      f"lost a worker of the {workers}-worker cluster "
      f"({type(error).__name__}: {cause[:300]}); this worker stops too. "
      f"Restart every worker with the same command: {resume}.")
