"""`resumable_pretraining`: a resumed run's records continue the stopped run's.

The reference is Model Garden's own `BertPretrainDataLoader` read from the
start: skipping the records of `k` steps must give its batches `k, k + 1,
...`, for one input pipeline and for each of several (the strategy's input
context), over an epoch boundary (the files repeat), with shuffled records,
and with another batch size than the stopped run's.
"""

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import pretrain_dataloader
from realformer_tf.data import resumable_pretraining
from tests.helpers import train_runs

BATCH = 4


def _config(pattern, seed=7, **changes):
  return pretrain_dataloader.BertPretrainDataConfig(**dict(dict(
      input_path=pattern, global_batch_size=BATCH, is_training=True,
      seq_length=train_runs.TINY_SEQ_LENGTH,
      max_predictions_per_seq=train_runs.TINY_MAX_PREDICTIONS,
      shuffle_buffer_size=8, seed=seed), **changes))


def _batches(dataset, count):
  return [{k: v.numpy() for k, v in batch.items()}
          for batch in dataset.take(count)]


def _assert_same(got, want):
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert sorted(g) == sorted(w)
    for key in g:
      np.testing.assert_array_equal(g[key], w[key], err_msg=key)


@pytest.fixture(name="pattern", scope="module")
def fixture_pattern(tmp_path_factory):
  # 3 shards of 10 records: 30 records, 7 steps of 4 before the files repeat.
  return train_runs.write_pretraining_shards(
      str(tmp_path_factory.mktemp("shards") / "train"), 3, 10)


def test_nothing_to_skip_is_model_gardens_dataset(pattern):
  config = _config(pattern)
  _assert_same(
      _batches(resumable_pretraining.ResumablePretrainDataLoader(
          config).load(), 12),
      _batches(pretrain_dataloader.BertPretrainDataLoader(config).load(), 12))


@pytest.mark.parametrize("skip_steps", [1, 5, 9])  # 9: past the first epoch.
def test_skipping_continues_the_uninterrupted_stream(pattern, skip_steps):
  config = _config(pattern)
  reference = _batches(
      pretrain_dataloader.BertPretrainDataLoader(config).load(),
      skip_steps + 6)
  resumed = _batches(resumable_pretraining.ResumablePretrainDataLoader(
      config, skip_steps * BATCH).load(), 6)
  _assert_same(resumed, reference[skip_steps:])
  # The test can fail: the stream does not repeat itself within this span.
  assert not np.array_equal(resumed[0]["input_word_ids"],
                            reference[0]["input_word_ids"])


@pytest.mark.parametrize("pipelines,replicas", [(2, 2), (2, 4)])
def test_each_input_pipeline_skips_its_own_records(pattern, pipelines,
                                                   replicas):
  """Two workers (input pipelines) with one or two replicas each: every
  replica takes a per-replica batch a step, so a pipeline skips
  `steps * per-replica batch * its replicas` records."""
  config = _config(pattern)
  skip_steps = 3
  per_step = replicas // pipelines  # Per-replica batches a pipeline gives.
  for pipeline in range(pipelines):
    context = tf.distribute.InputContext(
        num_input_pipelines=pipelines, input_pipeline_id=pipeline,
        num_replicas_in_sync=replicas)
    assert resumable_pretraining.pipeline_records(
        skip_steps * BATCH, context) == skip_steps * BATCH // pipelines
    reference = _batches(
        pretrain_dataloader.BertPretrainDataLoader(config).load(context),
        (skip_steps + 3) * per_step)
    resumed = _batches(resumable_pretraining.ResumablePretrainDataLoader(
        config, skip_steps * BATCH).load(context), 3 * per_step)
    _assert_same(resumed, reference[skip_steps * per_step:])


def test_a_skip_without_a_seed_is_refused(pattern):
  with pytest.raises(ValueError, match=r"skip_records=3 needs a training "
                     r"data config with a seed .* seed=None"):
    resumable_pretraining.ResumablePretrainDataLoader(
        _config(pattern, seed=None), 3)
  with pytest.raises(ValueError, match="skip_records=-1 is negative"):
    resumable_pretraining.ResumablePretrainDataLoader(_config(pattern), -1)


@pytest.mark.parametrize("new_batch", [2, 6])
def test_another_batch_size_continues_the_records(pattern, new_batch):
  """Stopped after 3 steps of 4 records, resumed with batches of 2 or 6:
  the resumed batches are the stream's records 12, 13, ... (what batches of
  1 from the start give), not those after 3 of the new batches."""
  one = _batches(pretrain_dataloader.BertPretrainDataLoader(_config(
      pattern, global_batch_size=1)).load(), 12 + 3 * new_batch)
  resumed = _batches(resumable_pretraining.ResumablePretrainDataLoader(
      _config(pattern, global_batch_size=new_batch), 3 * BATCH).load(), 3)
  want = [{key: np.concatenate([b[key] for b in one[start:start + new_batch]])
           for key in one[0]}
          for start in range(12, 12 + 3 * new_batch, new_batch)]
  _assert_same(resumed, want)
  # Skipping 3 of the new batches instead gives other records.
  assert not np.array_equal(
      resumed[0]["input_word_ids"],
      np.concatenate([b["input_word_ids"]
                      for b in one[3 * new_batch:4 * new_batch]]))
