"""Pre-training input that goes on, after a resume, where the stopped run was.

Model Garden checkpoints the model, the optimizer and the step, not the
input iterator (`official/core/base_trainer.py`, `Trainer.checkpoint`;
Orbit makes the iterator at the first `train()`), so a resumed run read its
records from the start of the shuffled stream again: the step count was
exact, the batches after it were not the uninterrupted run's. TF's own
iterator checkpointing does not help: a strategy's distributed iterator
(`tensorflow/python/distribute/input_lib.py`, `DistributedIterator`) is not
checkpointable.

Here the records a stopped run consumed are skipped instead. Model Garden's
`InputReader` reads the files (shuffled, sharded per worker, repeated),
shuffles the records with the data config's `seed`, then decodes, parses
and batches (official/core/input_reader.py, `_decode_and_parse_dataset`).
With a seed that stream is the same in every process, so skipping
`step * records per step` of it, after the record shuffle and before the
decoding, continues it exactly: `BertPretrainDataLoader` with the decoding
moved from `decoder_fn` into `sample_fn`, behind the skip (with nothing to
skip, the same dataset as Model Garden's). Skipped records are read, not
decoded: the cost is reading them.
"""

from typing import Optional

from absl import logging
import tensorflow as tf

from official.common import dataset_fn
from official.core import input_reader
from official.nlp.data import pretrain_dataloader


def records_per_step(global_batch_size: int,
                     input_context: Optional[tf.distribute.InputContext]
                    ) -> int:
  """Records one input pipeline gives per training step: its replicas'
  per-replica batches (each replica takes one batch a step)."""
  if input_context is None:
    return global_batch_size
  replicas = (input_context.num_replicas_in_sync //
              input_context.num_input_pipelines)
  return input_context.get_per_replica_batch_size(global_batch_size) * replicas


class ResumablePretrainDataLoader(pretrain_dataloader.BertPretrainDataLoader):
  """Model Garden's BERT pre-training loader, started `skip_steps` steps in.

  Args:
    params: A `BertPretrainDataConfig` (training, with a `seed`, when
      `skip_steps > 0`).
    skip_steps: The steps a stopped run trained: their records are skipped.
  """

  def __init__(self, params, skip_steps: int = 0):
    super().__init__(params)
    if skip_steps < 0:
      raise ValueError(f"skip_steps={skip_steps} is negative.")
    if skip_steps and not (params.is_training and params.seed is not None
                           and params.drop_remainder):
      raise ValueError(
          f"skip_steps={skip_steps} needs a training data config with a seed "
          "and drop_remainder (else the records' order is not the stopped "
          f"run's): is_training={params.is_training}, seed={params.seed}, "
          f"drop_remainder={params.drop_remainder}.")
    self._skip_steps = skip_steps

  def load(self, input_context: Optional[tf.distribute.InputContext] = None):
    """The dataset, its first `skip_steps * records_per_step` records
    (after the shuffle) skipped."""
    skip = self._skip_steps * records_per_step(self._params.global_batch_size,
                                               input_context)

    def skip_then_decode(records):
      if skip:
        records = records.skip(skip)
      return records.map(self._decode,
                         num_parallel_calls=tf.data.experimental.AUTOTUNE)

    reader = input_reader.InputReader(
        params=self._params,
        dataset_fn=dataset_fn.pick_dataset_fn(self._params.file_type),
        sample_fn=skip_then_decode,
        parser_fn=self._parse)
    dataset = reader.read(input_context)
    if skip:
      logging.info(
          "Resuming the input at step %d: the first %d records of this input "
          "pipeline (%d a step; read, not decoded, as its first batch is "
          "made) are skipped, so the batches continue the stopped run's.",
          self._skip_steps, skip, skip // self._skip_steps)
    return dataset
