"""The pre-training records on Apache Beam (data/beam_pretraining_data.py):
the single-process command's records and statistics, byte-identical shards
with 1 and 2 DirectRunner worker processes (a killed run: the writer suite,
tests/core/writer_suite_test.py).

The pipeline runs on Beam's FnApiRunner (the DirectRunner's portable runner):
in this process (`in_memory`) except for one 2-process run, whose workers
import this checkout (PYTHONPATH)."""

import bz2
import glob
import gzip
import os
import random

from apache_beam.testing import util as beam_util
import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.data import beam_pretraining_data as beam_data
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import pretraining_shards
from realformer_tf.data import shards
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from tests.helpers import file_trees
from tests.helpers import train_runs

try:  # The dataflow extra (apache-beam[gcp]).
  from apache_beam.runners.dataflow.internal import apiclient
except ImportError:
  apiclient = None

SEQ, PRED = 32, 5
OPTIONS = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED,
               masked_lm_prob=0.15, dupe_factor=2, short_seq_prob=0.1)
IN_PROCESS = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
TWO_PROCESSES = ["--direct_num_workers=2",
                 "--direct_running_mode=multi_processing"]
WORDS = ("the river city north old stone bridge market song winter light "
         "garden letter window road music paper table forest ocean").split()


def _sentence(d, s):
  rng = random.Random(d * 100 + s)
  return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) + "."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """Two text files (60 documents) and a vocabulary learned from them."""
  root = tmp_path_factory.mktemp("corpus")
  files = [train_runs.write_corpus(
      root / f"part{i}.txt", documents=30, sentences=8,
      sentence=lambda d, s, i=i: _sentence(30 * i + d, s)) for i in (0, 1)]
  vocab = str(root / "vocab.txt")
  tokenization.learn_vocab(wordpiece.count_words(
      line for f in files for line in pretraining_data.read_lines(f)), 64,
                           vocab)
  return dict(root=root, files=files, vocab=vocab)


def _run(output_prefix, corpus, pipeline_args=IN_PROCESS, **kwargs):
  args = dict(input_files=corpus["files"], output_prefix=str(output_prefix),
              vocab_file=corpus["vocab"], vocab_size=64,
              vocab_sample_documents=20, num_shards=3, do_lower_case=True,
              random_seed=5, pipeline_args=pipeline_args, **OPTIONS)
  args.update(kwargs)
  return beam_data.run(**args)


def _parsed(paths):
  """Each record of `paths` as {feature: list of values}."""
  rows = []
  for record in tf.data.TFRecordDataset(list(paths)):
    example = tf.train.Example.FromString(record.numpy())
    rows.append({name: list(getattr(f, f.WhichOneof("kind")).value)
                 for name, f in example.features.feature.items()})
  return rows


def test_one_shard_is_the_single_process_function_on_its_documents(
    corpus, tmp_path):
  """A shard's records are `pretraining_data.shuffled_examples` of the
  shard's documents in key order, seeded per shard, byte for byte."""
  count = _run(tmp_path / "train", corpus, num_shards=1)
  keyed = sorted(key_lines for indexed in enumerate(corpus["files"])
                 for key_lines in pretraining_shards.keyed_documents(
                     indexed, 5))
  vocab = tokenization.load_vocab(corpus["vocab"])
  tokenizer = tokenization.make_tokenizer(corpus["vocab"])
  texts = [lines for _, lines in keyed]
  ids = pretraining_data.tokenize_lines(
      tokenizer, [line for lines in texts for line in lines])
  documents = [[[vocab[i] for i in s] for s in d]
               for d in pretraining_data.split_documents(texts, ids)]
  expected = pretraining_data.shuffled_examples(
      documents, vocab, pretraining_shards.shard_seed(5, 0), **OPTIONS)
  written = [r.numpy() for r in tf.data.TFRecordDataset(
      str(tmp_path / "train-00000-of-00001.tfrecord"))]
  assert count == len(expected) == len(written) and written == expected
  meta = output_sets.read_manifest(
      str(tmp_path / "train_pretraining_meta_data.json"))
  assert meta["num_examples"] == count and meta["num_shards"] == 1
  assert meta["writer"] == beam_data.WRITER


