"""A TFDS text data set as the pre-training corpus (data/tfds_corpus.py):
`tfds.testing.mock_data` serves handmade `wikipedia/20230601.en` examples
(metadata written to a temp data dir: two file shards, an empty split);
the records equal a text file's with the same documents, the Beam
pipeline's equal the single process's, and every bad input is refused
before anything is written."""

import os
import random
import re

import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from realformer_tf.data import beam_pretraining_data as beam_data
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import pretraining_data
from realformer_tf.data import tfds_corpus

WIKI = "wikipedia/20230601.en"
SHARD_LENGTHS = [5, 3]
OPTIONS = dict(max_seq_length=32, max_predictions_per_seq=5,
               masked_lm_prob=0.15, dupe_factor=2, short_seq_prob=0.1,
               do_lower_case=True, random_seed=5)
WORDS = "the river city north old stone bridge market song winter".split()


def _text(d):
  """Example `d`'s text: paragraphs, blank lines, spaces and \\r\\n."""
  rng = random.Random(d)
  lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) + "."
           for _ in range(rng.randint(3, 6))]
  return f"  {lines[0]}\n\n" + "\r\n".join(lines[1:]) + " \n"


TEXTS = [_text(d) for d in range(sum(SHARD_LENGTHS))]


def _prepare(data_dir, name, splits):
  """Writes `name`'s metadata (splits: their file shards' lengths)."""
  builder = tfds.builder(name, data_dir=data_dir)
  builder.info.set_splits(tfds.core.SplitDict([
      tfds.core.SplitInfo(name=s, shard_lengths=lengths, num_bytes=1000)
      for s, lengths in splits.items()]))
  os.makedirs(builder.data_dir)
  builder.info.write_to_directory(builder.data_dir)


def _as_dataset(self, split, decoders=None, read_config=None,
                shuffle_files=False):
  """The examples [a:b] of `split` as `builder.as_dataset` reads them."""
  del self, decoders, read_config, shuffle_files
  start, end = map(int, re.fullmatch(r"train\[(\d+):(\d+)\]", split).groups())
  return tf.data.Dataset.from_tensor_slices(
      dict(title=[f"t{i}" for i in range(start, end)], text=TEXTS[start:end]))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("tfds"))
  _prepare(root, WIKI, dict(train=SHARD_LENGTHS, test=[]))
  _prepare(root, "ag_news_subset", dict(train=[2]))
  return root


@pytest.fixture
def wiki(data_dir, tmp_path):
  """The mocked data set, and a text file of the same documents."""
  path = tmp_path / "corpus.txt"
  path.write_text("".join(
      "\n".join(l.strip() for l in t.split("\n") if l.strip()) + "\n\n"
      for t in TEXTS))
  with tfds.testing.mock_data(data_dir=data_dir, as_dataset_fn=_as_dataset):
    yield dict(data_dir=data_dir, file=str(path))


def _create(output, num_shards, **kwargs):
  args = dict(input_files=None, output_file=str(output), vocab_file=None,
              vocab_size=64, num_shards=num_shards, **OPTIONS)
  return create_pretraining_data.run(**dict(args, **kwargs))


def _tfds(wiki):
  return dict(tfds_name=WIKI, tfds_data_dir=wiki["data_dir"])


def _files(folder):
  return {name: open(os.path.join(folder, name), "rb").read()
          for name in sorted(os.listdir(folder)) if "meta_data" not in name}


def test_examples_are_the_text_files_documents_by_file_shard(wiki):
  corpus, = tfds_corpus.input_of(None, WIKI, tfds_data_dir=wiki["data_dir"])
  assert [(p.start, p.end) for p in corpus.parts()] == [(0, 5), (5, 8)]
  assert str(corpus) == "tfds:wikipedia/20230601.en:1.0.0:train[0:8]:text"
  documents = pretraining_data.text_documents(wiki["file"])
  assert list(corpus.documents()) == list(enumerate(documents))
  assert [d for p in corpus.parts() for d in p.documents()] == list(
      enumerate(documents))
  # A sentence a line, stripped (blank lines, spaces and \r dropped).
  assert [len(d) for d in documents] == [t.count(".") for t in TEXTS]
  assert documents[0][0] == TEXTS[0][2:TEXTS[0].index("\n")]
  assert not any(l != l.strip() for d in documents for l in d)


@pytest.mark.parametrize("num_shards", [0, 2])
def test_records_and_vocabulary_are_the_text_files(wiki, tmp_path,
                                                   num_shards):
  """Byte for byte, with a vocabulary learned from the input."""
  count = _create(tmp_path / "tfds" / "train.tfrecord", num_shards,
                  **_tfds(wiki))
  assert count == _create(tmp_path / "file" / "train.tfrecord", num_shards,
                          input_files=[wiki["file"]])
  written = _files(tmp_path / "tfds")
  assert count > 20 and written == _files(tmp_path / "file")
  assert len(written) == 1 + max(1, num_shards)  # The records and vocab.txt.


def test_beam_writes_the_single_process_shards(wiki, tmp_path):
  """Both learn the vocabulary from all 8 documents; the pipeline reads the
  two file shards as two elements."""
  count = _create(tmp_path / "single" / "train.tfrecord", 2, **_tfds(wiki))
  args = dict(input_files=None, output_prefix=str(tmp_path / "beam" / "train"),
              vocab_file=None, vocab_size=64, vocab_sample_documents=100,
              num_shards=2, pipeline_args=["--direct_running_mode=in_memory"],
              **OPTIONS, **_tfds(wiki))
  facts = beam_data.run(**args, dry_run=True)
  assert facts["documents"] == facts["sample_documents"] == 8
  assert not os.path.exists(tmp_path / "beam")
  assert count == beam_data.run(**args)
  written = _files(tmp_path / "beam")
  assert written == _files(tmp_path / "single") and len(written) == 3


@pytest.mark.parametrize("kwargs, error", [
    (dict(tfds_name="no_such_data_set"), "no_such_data_set not found"),
    (dict(tfds_name="wikipedia/nope"), "BuilderConfig nope not found"),
    (dict(tfds_name="mnist"), "not prepared in .*tfds build mnist "
     "--data_dir="),
    (dict(tfds_name=WIKI, tfds_split="validation"),
     "no split 'validation'; its splits: test, train"),
    (dict(tfds_name=WIKI, tfds_split="test"), "split 'test' is empty"),
    (dict(tfds_name=WIKI, tfds_feature="body"),
     "no text feature 'body'; its text features: text, title"),
    (dict(tfds_name="ag_news_subset", tfds_feature="label"),
     "no text feature 'label'; its text features: description, title"),
    (dict(tfds_name=WIKI, input_files=["a.txt"]), r"\(got both\)"),
    (dict(), r"\(got neither\)"),
])
def test_bad_input_is_refused_before_anything_is_written(data_dir, tmp_path,
                                                         kwargs, error):
  with tfds.testing.mock_data(data_dir=data_dir):  # Not for "mnist".
    with pytest.raises(ValueError, match=error) as raised:
      _create(tmp_path / "out" / "train.tfrecord", 2,
              **dict(dict(tfds_data_dir=data_dir), **kwargs))
  assert "\n" not in str(raised.value) and not os.path.exists(
      tmp_path / "out")
