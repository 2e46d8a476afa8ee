"""Sharded pre-training records: the one rule of both commands.

A document's key (SHA-256 of the seed, its position and its text) picks its
shard and its order there; a shard's examples come from its own documents,
seeded from the seed and the shard's index. So `--num_shards=N` gives the
same bytes in one process (`data.create_pretraining_data`) and on any Beam
runner with any number of workers (`data.beam_pretraining_data`).
"""

import collections
import hashlib
import math
import os
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf

from realformer_tf.core import writes
from realformer_tf.data import corpus_text
from realformer_tf.data import pretraining_data
from realformer_tf.data import record_facts
from realformer_tf.data import shards
from realformer_tf.data import tfds_corpus
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

SUFFIX = ".tfrecord"
# A keyed document: (key, lines).
Keyed = Tuple[bytes, List[str]]
# The dry run's recommendation: about this many bytes of records per shard.
SHARD_TARGET_BYTES = 100 * 10**6
# TFRecord's framing of a record: length, and two CRC32s.
_RECORD_FRAMING = 16


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


def keyed_documents(indexed_file: Tuple[int, Any], random_seed: int
                   ) -> Iterator[Keyed]:
  """(key, lines) of each document of one input file (or part of a
  `tfds_corpus.Corpus`, its index the whole split's), streamed."""
  file_index, path = indexed_file
  for document_index, lines in pretraining_data.indexed_documents(path):
    yield document_key(random_seed, file_index, document_index, lines), lines


def text_size(lines: Sequence[str]) -> int:
  """A document's size as counted in progress and plans: its characters,
  with a newline a line (bytes, for ASCII text)."""
  return sum(map(len, lines)) + len(lines)


def stem_of(output_file: str) -> str:
  """The shards' stem of a record file path: `out/train.tfrecord` ->
  `out/train` (absolute, or with its scheme)."""
  path = writes.absolute(output_file)
  return path[:-len(SUFFIX)] if path.endswith(SUFFIX) else path


class ShardMaker:
  """Makes a shard's serialized examples from its keyed documents."""

  def __init__(self, vocab_file: str, do_lower_case: bool, random_seed: int,
               options: dict):
    self._vocab = tokenization.load_vocab(vocab_file)
    self._tokenizer = tokenization.make_tokenizer(vocab_file,
                                                  lower_case=do_lower_case)
    self._random_seed = random_seed
    self._options = options

  def examples(self, shard: int, keyed: Sequence[Keyed]
              ) -> Tuple[List[bytes], int]:
    """(examples, documents) of shard `shard`: its documents in key order."""
    documents = [[[self._vocab[i] for i in sentence] for sentence in document]
                 for document in pretraining_data.tokenized_documents(
                     self._tokenizer, [lines for _, lines in sorted(keyed)],
                     f"shard {shard}", self._options["max_seq_length"])]
    return pretraining_data.shuffled_examples(
        documents, self._vocab, shard_seed(self._random_seed, shard),
        **self._options), len(documents)


def check_shard(name: str, documents: int, examples: int, num_shards: int,
                corpus_documents: int) -> None:
  """Refuses a shard of fewer than 2 documents (its random next sentences
  would come from itself) or without an example, naming it."""
  if documents:
    corpus_text.check_documents(
        documents, f"Shard {name}", pretraining_data.NSP_PURPOSE,
        "separate documents with a blank line" if num_shards == 1 else
        f"the corpus has {corpus_documents} documents for {num_shards} "
        "shards: pass fewer --num_shards")
  if not documents or not examples:
    raise ValueError(
        f"Shard {name} got no {'example' if documents else 'document'}: "
        f"the corpus has too few documents for {num_shards} shards; use "
        "fewer.")


def check_counts(counts: Dict[str, dict], num_shards: int) -> None:
  """`check_shard` on every shard of {name: its counts, or None}, those
  without documents first."""
  corpus = sum(c["documents"] for c in counts.values() if c)
  for name, c in sorted(counts.items(), key=lambda i: bool(i[1])):
    check_shard(name, c["documents"] if c else 0, c["examples"] if c else 0,
                num_shards, corpus)


def set_meta(input_files: Sequence[str], vocab_file: str, stem: str,
             num_shards: int, records: Dict[str, dict], **options) -> dict:
  """The meta data of a shard set (`pretraining_data.meta_data`, plus the
  shard count, pattern and each shard's record facts)."""
  return pretraining_data.meta_data(
      input_files, vocab_file, sum(r["count"] for r in records.values()),
      num_shards=num_shards, shard_pattern=os.path.basename(
          shards.pattern(stem, num_shards, SUFFIX)),
      records=records, **options)