def test_records_have_the_single_process_format_and_statistics(corpus,
                                                               tmp_path):
  pattern = shards.pattern(str(tmp_path / "beam" / "train"), 3, ".tfrecord")
  _run(tmp_path / "beam" / "train", corpus)
  single = str(tmp_path / "single" / "train.tfrecord")
  pretraining_data.create_pretraining_data(corpus["files"], corpus["vocab"],
                                           single, random_seed=5, **OPTIONS)
  beam_rows, single_rows = _parsed(sorted(glob.glob(pattern))), _parsed(
      [single])
  lengths = lambda rows: {k: {len(r[k]) for r in rows} for k in rows[0]}
  assert lengths(beam_rows) == lengths(single_rows)
  assert lengths(beam_rows)["input_ids"] == {SEQ}
  # As many examples (each shard's documents give theirs), the same
  # shares of random next sentences and masked tokens.
  assert abs(len(beam_rows) / len(single_rows) - 1) < 0.1
  for statistic in (
      lambda r: r["next_sentence_labels"][0],
      lambda r: sum(r["masked_lm_weights"]) / sum(r["input_mask"])):
    beam_mean = np.mean([statistic(r) for r in beam_rows])
    single_mean = np.mean([statistic(r) for r in single_rows])
    assert abs(beam_mean - single_mean) < 0.06, (beam_mean, single_mean)
  assert 0.35 < np.mean([r["next_sentence_labels"][0] for r in beam_rows]
                       ) < 0.65


def test_same_seed_same_bytes_with_one_and_two_worker_processes(
    corpus, tmp_path, monkeypatch):
  """Vocabulary learned from the sample, shards and counts: byte-identical
  in one process and over two worker processes."""
  monkeypatch.setenv("PYTHONPATH", train_runs.REPO_ROOT + os.pathsep +
                     os.environ.get("PYTHONPATH", ""))
  written = {}
  for name, args in (("one", IN_PROCESS), ("two", TWO_PROCESSES)):
    count = _run(tmp_path / name / "train", corpus, pipeline_args=args,
                 vocab_file=None, vocab_size=48)
    written[name] = {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()
                     if not p.name.endswith("meta_data.json")}
    meta = output_sets.read_manifest(
        str(tmp_path / name / "train_pretraining_meta_data.json"))
    assert meta["num_examples"] == count
    assert meta["vocab_file"] == str(tmp_path / name / "vocab.txt")
  assert sorted(written["one"]) == ["train-00000-of-00003.tfrecord",
                                    "train-00001-of-00003.tfrecord",
                                    "train-00002-of-00003.tfrecord",
                                    "vocab.txt"]
  assert written["one"] == written["two"]
  # The vocabulary is learned from the 20 documents of smallest key only.
  sample = sorted(key_lines for indexed in enumerate(corpus["files"])
                  for key_lines in pretraining_shards.keyed_documents(
                      indexed, 5))[:20]
  expected = tmp_path / "expected_vocab.txt"
  tokenization.learn_vocab(wordpiece.count_words(
      line for _, lines in sample for line in lines), 48, str(expected))
  assert written["one"]["vocab.txt"] == expected.read_bytes()


@pytest.mark.parametrize("pipeline_args", [IN_PROCESS, TWO_PROCESSES])
def test_the_word_count_combine_is_the_single_process_count(
    corpus, pipeline_args, monkeypatch):
  """Counting is a combine over the workers; learning runs once on its sum."""
  monkeypatch.setenv("PYTHONPATH", train_runs.REPO_ROOT + os.pathsep +
                     os.environ.get("PYTHONPATH", ""))
  expected = wordpiece.count_words(
      line for f in corpus["files"] for line in pretraining_data.read_lines(f))
  assert len(expected) > 20 and sum(expected.values()) > 3000
  beam_data._run_pipeline(pipeline_args, lambda root: beam_util.assert_that(
      beam_data._read(root, corpus["files"], 5)
      | beam_data.CountWords(True),
      beam_util.equal_to([expected])))


