"""`resumable_pretraining`: a resumed run's records continue the stopped run's.

The reference is Model Garden's own `BertPretrainDataLoader` read from the
start: skipping `k` steps must give its batches `k, k + 1, ...`, for one
input pipeline and for each of several (the strategy's input context), over
an epoch boundary (the files repeat) and with shuffled records.
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
      config, skip_steps).load(), 6)
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
    assert resumable_pretraining.records_per_step(BATCH, context) == (
        BATCH // pipelines)
    reference = _batches(
        pretrain_dataloader.BertPretrainDataLoader(config).load(context),
        (skip_steps + 3) * per_step)
    resumed = _batches(resumable_pretraining.ResumablePretrainDataLoader(
        config, skip_steps).load(context), 3 * per_step)
    _assert_same(resumed, reference[skip_steps * per_step:])


def test_a_skip_without_a_seed_is_refused(pattern):
  with pytest.raises(ValueError, match=r"skip_steps=3 needs a training data "
                     r"config with a seed .* seed=None"):
    resumable_pretraining.ResumablePretrainDataLoader(
        _config(pattern, seed=None), 3)
  with pytest.raises(ValueError, match="skip_steps=-1 is negative"):
    resumable_pretraining.ResumablePretrainDataLoader(_config(pattern), -1)
