"""Model Garden workarounds (tests/compat/model_garden_test.py)."""

from absl import logging

SHARED_FILE_SEED = 20201228  # RealFormer's arXiv date.


def with_shared_seed(params, input_context=None):
  """Seedless, each worker shuffles the files its own way: shards overlap."""
  pipelines = input_context.num_input_pipelines if input_context else 1
  if (pipelines > 1 and params.is_training and params.seed is None and
      params.input_path != "dummy"):
    logging.info("%s.seed is unset: the %d input pipelines shuffle the file "
                 "list with seed %d, so that each reads its own files.",
                 "task.train_data", pipelines, SHARED_FILE_SEED)
    return params.replace(seed=SHARED_FILE_SEED)
  return params


def set_preemption_exit(action, exit_fn) -> None:
  """Model Garden's `SaveCheckpointIfPreempted` keeps running after saving."""
  action._preemption_handler._exit_fn = exit_fn  # pylint: disable=protected-access
