"""Model Garden workarounds; tests/compat/model_garden_test.py fails once each
defect goes (`MaskedLMTask.train_step`'s loss scale is `tasks.masked_lm`)."""

from absl import logging

# The file-shuffle seed of every worker when `train_data.seed` is unset.
SHARED_FILE_SEED = 20201228  # RealFormer's arXiv date.


def with_shared_seed(params, input_context=None):
  """`params` with `SHARED_FILE_SEED` when several training pipelines read it
  and it sets no seed, else unchanged: Model Garden's reader then shuffles
  the files with a seed of each worker's own, so their shards overlap."""
  pipelines = input_context.num_input_pipelines if input_context else 1
  if (pipelines > 1 and params.is_training and params.seed is None and
      params.input_path != "dummy"):
    logging.info("%s.seed is unset: the %d input pipelines shuffle the file "
                 "list with seed %d, so that each reads its own files.",
                 "task.train_data", pipelines, SHARED_FILE_SEED)
    return params.replace(seed=SHARED_FILE_SEED)
  return params


def set_preemption_exit(action, exit_fn) -> None:
  """Makes an Orbit `SaveCheckpointIfPreempted` call `exit_fn` after its
  checkpoint: Model Garden builds it with `keep_running_after_save=True`,
  and only its handler's private `_exit_fn` can change that."""
  action._preemption_handler._exit_fn = exit_fn  # pylint: disable=protected-access
