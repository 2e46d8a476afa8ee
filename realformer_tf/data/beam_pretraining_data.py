r"""BERT pre-training records from a corpus, on Apache Beam (CLI; `beam` extra).

  python -m realformer_tf.data.beam_pretraining_data --num_shards=64 \
      --input_files='corpus/*.txt' --output_prefix=out/train

The records of `data.pretraining_data`, whatever the number of workers: a
document's SHA-256 key picks its shard and its order there.
"""

import json
import os
import sys
import time
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import apache_beam as beam
from apache_beam.options import pipeline_options
from apache_beam.runners.portability.fn_api_runner import fn_runner
import tensorflow as tf

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.core import writes
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import pretraining_shards
from realformer_tf.data import record_facts
from realformer_tf.data import shards
from realformer_tf.data import tfds_corpus
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

WRITER = "realformer_tf.data.beam_pretraining_data"
SUFFIX = pretraining_shards.SUFFIX
_COUNT_SUFFIX = ".count.json"


@beam.ptransform_fn
def CountWords(documents, lower_case: bool):  # pylint: disable=invalid-name
  """Word counts of (key, lines) documents, as one dict: per document, then
  summed per word over the workers (a combine)."""
  return (documents
          | "Count" >> beam.FlatMap(lambda keyed: wordpiece.count_words(
              keyed[1], lower_case).items())
          | "Sum" >> beam.CombinePerKey(sum)
          | "Gather" >> beam.combiners.ToDict())


@beam.ptransform_fn
def _learn_vocab(root, input_files: Sequence[str], random_seed: int,
                 sample_documents: int, do_lower_case: bool, path: str,
                 vocab_size: int):
  """The words of the `sample_documents` documents of smallest key (their
  keys first, then the texts read again: none is held), counted, learned
  from once into `path`."""
  documents = beam.ptransform_fn(_read)
  last = (root | "Keys" >> documents(input_files, random_seed)
          | "Key" >> beam.Map(lambda keyed: keyed[0])
          | "Smallest" >> beam.combiners.Top.Smallest(sample_documents)
          | "Last" >> beam.Map(lambda keys: keys[-1]))
  return (root | "Texts" >> documents(input_files, random_seed)
          | "InSample" >> beam.Filter(lambda keyed, last: keyed[0] <= last,
                                      beam.pvalue.AsSingleton(last))
          | "CountWords" >> CountWords(do_lower_case)
          | "Learn" >> beam.Map(lambda counts: len(tokenization.learn_vocab(
              counts, vocab_size, path))))


# The pipeline's Beam metrics (`summary` prints them).
METRICS = "realformer_tf"


def _counted_documents(indexed_file: Tuple[int, Any], random_seed: int
                      ) -> Iterator[Tuple[bytes, List[str]]]:
  """`pretraining_shards.keyed_documents`, counted in the metrics."""
  documents = beam.metrics.Metrics.counter(METRICS, "documents")
  text = beam.metrics.Metrics.counter(METRICS, "text_bytes")
  count = 0
  for keyed in pretraining_shards.keyed_documents(indexed_file, random_seed):
    documents.inc()
    text.inc(pretraining_shards.text_size(keyed[1]))
    count += 1
    yield keyed
  logging.info("Read %s: %d documents.", indexed_file[1], count)


