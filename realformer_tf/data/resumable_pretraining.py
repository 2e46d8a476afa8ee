"""Pre-training input that goes on, after a resume, where the stopped run was.

Model Garden checkpoints no input iterator. With a seed the record stream
is the same in every process, so skipping the records already consumed
(`pipeline_records`), before decoding, continues it exactly.
"""

from typing import Optional

from absl import logging
import tensorflow as tf

from official.common import dataset_fn
from official.core import input_reader
from official.nlp.data import pretrain_dataloader


def pipeline_records(records: int,
                     input_context: Optional[tf.distribute.InputContext]
                    ) -> int:
  """The share of `records` (read by all input pipelines together) that one
  input pipeline read."""
  if input_context is None:
    return records
  return records // input_context.num_input_pipelines


class ResumablePretrainDataLoader(pretrain_dataloader.BertPretrainDataLoader):
  """Model Garden's BERT pre-training loader, started `skip_records` in.

  Args:
    params: A `BertPretrainDataConfig` (training, with a `seed`, when
      `skip_records > 0`).
    skip_records: The records a stopped run trained on (all its input
      pipelines together): they are skipped.
  """

  def __init__(self, params, skip_records: int = 0):
    super().__init__(params)
    if skip_records < 0:
      raise ValueError(f"skip_records={skip_records} is negative.")
    if skip_records and not (params.is_training and params.seed is not None
                             and params.drop_remainder):
      raise ValueError(
          f"skip_records={skip_records} needs a training data config with a "
          "seed and drop_remainder (else the records' order is not the "
          f"stopped run's): is_training={params.is_training}, "
          f"seed={params.seed}, drop_remainder={params.drop_remainder}.")
    self._skip_records = skip_records

  def load(self, input_context: Optional[tf.distribute.InputContext] = None):
    """The dataset, this pipeline's share of `skip_records` (after the
    shuffle) skipped."""
    skip = pipeline_records(self._skip_records, input_context)

    # Decoding moved from `decoder_fn` into `sample_fn`, behind the skip:
    # after `InputReader`'s record shuffle, before decoding.
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
          "Resuming the input after the %d records the stopped run trained "
          "on: the first %d records of this input pipeline are skipped (read, "
          "not decoded, as its first batch is made), so its records continue "
          "the stopped run's, in batches of %d.", self._skip_records, skip,
          self._params.global_batch_size)
    return dataset