def write_in_process(input_files: Sequence[str], vocab_file: str, stem: str,
                     num_shards: int, outputs: writes.OutputSet,
                     do_lower_case: bool, random_seed: int, options: dict
                    ) -> Dict[str, dict]:
  """Stages the `num_shards` shards of `stem` in `outputs`, one at a time
  (memory: the corpus's text and one shard's examples); returns each
  shard's record facts by name. Checked before anything is written."""
  by_shard = collections.defaultdict(list)
  for indexed in enumerate(input_files):
    for keyed in keyed_documents(indexed, random_seed):
      by_shard[shard_of(keyed[0], num_shards)].append(keyed)
  finals = shards.shard_paths(stem, num_shards, SUFFIX)
  check_counts({os.path.basename(f): by_shard.get(i) and dict(
      documents=len(by_shard[i]), examples=1) for i, f in enumerate(finals)},
               num_shards)
  corpus = sum(map(len, by_shard.values()))
  maker = ShardMaker(vocab_file, do_lower_case, random_seed, options)
  records = {}
  for shard, final in enumerate(finals):
    examples, documents = maker.examples(shard, by_shard.pop(shard))
    check_shard(os.path.basename(final), documents, len(examples),
                num_shards, corpus)
    path = outputs.stage(final)
    pretraining_data.write_records(path, examples)
    records[os.path.basename(final)] = record_facts.scan(path).as_dict()
  return records


def plan(input_files: Sequence[str], vocab_file: Optional[str],
         vocab_size: int, do_lower_case: bool, random_seed: int,
         num_shards: int, options: dict, sample_bytes: int
        ) -> Dict[str, Any]:
  """A dry run: counts every document and character of the input, makes the
  examples of a sample of about `sample_bytes` (the documents whose key
  falls below `sample_bytes` / the input's file bytes: an unbiased sample;
  without `vocab_file` with a vocabulary learned from it) and scales its
  examples and record bytes to the whole input. The recommended
  `--num_shards`: about `SHARD_TARGET_BYTES` of records each."""
  total = sum(f.num_bytes if isinstance(f, tfds_corpus.Corpus) else
              int(tf.io.gfile.stat(f).length) for f in input_files)
  cut = min(1.0, sample_bytes / max(total, 1)) * 2.0**64
  documents = text = sample_text = 0
  sample = []
  for indexed in enumerate(input_files):
    for keyed in keyed_documents(indexed, random_seed):
      documents += 1
      text += text_size(keyed[1])
      if int.from_bytes(keyed[0][:8], "big") < cut:
        sample.append(keyed)
        sample_text += text_size(keyed[1])
  if len(sample) < 2:
    raise ValueError(f"The dry run's sample has {len(sample)} document(s) "
                     f"of {documents}: pass a larger --dry_run_sample_mb.")
  with tempfile.TemporaryDirectory() as tmp:
    if not vocab_file:
      vocab_file = os.path.join(tmp, "vocab.txt")
      tokenization.learn_vocab(wordpiece.count_words(
          (line for _, lines in sorted(sample) for line in lines),
          do_lower_case), vocab_size, vocab_file)
    maker = ShardMaker(vocab_file, do_lower_case, random_seed, options)
    examples, _ = maker.examples(0, sample)
  scale = text / sample_text
  record_bytes = round(scale * sum(len(e) + _RECORD_FRAMING
                                   for e in examples))
  return dict(files=len(input_files), documents=documents, text_bytes=text,
              sample_documents=len(sample), sample_text_bytes=sample_text,
              examples=round(scale * len(examples)),
              record_bytes=record_bytes, num_shards=num_shards,
              recommended_num_shards=max(1, math.ceil(
                  record_bytes / SHARD_TARGET_BYTES)))


def describe_plan(facts: Dict[str, Any]) -> str:
  """`plan`'s facts as the sentences a user plans with."""
  mb = lambda n: f"{n / 1e6:,.1f} MB"  # pylint: disable=unnecessary-lambda-assignment
  k, n = facts["recommended_num_shards"], facts["num_shards"]
  return (
      f"Input: {facts['files']} file(s), {facts['documents']:,} documents, "
      f"{mb(facts['text_bytes'])} of text. Estimated from a sample of "
      f"{facts['sample_documents']:,} documents ({mb(facts['sample_text_bytes'])}"
      f"): {facts['examples']:,} examples, {mb(facts['record_bytes'])} of "
      f"records. At --num_shards={n}: {mb(facts['record_bytes'] / n)} of "
      f"records and {mb(facts['text_bytes'] / n)} of text a shard (one Beam "
      f"worker holds a shard's text and examples). Recommended: "
      f"--num_shards={k} (about {mb(SHARD_TARGET_BYTES)} of records a "
      f"shard), or the number of training workers if that is larger (each "
      f"input pipeline reads whole shards).")