class WriteShard(beam.DoFn):
  """Makes one shard's examples and writes them, with their count.

  Not Beam's `WriteToTFRecord`: its `_RoundRobinKeyFn` deals records from a
  random shard, so shard contents would depend on the run.
  """

  def __init__(self, staging_dir: str, stem: str, num_shards: int,
               vocab_file: str, do_lower_case: bool, random_seed: int,
               options: dict):
    super().__init__()
    self._staging_dir = staging_dir
    self._stem = stem
    self._num_shards = num_shards
    self._maker_args = (vocab_file, do_lower_case, random_seed, options)
    self._maker = None
    self._examples = beam.metrics.Metrics.counter(METRICS, "examples")
    self._shard_bytes = beam.metrics.Metrics.distribution(METRICS,
                                                          "shard_bytes")
    self._shard_examples = beam.metrics.Metrics.distribution(
        METRICS, "shard_examples")

  def setup(self):
    self._maker = pretraining_shards.ShardMaker(*self._maker_args)

  def process(self, element):
    shard, keyed = element
    examples, documents = self._maker.examples(shard, keyed)
    path = shards.shard_path(os.path.join(self._staging_dir, self._stem),
                             shard, self._num_shards, SUFFIX)
    counts = dict(examples=len(examples), documents=documents)
    if examples and documents > 1:  # Else `run` refuses the shard.
      # Deterministic bytes: a retried bundle rewrites the same file.
      pretraining_data.write_records(path, examples)
      counts["records"] = record_facts.scan(path).as_dict()
      size = int(tf.io.gfile.stat(path).length)
      self._examples.inc(len(examples))
      self._shard_bytes.update(size)
      self._shard_examples.update(len(examples))
      logging.info("Wrote shard %d of %d: %d documents, %d examples, %.1f MB.",
                   shard, self._num_shards, documents, len(examples),
                   size / 1e6)
    # Plain writes: the staging folder is discarded whole if anything fails.
    with tf.io.gfile.GFile(path + _COUNT_SUFFIX, "w") as f:
      json.dump(counts, f)
    yield shard, len(examples)


def _run_pipeline(pipeline_args: Sequence[str], build):
  """Runs the pipeline `build(root)` adds to, to its end; returns its result.

  Without `--runner`, on the `FnApiRunner`, where Beam's `DirectRunner` lands
  for these transforms after first trying to download the Prism runner from
  GitHub (`DirectRunner.run_pipeline`): a cluster without internet waits.
  """
  options = pipeline_options.PipelineOptions(list(pipeline_args))
  runner = None
  if options.view_as(pipeline_options.StandardOptions).runner is None:
    runner = fn_runner.FnApiRunner()
  root = beam.Pipeline(runner=runner, options=options)
  build(root)
  result = root.run()
  result.wait_until_finish()
  return result


def summary(result, seconds: float) -> str:
  """The pipeline's metrics (`METRICS`) as one line: documents and text
  read, examples and shard sizes written, elapsed time and MB/s."""
  found = result.metrics().query(
      beam.metrics.MetricsFilter().with_namespace(METRICS))
  values = {r.key.metric.name: r.committed for r in found["counters"]}
  values.update({r.key.metric.name: r.committed
                 for r in found["distributions"]})
  text, size = values.get("text_bytes", 0), values.get("shard_bytes")
  line = (f"Read {values.get('documents', 0):,} documents "
          f"({text / 1e6:,.1f} MB of text); wrote "
          f"{values.get('examples', 0):,} examples")
  if size and size.count:
    line += (f" ({size.sum / 1e6:,.1f} MB) in {size.count} shards of "
             f"{size.min / 1e6:,.1f} to {size.max / 1e6:,.1f} MB")
  return (f"{line}; {seconds:,.1f} s, {text / 1e6 / max(seconds, 1e-9):.3f} "
          "MB of text/s.")


def _read(root, input_files: Sequence[str], random_seed: int):
  # A TFDS split is read a file shard an element (`tfds.beam.ReadFromTFDS`
  # would drop the example indices the keys need).
  return (root
          | "Files" >> beam.Create([
              (i, part) for i, f in enumerate(input_files) for part in (
                  f.parts() if isinstance(f, tfds_corpus.Corpus) else [f])])
          | "SpreadFiles" >> beam.Reshuffle()
          | "Documents" >> beam.FlatMap(_counted_documents, random_seed))


