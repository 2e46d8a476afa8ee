r"""BERT pre-training records from a corpus, on Apache Beam (CLI; `beam` extra).

  python -m realformer_tf.data.beam_pretraining_data --num_shards=64 \
      --input_files='corpus/*.txt' --output_prefix=out/train

The records of `data.pretraining_data`, whatever the number of workers: a
document's SHA-256 key picks its shard and its order there.
"""

import hashlib
import json
import os
from typing import Iterator, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import apache_beam as beam
from apache_beam.options import pipeline_options
from apache_beam.runners.portability.fn_api_runner import fn_runner
import tensorflow as tf

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.core import writes
from realformer_tf.data import corpus_text
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf.data import pretraining_data
from realformer_tf.data import shards
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

WRITER = "realformer_tf.data.beam_pretraining_data"
SUFFIX = ".tfrecord"
_COUNT_SUFFIX = ".count.json"


def expand_input_files(input_files) -> List[str]:
  """Input paths and glob patterns (a list, or one comma-separated string)
  as files, each pattern's matches sorted; checked as the single-process
  command checks them (`pretraining_data.check_input_files`)."""
  if isinstance(input_files, str):
    input_files = input_files.split(",")
  files = []
  for pattern in (p.strip() for p in input_files or () if p.strip()):
    matched = (sorted(tf.io.gfile.glob(pattern))
               if any(c in pattern for c in "*?[") else [pattern])
    if not matched:
      raise ValueError(f"Input pattern {pattern!r} matches no file.")
    files += [f for f in matched if f not in files]
  return pretraining_data.check_input_files(files)


def document_key(random_seed: int, file_index: int, document_index: int,
                 lines: Sequence[str]) -> bytes:
  """SHA-256 of the seed, a document's position and its text."""
  digest = hashlib.sha256(
      f"{random_seed}\0{file_index}\0{document_index}\0".encode())
  digest.update("\n".join(lines).encode("utf-8"))
  return digest.digest()


def shard_of(key: bytes, num_shards: int) -> int:
  return int.from_bytes(key[:8], "big") % num_shards


def shard_seed(random_seed: int, shard: int) -> int:
  """The `random.Random` seed of shard `shard`'s examples."""
  return int.from_bytes(hashlib.sha256(
      f"{random_seed}\0shard\0{shard}".encode()).digest()[:8], "big")


def keyed_documents(indexed_file: Tuple[int, str], random_seed: int
                   ) -> Iterator[Tuple[bytes, List[str]]]:
  """(key, lines) of each document of one input file, streamed."""
  file_index, path = indexed_file
  for document_index, lines in enumerate(
      pretraining_data.stream_documents(path)):
    yield document_key(random_seed, file_index, document_index, lines), lines


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
    self._vocab_file = vocab_file
    self._do_lower_case = do_lower_case
    self._random_seed = random_seed
    self._options = options
    self._tokenizer = self._vocab = None

  def setup(self):
    self._vocab = tokenization.load_vocab(self._vocab_file)
    self._tokenizer = tokenization.make_tokenizer(
        self._vocab_file, lower_case=self._do_lower_case)

  def process(self, element):
    shard, keyed = element
    texts = [lines for _, lines in sorted(keyed)]
    ids = pretraining_data.tokenize_lines(
        self._tokenizer, [line for lines in texts for line in lines])
    pretraining_data.warn_long_lines(f"shard {shard}", ids,
                                     self._options["max_seq_length"])
    documents = [[[self._vocab[i] for i in sentence] for sentence in document]
                 for document in pretraining_data.split_documents(texts, ids)]
    examples = pretraining_data.shuffled_examples(
        documents, self._vocab, shard_seed(self._random_seed, shard),
        **self._options)
    path = shards.shard_path(os.path.join(self._staging_dir, self._stem),
                             shard, self._num_shards, SUFFIX)
    counts = dict(examples=len(examples), documents=len(documents))
    if examples and len(documents) > 1:  # Else `run` refuses the shard.
      # Deterministic bytes: a retried bundle rewrites the same file.
      pretraining_data.write_records(path, examples)
      counts["records"] = record_facts.scan(path).as_dict()
    # Plain writes: the staging folder is discarded whole if anything fails.
    with tf.io.gfile.GFile(path + _COUNT_SUFFIX, "w") as f:
      json.dump(counts, f)
    yield shard, len(examples)


def _run_pipeline(pipeline_args: Sequence[str], build) -> None:
  """Runs the pipeline `build(root)` adds to, to its end.

  Without `--runner`, on the `FnApiRunner`, where Beam's `DirectRunner`
  lands for these transforms (it honours `--direct_num_workers` and
  `--direct_running_mode`) after first trying to download the Prism runner
  from GitHub (`DirectRunner.run_pipeline`): a network call a cluster
  without internet access waits on.
  """
  options = pipeline_options.PipelineOptions(list(pipeline_args))
  runner = None
  if options.view_as(pipeline_options.StandardOptions).runner is None:
    runner = fn_runner.FnApiRunner()
  with beam.Pipeline(runner=runner, options=options) as root:
    build(root)


def _read(root, input_files: Sequence[str], random_seed: int):
  return (root
          | "Files" >> beam.Create(list(enumerate(input_files)))
          | "SpreadFiles" >> beam.Reshuffle()
          | "Documents" >> beam.FlatMap(keyed_documents, random_seed))


