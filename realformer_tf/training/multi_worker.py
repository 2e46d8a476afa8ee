"""A multi-worker run that loses a worker ends in words, on every worker.

A lost peer's collective error becomes one line; every worker stops after
Orbit's preemption checkpoint; a restarted cluster saves at the same steps.
"""

import os
import signal
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


def configure_coordination(distribution_strategy: str,
                           heartbeat_timeout_s: int = HEARTBEAT_TIMEOUT_S
                          ) -> bool:
  """For a `multi_worker_mirrored` run with a TF_CONFIG cluster, configures
  the coordination service with `heartbeat_timeout_s` (before the strategy
  is built); returns whether it did."""
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
