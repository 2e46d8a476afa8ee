r"""Writes BERT MLM/NSP pre-training TFRecords from raw text (CLI).

  python -m realformer_tf.data.create_pretraining_data --input_files=a.txt \
      --vocab_file=vocab.txt --output_file=out/train.tfrecord

One sentence per line, a blank line between documents (or
`--tfds_name=wikipedia/20230601.en`: `data.tfds_corpus`); without
`--vocab_file` a WordPiece vocabulary is learned.
"""

import os

from absl import flags

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import pretraining_shards
from realformer_tf.data import record_facts
from realformer_tf.data import shards
from realformer_tf.data import tfds_corpus
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

VOCAB_NAME = "vocab.txt"


def define_flags():
  """Defines the CLI flags (only when run as a program)."""
  tfds_corpus.define_flags()
  flags.DEFINE_string("output_file", None, "Output TFRecord file (with "
                      "--num_shards, names the shards' stem).")
  flags.DEFINE_integer("num_shards", 0, "Write the Beam pipeline's shard set "
                       "(the same bytes as its --num_shards): "
                       "<stem>-SSSSS-of-NNNNN.tfrecord; 0: one file.")
  define_instance_flags()


def define_instance_flags():
  """The flags this command shares with `data.beam_pretraining_data`."""
  flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (one token per "
                      "line); without it, one is learned from the input and "
                      "written as vocab.txt next to the output.")
  flags.DEFINE_integer("vocab_size", 8000, "Target size of the learned "
                       "vocabulary (only without --vocab_file).")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lower-case and strip accents (uncased models).")
  flags.DEFINE_integer("max_seq_length", 128, "Fixed sequence length (>= 8).")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum masked positions per sequence.")
  flags.DEFINE_float("masked_lm_prob", 0.15,
                     "Fraction of tokens to mask, in (0, 1).")
  flags.DEFINE_integer("dupe_factor", 1,
                       "Passes over the input, each with different masks.")
  flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a target length "
                     "shorter than max_seq_length.")
  flags.DEFINE_integer("random_seed", 12345, "Seed for all random choices.")
  flags.DEFINE_bool("overwrite", False, "Without --vocab_file: replace a "
                    "vocab.txt (and records) at the output paths that this "
                    "command did not write (its own are replaced anyway).")


def run(input_files, output_file, vocab_file, vocab_size, do_lower_case,
        max_seq_length, max_predictions_per_seq, masked_lm_prob, dupe_factor,
        short_seq_prob, random_seed, overwrite=False, num_shards=0,
        tfds_name=None, tfds_split="train", tfds_feature="text",
        tfds_data_dir=None) -> int:
  """Checks every flag (ValueError), learns a vocabulary if none is given,
  writes the records (one file, or `num_shards` of `pretraining_shards`)
  and returns their count. The arguments are the flags' values."""
  input_files = tfds_corpus.input_of(input_files, tfds_name, tfds_split,
                                     tfds_feature, tfds_data_dir)
  instance = dict(max_seq_length=max_seq_length,
                  max_predictions_per_seq=max_predictions_per_seq,
                  masked_lm_prob=masked_lm_prob, dupe_factor=dupe_factor,
                  short_seq_prob=short_seq_prob)
  options = dict(instance, random_seed=random_seed)
  input_files = pretraining_data.validate_arguments(input_files, output_file,
                                                    **options)
  if isinstance(num_shards, bool) or not isinstance(num_shards, int) or (
      num_shards < 0):
    raise ValueError(f"num_shards must be an int >= 1 (0: one file), got "
                     f"{num_shards!r}.")
  if vocab_file and not num_shards:
    return pretraining_data.create_pretraining_data(
        input_files, vocab_file, output_file, do_lower_case=do_lower_case,
        check_documents=True, **options)
  learned_path = os.path.join(os.path.dirname(output_file), VOCAB_NAME)
  if vocab_file:
    tokenization.load_vocab(vocab_file)
  elif vocab_size < 16:
    raise ValueError(f"--vocab_size must be at least 16, got {vocab_size}.")
  else:
    check_vocab_target(learned_path, output_file, input_files, overwrite)
  # Counted first: a file that is not text is refused before anything is made.
  counts = None if vocab_file else wordpiece.count_words((
      line for path in input_files
      for line in pretraining_data.read_lines(path)), do_lower_case)
  stem = pretraining_shards.stem_of(output_file)
  targets = (shards.shard_paths(stem, num_shards, pretraining_shards.SUFFIX)
             if num_shards else [output_file])
  # The vocabulary is part of the records' set: both change together.
  with output_sets.output_set(pretraining_data.meta_data_path(output_file),
                              pretraining_data.WRITER, targets,
                              "--overwrite", overwrite) as outputs:
    vocab = vocab_file or outputs.stage(learned_path)
    if not vocab_file:
      tokenization.learn_vocab(counts, vocab_size, vocab)
    if num_shards:
      records = pretraining_shards.write_in_process(
          input_files, vocab, stem, num_shards, outputs, do_lower_case,
          random_seed, instance)
      meta = pretraining_shards.set_meta(
          input_files, vocab, stem, num_shards, records,
          do_lower_case=do_lower_case, **options)
    else:
      meta = dict(pretraining_data.meta_data(
          input_files, vocab, pretraining_data.create_pretraining_data(
              input_files, vocab, output_file, do_lower_case=do_lower_case,
              output_set=outputs, check_documents=True, **options),
          do_lower_case=do_lower_case, **options),
                  records=record_facts.listing(outputs.staged))
    if not vocab_file:
      meta.update(vocab_file=writes.absolute(learned_path))
    outputs.commit(meta)
  return meta["num_examples"]


def check_vocab_target(vocab_file: str, output_file: str, input_files,
                       overwrite: bool) -> None:
  """Refuses to learn a vocabulary over an input file, or (unless
  `overwrite`) over a `vocab.txt` that the meta data of `output_file`'s
  records does not list (`core.ownership.foreign`, every writer's rule)."""
  if writes.absolute(vocab_file) in pretraining_data.input_names(input_files):
    raise ValueError(
        f"The learned vocabulary would overwrite input file {vocab_file!r}.")
  meta_path = pretraining_data.meta_data_path(output_file)
  if overwrite or not ownership.foreign([vocab_file], meta_path,
                                        utils.GFILE_OPS):
    return
  raise ValueError(
      f"{vocab_file} exists and was not written by this command for "
      f"{output_file} ({meta_path} does not list it): a vocabulary learned "
      f"from the input would replace it. Pass --vocab_file={vocab_file} to "
      "tokenize with it, or --overwrite to replace it with a learned one.")


main = utils.flags_main(run)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