@pytest.mark.parametrize("change,message", [
    (dict(num_shards=200), r"Shard train-000\d\d-of-00200\.tfrecord got no "
     r"document: the corpus has too few documents for 200 shards"),
    (dict(num_shards=0), r"num_shards must be an int >= 1, got 0"),
    (dict(input_files=["/nonexistent/*.txt"]),
     r"Input pattern '/nonexistent/\*\.txt' matches no file"),
    (dict(max_seq_length=4), r"max_seq_length must be >= 8, got 4"),
])
def test_bad_inputs_are_errors_and_write_nothing(corpus, tmp_path, change,
                                                 message):
  with pytest.raises(ValueError, match=message):
    _run(tmp_path / "out" / "train", corpus, **change)
  assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_a_ram_output_prefix_writes_nothing_locally_and_reads_back(
    corpus, tmp_path, monkeypatch):
  """TensorFlow's in-memory file system stands for gs:// (no network): the
  shards, the learned vocabulary and the manifest all land there."""
  monkeypatch.chdir(tmp_path)
  prefix = "ram://beam_test/pretrain/train"
  count = _run(prefix, corpus, vocab_file=None, num_shards=2)
  assert os.listdir(tmp_path) == []
  meta_path = prefix + "_pretraining_meta_data.json"
  meta = output_sets.read_manifest(meta_path)
  output_sets.check_set(meta_path, meta)
  assert sorted(meta["files"]) == [
      "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
      "vocab.txt"]
  assert meta["vocab_file"] == "ram://beam_test/pretrain/vocab.txt"
  assert meta["input_files"] == corpus["files"]
  assert count == meta["num_examples"] == len(_parsed(
      tf.io.gfile.glob(prefix + "-*.tfrecord"))) > 0