def run(input_files, output_prefix: str, vocab_file: Optional[str],
        vocab_size: int, vocab_sample_documents: int, num_shards: int,
        do_lower_case: bool, max_seq_length: int,
        max_predictions_per_seq: int, masked_lm_prob: float, dupe_factor: int,
        short_seq_prob: float, random_seed: int,
        pipeline_args: Sequence[str] = (), overwrite: bool = False) -> int:
  """Checks every argument (ValueError naming it) and every output path (a
  file there that no manifest of ours lists is refused, unless `overwrite`:
  `core.writes`), runs the pipelines and publishes the shard set; returns
  the number of examples. The arguments are the flags' values;
  `pipeline_args`, Beam's (e.g. `--runner=...`)."""
  options = dict(max_seq_length=max_seq_length,
                 max_predictions_per_seq=max_predictions_per_seq,
                 masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
                 short_seq_prob=short_seq_prob)
  input_files = expand_input_files(input_files)
  output_file = f"{output_prefix}{SUFFIX}"  # Names the meta data.
  pretraining_data.validate_arguments(input_files, output_file,
                                      random_seed=random_seed, **options)
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
  if not vocab_file and learned_path in map(writes.absolute, input_files):
    raise ValueError(f"The learned vocabulary would overwrite input file "
                     f"{learned_path!r}.")
  if not vocab_file and not overwrite:
    create_pretraining_data.check_vocab_target(
        learned_path, os.path.join(directory, stem + SUFFIX))
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
      _run_pipeline(pipeline_args, lambda root: (
          _read(root, input_files, random_seed)
          | "ByShard" >> beam.Map(
              lambda keyed: (shard_of(keyed[0], num_shards), keyed))
          | "GroupShards" >> beam.GroupByKey()
          | "WriteShards" >> beam.ParDo(WriteShard(
              staging, stem, num_shards, vocab_file, do_lower_case,
              random_seed, options))))
      count, records = 0, {}
      shard_counts = {final: output_sets.read_manifest(os.path.join(
          staging, os.path.basename(final)) + _COUNT_SUFFIX)
                      for final in final_paths}
      documents = sum(c["documents"] for c in shard_counts.values() if c)
      # Shards without documents first; one of one document gives wrong
      # random next sentences.
      for final, counts in sorted(shard_counts.items(), key=lambda i: bool(
          i[1])):
        name = os.path.basename(final)
        if counts:
          corpus_text.check_documents(
              counts["documents"], f"Shard {name}",
              pretraining_data.NSP_PURPOSE,
              "separate documents with a blank line" if num_shards == 1 else
              f"the corpus has {documents} documents for {num_shards} "
              "shards: pass fewer --num_shards")
        if not counts or not counts["examples"]:
          raise ValueError(
              f"Shard {name} got no {'example' if counts else 'document'}: "
              f"the corpus has too few documents for {num_shards} shards; "
              "use fewer.")
        count += counts["examples"]
        records[name] = counts["records"]
        utils.GFILE_OPS.rename(os.path.join(staging, name),
                               outputs.stage(final))
      meta = pretraining_data.meta_data(
          input_files, vocab_file, count, do_lower_case=do_lower_case,
          random_seed=random_seed, num_shards=num_shards,
          shard_pattern=os.path.basename(shards.pattern(stem, num_shards,
                                                        SUFFIX)),
          records=records, **options)
      if learned_path in outputs.staged:
        meta.update(vocab_file=learned_path,
                    vocab_sample_documents=vocab_sample_documents)
      outputs.commit(meta)
  logging.info("Wrote %d examples in %d shards: %s", count, num_shards,
               shards.pattern(os.path.join(directory, stem), num_shards,
                              SUFFIX))
  return count


def define_flags():
  """Defines the CLI flags (only when run as a program)."""
  create_pretraining_data.define_instance_flags()
  flags.DEFINE_list("input_files", None, "Comma-separated raw text files or "
                    "glob patterns: one sentence per line, blank line "
                    "between documents.")
  flags.DEFINE_string("output_prefix", None, "Output path without suffix: "
                      "writes <prefix>-SSSSS-of-NNNNN.tfrecord and "
                      "<prefix>_pretraining_meta_data.json.")
  flags.DEFINE_integer("num_shards", 16, "Output shards (a shard's text is "
                       "held by one worker: some tens of MB each).")
  flags.DEFINE_integer("vocab_sample_documents", 100000, "Without "
                       "--vocab_file: the vocabulary is learned from this "
                       "many documents (those of smallest key).")


def main(argv):
  names = ("input_files", "output_prefix", "vocab_file", "vocab_size",
           "vocab_sample_documents", "num_shards", "do_lower_case",
           "max_seq_length", "max_predictions_per_seq", "masked_lm_prob",
           "dupe_factor", "short_seq_prob", "random_seed")
  count = run(**{name: flags.FLAGS[name].value for name in names},
              pipeline_args=argv[1:], overwrite=flags.FLAGS.overwrite)
  print(json.dumps(count))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["input_files", "output_prefix"])
  # Unknown flags are Beam's pipeline options (as TFDS's beam scripts).
  cli.run(main, flags_parser=lambda argv: flags.FLAGS(argv, known_only=True))
