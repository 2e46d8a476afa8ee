"""A prepared TFDS text data set (e.g. `wikipedia/20230601.en`) as a
pre-training corpus, in place of `--input_files`: an example is a document,
its text feature's non-blank stripped lines its sentences (as a file's
lines), its index in the split its key's position (`pretraining_shards`).
Read as it is prepared: nothing is downloaded.
"""

import dataclasses
import itertools
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from absl import flags
import tensorflow as tf
import tensorflow_datasets as tfds

from realformer_tf.data import corpus_text


def define_flags():
  """The input flags of both pre-training data commands."""
  flags.DEFINE_list("input_files", None, "Comma-separated raw text files or "
                    "glob patterns: one sentence per line, blank line "
                    "between documents.")
  flags.DEFINE_string("tfds_name", None, "Instead of --input_files: a "
                      "prepared TFDS data set, e.g. wikipedia/20230601.en.")
  flags.DEFINE_string("tfds_split", "train", "The --tfds_name split.")
  flags.DEFINE_string("tfds_feature", "text", "Its text feature (a sentence "
                      "a line).")
  flags.DEFINE_string("tfds_data_dir", None, "Its data dir (else TFDS's).")


@dataclasses.dataclass(frozen=True)
class Corpus:
  """Examples [start, end) of a prepared split; `parts` read in parallel."""
  name: str
  split: str
  feature: str
  data_dir: Optional[str]
  start: int
  end: int
  shard_lengths: Tuple[int, ...]
  num_bytes: int

  def __str__(self) -> str:
    return (f"tfds:{self.name}:{self.split}[{self.start}:{self.end}]:"
            f"{self.feature}")

  def parts(self) -> List["Corpus"]:
    """One corpus per file shard of the split (read without a skip)."""
    ends = list(itertools.accumulate(self.shard_lengths)) or [self.end]
    return [dataclasses.replace(self, start=a, end=b)
            for a, b in zip([0] + ends[:-1], ends) if b > a]

  def documents(self) -> Iterator[Tuple[int, List[str]]]:
    """(example index, its non-blank lines) of each example with text."""
    builder = tfds.builder(self.name, data_dir=self.data_dir)
    # Files in order, one at a time: the indices are the split's.
    examples = builder.as_dataset(
        split=f"{self.split}[{self.start}:{self.end}]", shuffle_files=False,
        read_config=tfds.ReadConfig(interleave_cycle_length=1))
    feature = self.feature
    for index, text in enumerate(examples.map(
        lambda example: example[feature]).as_numpy_iterator(), self.start):
      lines = [line for line in corpus_text.decode_lines(
          text, f"{self.name}:{self.split}[{index}]") if line]
      if lines:
        yield index, lines


def open_split(name: str, split: str = "train", feature: str = "text",
               data_dir: Optional[str] = None) -> Corpus:
  """The prepared split `split` of `name`, checked (ValueError naming the
  data set, split or feature)."""
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except ValueError as e:  # DatasetNotFoundError, or an unknown config.
    raise ValueError(f"--tfds_name={name}: "
                     f"{str(e).strip().splitlines()[0]}") from None
  if not builder.is_prepared():
    raise ValueError(
        f"TFDS data set {name} is not prepared in {builder.data_dir}: run "
        f"`tfds build {name} --data_dir={data_dir or '<its data dir>'}` "
        "first (nothing is downloaded here).")
  splits = builder.info.splits
  if split not in splits:
    raise ValueError(f"{name} has no split {split!r}; its splits: "
                     f"{', '.join(sorted(splits))}.")
  features = builder.info.features
  texts = sorted(k for k, f in features.items()
                 if f.tf_dtype == tf.string and not f.shape)
  if feature not in texts:
    raise ValueError(f"{name} has no text feature {feature!r}; its text "
                     f"features: {', '.join(texts) or 'none'}.")
  info = splits[split]
  if not info.num_examples:
    raise ValueError(f"{name}'s split {split!r} is empty (0 examples).")
  # name/config:version: the workers read the version checked.
  return Corpus(":".join(builder.info.full_name.rsplit("/", 1)), split, feature, data_dir, 0,
                info.num_examples, tuple(info.shard_lengths),
                int(info.num_bytes))


def input_of(input_files: Optional[Sequence[str]], tfds_name: Optional[str],
             tfds_split="train", tfds_feature="text", tfds_data_dir=None
            ) -> Sequence[Union[str, Corpus]]:
  """The commands' input: `input_files`, or [`tfds_name`'s `open_split`]
  (ValueError for both or neither)."""
  if bool(input_files) == bool(tfds_name):
    raise ValueError("Pass either --input_files or --tfds_name (got " +
                     ("both)." if tfds_name else "neither)."))
  return [open_split(tfds_name, tfds_split, tfds_feature, tfds_data_dir)
         ] if tfds_name else input_files