def test_an_unreachable_cloud_prefix_is_one_refusal_writing_nothing(
    corpus, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  file_trees.assert_unreachable_refused(
      lambda prefix: _run(prefix, corpus, vocab_file=None), "train", tmp_path)


def test_gz_and_bz2_inputs_give_the_plain_texts_shards(corpus, tmp_path):
  packed = [tmp_path / "part0.txt.gz", tmp_path / "part1.txt.bz2"]
  for source, target, compress in zip(corpus["files"], packed,
                                      (gzip.compress, bz2.compress)):
    target.write_bytes(compress(open(source, "rb").read()))
  counts = [_run(tmp_path / name / "train", corpus, input_files=files,
                 num_shards=2)
            for name, files in (("plain", corpus["files"]),
                                ("packed", list(map(str, packed))))]
  assert counts[0] == counts[1] > 0
  for index in range(2):
    name = f"train-{index:05d}-of-00002.tfrecord"
    assert (tmp_path / "packed" / name).read_bytes() == (
        tmp_path / "plain" / name).read_bytes()


@pytest.mark.parametrize("documents, num_shards, message", [
    (1, 1, r"^Shard train-00000-of-00001\.tfrecord has 1 document\(s\); at "
     r"least 2 are needed for random next sentences from another document "
     r"\(separate documents with a blank line\)\.$"),
    (3, 2, r"^Shard train-0000[01]-of-00002\.tfrecord has 1 document\(s\); "
     r"at least 2 are needed for random next sentences from another document "
     r"\(the corpus has 3 documents for 2 shards: pass fewer --num_shards\)"),
])
def test_a_one_document_shard_is_refused_before_anything_is_written(
    corpus, tmp_path, documents, num_shards, message):
  """Model Garden would take its "random" next sentences from the document
  itself, still labelled random."""
  text = train_runs.write_corpus(tmp_path / "few.txt", documents=documents,
                                 sentences=8, sentence=_sentence)
  with pytest.raises(ValueError, match=message):
    _run(tmp_path / "out" / "train", corpus, input_files=[text],
         vocab_file=None, num_shards=num_shards)
  assert os.listdir(tmp_path / "out") == []


def _hand_count(files):
  """(documents, characters with a newline a line) of BERT-format files."""
  documents = [d for f in files for d in pretraining_data.text_documents(f)]
  return len(documents), sum(len(line) + 1 for d in documents for line in d)


def test_the_summary_is_the_pipelines_metrics_against_a_hand_count(
    corpus, tmp_path, capsys):
  count = _run(tmp_path / "train", corpus)
  sizes = sorted(p.stat().st_size for p in tmp_path.glob("train-*.tfrecord"))
  documents, text = _hand_count(corpus["files"])
  assert documents == 60
  line = capsys.readouterr().err.strip().splitlines()[-1]
  assert line.startswith(
      f"Read 60 documents ({text / 1e6:,.1f} MB of text); wrote {count:,} "
      f"examples ({sum(sizes) / 1e6:,.1f} MB) in 3 shards of "
      f"{sizes[0] / 1e6:,.1f} to {sizes[-1] / 1e6:,.1f} MB; "), line
  assert line.endswith(" MB of text/s."), line


def test_a_dry_run_counts_the_input_and_estimates_the_real_run(corpus,
                                                               tmp_path):
  """The whole corpus as sample: documents and text exact, examples and
  record bytes within 10% of the real run's (the shards' documents, not
  one sample's, draw the lengths); a half sample: within 25%. Writes
  nothing."""
  count = _run(tmp_path / "real" / "train", corpus)
  written = sum(p.stat().st_size
                for p in (tmp_path / "real").glob("train-*.tfrecord"))
  documents, text = _hand_count(corpus["files"])
  for sample_mb, tolerance in ((1.0, 0.1), (text / 2e6, 0.25)):
    facts = _run(tmp_path / "dry" / "train", corpus, dry_run=True,
                 dry_run_sample_mb=sample_mb)
    assert not (tmp_path / "dry").exists()
    assert (facts["documents"], facts["text_bytes"]) == (documents, text)
    if sample_mb == 1.0:
      assert facts["sample_documents"] == documents
    else:
      assert 10 < facts["sample_documents"] < 50, facts
    assert abs(facts["examples"] / count - 1) < tolerance, (facts, count)
    assert abs(facts["record_bytes"] / written - 1) < tolerance, (
        facts, written)
    assert facts["recommended_num_shards"] == 1
  text_of = pretraining_shards.describe_plan(dict(facts, num_shards=3))
  assert text_of.startswith(f"Input: 2 file(s), 60 documents, "), text_of
  assert "Recommended: --num_shards=1 (about 100.0 MB of records a shard)" in (
      text_of)


def test_the_recommended_shard_count_is_records_over_the_target(
    corpus, tmp_path, monkeypatch):
  """ceil(estimated record bytes / SHARD_TARGET_BYTES); a learned
  vocabulary (no --vocab_file) is learned from the sample."""
  monkeypatch.setattr(pretraining_shards, "SHARD_TARGET_BYTES", 10_000)
  facts = _run(tmp_path / "dry" / "train", corpus, dry_run=True,
               vocab_file=None, vocab_size=48)
  assert facts["recommended_num_shards"] == -(-facts["record_bytes"] //
                                              10_000) > 1
  assert not (tmp_path / "dry").exists()


def test_the_single_process_num_shards_writes_the_pipelines_bytes(
    corpus, tmp_path):
  """`create_pretraining_data --num_shards=3 --input_files=<glob>` is the
  Beam pipeline's --num_shards=3, byte for byte, and its meta data."""
  count = _run(tmp_path / "beam" / "train", corpus)
  single = create_pretraining_data.run(
      input_files=str(corpus["root"] / "part*.txt"),
      output_file=str(tmp_path / "single" / "train.tfrecord"),
      vocab_file=corpus["vocab"], vocab_size=64, do_lower_case=True,
      random_seed=5, num_shards=3, **OPTIONS)
  assert single == count
  names = [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
  assert sorted(p.name for p in (tmp_path / "single").iterdir()) == sorted(
      names + ["train_pretraining_meta_data.json"])
  for name in names:
    assert (tmp_path / "single" / name).read_bytes() == (
        tmp_path / "beam" / name).read_bytes()
  metas = [output_sets.read_manifest(str(
      tmp_path / side / "train_pretraining_meta_data.json"))
           for side in ("beam", "single")]
  for key in ("num_examples", "num_shards", "shard_pattern", "records",
              "input_files"):
    assert metas[0][key] == metas[1][key], key
  assert metas[1]["writer"] == pretraining_data.WRITER


@pytest.mark.skipif(apiclient is None, reason="needs the dataflow extra")
def test_the_documented_dataflow_job_is_built_offline_up_to_submission(
    corpus, tmp_path):
  """Beam's own dry run of DataflowRunner (`--dry_run` passes it on): the
  job is built, with this package staged for the workers from
  --setup_file, and nothing is submitted or written."""
  facts = _run(tmp_path / "out" / "train", corpus, dry_run=True,
               pipeline_args=[
                   "--runner=DataflowRunner", "--project=my-project",
                   "--region=us-central1", "--temp_location=gs://my-bucket/tmp",
                   "--num_workers=2", "--machine_type=n2-highmem-4",
                   f"--setup_file={train_runs.REPO_ROOT}/setup.py",
                   "--sdk_location=container", "--no_auth"])
  job = facts["dataflow_job"]
  components = job.proto_pipeline.components
  assert {t.unique_name for t in components.transforms.values()} >= {
      "Files", "SpreadFiles", "Documents", "ByShard", "GroupShards",
      "WriteShards"}
  # The workers' install: this package's sdist, built from --setup_file.
  staged = [d.role_payload for env in components.environments.values()
            for d in env.dependencies]
  assert any(b"workflow.tar.gz" in payload for payload in staged), staged
  assert facts["examples"] > 0 and facts["documents"] == 60
  assert not (tmp_path / "out").exists()