def run(input_files, output_prefix: str, vocab_file: Optional[str],
        vocab_size: int, vocab_sample_documents: int, num_shards: int,
        do_lower_case: bool, max_seq_length: int,
        max_predictions_per_seq: int, masked_lm_prob: float, dupe_factor: int,
        short_seq_prob: float, random_seed: int,
        pipeline_args: Sequence[str] = (), overwrite: bool = False,
        dry_run: bool = False, dry_run_sample_mb: float = 4.0,
        tfds_name: Optional[str] = None, tfds_split: str = "train",
        tfds_feature: str = "text", tfds_data_dir: Optional[str] = None):
  """Checks every argument (ValueError naming it) and output path, runs the
  pipelines, publishes the shard set, prints `summary` and returns the
  number of examples. The arguments are the flags' values; `pipeline_args`,
  Beam's. `dry_run`: writes nothing and returns `pretraining_shards.plan`'s
  facts, on `DataflowRunner` with the job built too (`dataflow_job`)."""
  input_files = tfds_corpus.input_of(input_files, tfds_name, tfds_split,
                                     tfds_feature, tfds_data_dir)
  start = time.monotonic()
  options = dict(max_seq_length=max_seq_length,
                 max_predictions_per_seq=max_predictions_per_seq,
                 masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
                 short_seq_prob=short_seq_prob)
  output_file = f"{output_prefix}{SUFFIX}"  # Names the meta data.
  input_files = pretraining_data.validate_arguments(
      input_files, output_file, random_seed=random_seed, **options)
  if isinstance(num_shards, bool) or not isinstance(num_shards, int) or (
      num_shards < 1):
    raise ValueError(f"num_shards must be an int >= 1, got {num_shards!r}.")
  if vocab_file:
    tokenization.load_vocab(vocab_file)
  elif vocab_size < 16 or vocab_sample_documents < 1:
    raise ValueError("Learning a vocabulary needs vocab_size >= 16 and "
                     f"vocab_sample_documents >= 1, got {vocab_size} and "
                     f"{vocab_sample_documents}.")
  directory, stem = os.path.split(writes.absolute(output_prefix))
  learned_path = os.path.join(directory, create_pretraining_data.VOCAB_NAME)
  if not vocab_file:
    create_pretraining_data.check_vocab_target(
        learned_path, os.path.join(directory, stem + SUFFIX), input_files,
        overwrite)
  if dry_run:
    facts = pretraining_shards.plan(
        input_files, vocab_file, vocab_size, do_lower_case, random_seed,
        num_shards, options, int(dry_run_sample_mb * 1e6))
    if pipeline_options.PipelineOptions(list(pipeline_args)).view_as(
        pipeline_options.StandardOptions).runner == "DataflowRunner":
      facts["dataflow_job"] = _run_pipeline(
          [*pipeline_args, "--dry_run=True"], lambda root: _write_shards(
              root, input_files, os.path.join(directory, stem) + ".dry-run",
              stem, num_shards, vocab_file or learned_path, do_lower_case,
              random_seed, options)).job
    return facts
  final_paths = shards.shard_paths(os.path.join(directory, stem), num_shards,
                                   SUFFIX)
  with output_sets.output_set(
      pretraining_data.meta_data_path(os.path.join(directory, stem + SUFFIX)),
      WRITER, final_paths + ([] if vocab_file else [learned_path]),
      "--overwrite", overwrite) as outputs:
    # A claimed temp of the layer: a later run removes it if this one is
    # killed; an unclaimed look-alike is a user's and is kept.
    with writes.scratch(os.path.join(directory, stem),
                        utils.GFILE_OPS) as staging:
      if not vocab_file:
        vocab_file = outputs.stage(learned_path)
        _run_pipeline(pipeline_args, lambda root: root | _learn_vocab(
            input_files, random_seed, vocab_sample_documents, do_lower_case,
            vocab_file, vocab_size))
      result = _run_pipeline(pipeline_args, lambda root: _write_shards(
          root, input_files, staging, stem, num_shards, vocab_file,
          do_lower_case, random_seed, options))
      shard_counts = {os.path.basename(final): output_sets.read_manifest(
          os.path.join(staging, os.path.basename(final)) + _COUNT_SUFFIX)
                      for final in final_paths}
      pretraining_shards.check_counts(shard_counts, num_shards)
      for final in final_paths:
        utils.GFILE_OPS.rename(os.path.join(staging, os.path.basename(final)),
                               outputs.stage(final))
      records = {name: c["records"] for name, c in shard_counts.items()}
      meta = pretraining_shards.set_meta(
          input_files, vocab_file, stem, num_shards, records,
          do_lower_case=do_lower_case, random_seed=random_seed, **options)
      if learned_path in outputs.staged:
        meta.update(vocab_file=learned_path,
                    vocab_sample_documents=vocab_sample_documents)
      outputs.commit(meta)
  count = meta["num_examples"]
  logging.info("Wrote %d examples in %d shards: %s", count, num_shards,
               shards.pattern(os.path.join(directory, stem), num_shards,
                              SUFFIX))
  print(summary(result, time.monotonic() - start), file=sys.stderr)
  return count


def _write_shards(root, input_files: Sequence[str], staging: str, stem: str,
                  num_shards: int, vocab_file: str, do_lower_case: bool,
                  random_seed: int, options: dict):
  """The records pipeline: documents grouped by shard, each shard written
  into `staging` (`WriteShard`)."""
  return (_read(root, input_files, random_seed)
          | "ByShard" >> beam.Map(lambda keyed: (
              pretraining_shards.shard_of(keyed[0], num_shards), keyed))
          | "GroupShards" >> beam.GroupByKey()
          | "WriteShards" >> beam.ParDo(WriteShard(
              staging, stem, num_shards, vocab_file, do_lower_case,
              random_seed, options)))


def define_flags():
  """Defines the CLI flags (only when run as a program)."""
  create_pretraining_data.define_instance_flags()
  tfds_corpus.define_flags()
  flags.DEFINE_string("output_prefix", None, "Output path without suffix: "
                      "writes <prefix>-SSSSS-of-NNNNN.tfrecord and "
                      "<prefix>_pretraining_meta_data.json.")
  flags.DEFINE_integer("num_shards", 16, "Output shards (a shard's text and "
                       "examples are held by one worker; --dry_run "
                       "recommends a count).")
  flags.DEFINE_bool("dry_run", False, "Write nothing: count the input, "
                    "estimate the examples and records from a sample and "
                    "recommend --num_shards (on DataflowRunner: also build "
                    "the job without submitting it).")
  flags.DEFINE_float("dry_run_sample_mb", 4.0, "The dry run's sample of the "
                     "input (MB of text) made into examples.")
  flags.DEFINE_integer("vocab_sample_documents", 100000, "Without "
                       "--vocab_file: the vocabulary is learned from this "
                       "many documents (those of smallest key).")


def main(argv):
  names = ("input_files", "output_prefix", "vocab_file", "vocab_size",
           "vocab_sample_documents", "num_shards", "do_lower_case",
           "max_seq_length", "max_predictions_per_seq", "masked_lm_prob",
           "dupe_factor", "short_seq_prob", "random_seed", "tfds_name",
           "tfds_split", "tfds_feature", "tfds_data_dir")
  result = run(**{name: flags.FLAGS[name].value for name in names},
               pipeline_args=argv[1:], overwrite=flags.FLAGS.overwrite,
               dry_run=flags.FLAGS.dry_run,
               dry_run_sample_mb=flags.FLAGS.dry_run_sample_mb)
  if flags.FLAGS.dry_run:
    job = result.pop("dataflow_job", None)
    print(pretraining_shards.describe_plan(result), file=sys.stderr)
    if job:
      print(f"Built Dataflow job {job.proto.name} without submitting it "
            "(the options and the workers' install are complete).",
            file=sys.stderr)
  print(json.dumps(result))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["output_prefix"])
  # Unknown flags are Beam's pipeline options (as TFDS's beam scripts).
  cli.run(main, flags_parser=lambda argv: flags.FLAGS(argv, known_only=True))
