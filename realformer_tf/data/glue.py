r"""GLUE TSV (or local TFDS) -> `SentencePredictionDataLoader` records.

  python -m realformer_tf.data.glue --task=mrpc --glue_dir=$DATA/glue \
    --vocab_file=vocab.txt --output_dir=/tmp/glue --max_seq_length=128

Writes `<task>_{train,dev}.tf_record` and `<task>_meta_data.json` as one
output set. Model Garden's GLUE processors read only through `tfds.load`.
"""

import json
import os
from typing import Dict, List, Optional

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from official.nlp.data import classifier_data_lib
from realformer_tf import cli
from realformer_tf.data import glue_tasks
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf import utils
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

# Run again to rewrite a set (`output_sets` names it in its errors).
WRITER = "realformer_tf.data.glue"


def read_tfds(spec: glue_tasks.GlueTaskSpec,
              tfds_data_dir: str) -> Dict[str, List[glue_tasks.GlueExample]]:
  """Reads a task from a locally prepared TFDS `glue/<task>` (no download)."""
  name, names = f"glue/{spec.name}", spec.tfds_label_names
  splits = {}
  for split, _ in spec.split_files:
    tfds_split = split.replace("dev", "validation")  # TFDS's dev split names.
    try:
      dataset, info = tfds.load(
          name, split=tfds_split, data_dir=tfds_data_dir, download=False,
          with_info=True, shuffle_files=False)
    except AssertionError as e:
      raise ValueError(
          f"TFDS dataset {name} is not prepared under {tfds_data_dir!r} "
          f"({e}). Prepare it once where there is network access (tfds "
          f"build {name} --data_dir=...) or use --glue_dir with the GLUE TSV "
          "files.") from e
    if names and tuple(info.features["label"].names) != names:
      raise ValueError(
          f"TFDS {name} under {tfds_data_dir!r} has labels "
          f"{info.features['label'].names}, expected {list(names)}.")
    examples = []
    for i, row in enumerate(tfds.as_numpy(dataset)):
      where = f"tfds:{name}:{tfds_split}:{i}"
      if spec.is_regression:
        label = glue_tasks.parse_label(spec, repr(float(row["label"])),
                                       where)
      else:
        label = int(row["label"])
        if not 0 <= label < len(names):
          raise ValueError(f"{where}: label id {label} is not a "
                           f"{spec.name} class (test split?).")
        if names[label] in spec.labels:
          label = spec.labels.index(names[label])
      text_a, text_b = (row[f].decode("utf-8") if f else None
                        for f in spec.tfds_text or (spec.text_a, spec.text_b))
      examples.append(glue_tasks.GlueExample(text_a, text_b, label, where))
    if not examples:
      raise ValueError(f"TFDS {name} split {tfds_split} under "
                       f"{tfds_data_dir!r} is empty.")
    splits[split] = examples
  return splits


def record_path(output_dir: str, task: str, split: str) -> str:
  return os.path.join(output_dir, f"{task}_{split}.tf_record")


def meta_data_path(output_dir: str, task: str) -> str:
  return os.path.join(output_dir, f"{task}_meta_data.json")


def convert(task: str,
            vocab_file: str,
            output_dir: str,
            max_seq_length: int = 128,
            glue_dir: Optional[str] = None,
            tfds_data_dir: Optional[str] = None,
            lower_case: bool = True) -> Dict:
  """Converts one GLUE task (from exactly one of `glue_dir` and
  `tfds_data_dir`) to TFRecords plus a meta-data JSON, all input checked
  before anything is written, as one set; returns the meta data written.
  """
  spec = glue_tasks.get_task(task)
  if bool(glue_dir) == bool(tfds_data_dir):
    raise ValueError("Give exactly one of --glue_dir (GLUE TSV files) and "
                     "--tfds_data_dir (prepared TensorFlow Datasets).")
  if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int):
    raise ValueError(f"max_seq_length must be an int, got {max_seq_length!r}.")
  min_length = 3 if spec.text_b is not None else 2
  if max_seq_length < min_length + 1:
    raise ValueError(
        f"max_seq_length={max_seq_length} leaves no room for text in a "
        f"{spec.name} example ({min_length} special tokens).")
  if not output_dir:
    raise ValueError("No --output_dir given.")
  vocab = tokenization.load_vocab(vocab_file)
  if glue_dir:
    splits = glue_tasks.read_splits(spec, glue_dir, tf.io.gfile.exists,
                                    tf.io.gfile.GFile)
  else:
    splits = read_tfds(spec, tfds_data_dir)
  tokenizer = wordpiece.WordPieceTokenizer(vocab, lower_case=lower_case)
  split_meta = {}
  with output_sets.output_set(
      meta_data_path(output_dir, spec.name), WRITER,
      [record_path(output_dir, spec.name, split) for split in splits]
  ) as outputs:
    for split, examples in splits.items():
      arrays = glue_tasks.pack(examples, tokenizer, max_seq_length)
      truncated = arrays["num_truncated"]
      packed = [arrays[k].astype(np.int64)
                for k in ("token_ids", "padding_mask", "segment_ids")]
      path = record_path(output_dir, spec.name, split)
      classifier_data_lib.file_based_convert_examples_to_features(
          examples, None, max_seq_length, None, outputs.stage(path),
          label_type=float if spec.is_regression else None,
          # Example i's row of the packed arrays.
          featurize_fn=lambda i, example, *_: classifier_data_lib.InputFeatures(
              *(array[i] for array in packed), example.label))
      split_meta[split] = dict(file=os.path.basename(path),
                               num_examples=len(examples),
                               num_truncated=truncated)
      logging.info("Converted %d %s %s examples (%d truncated) for %s",
                   len(examples), spec.name, split, truncated, path)
    meta = outputs.commit({
        "task": spec.name,
        "source": (os.path.abspath(glue_dir) if glue_dir else
                   f"tfds:glue/{spec.name}@{os.path.abspath(tfds_data_dir)}"),
        "label_type": "float" if spec.is_regression else "int",
        "label_list": list(spec.labels) if spec.labels else None,
        "num_labels": spec.num_classes,
        "max_seq_length": max_seq_length,
        **tokenization.vocab_meta(vocab_file),
        "lower_case": lower_case,
        "train_data_size": split_meta["train"]["num_examples"],
        "eval_data_size": {s: split_meta[s]["num_examples"]
                           for s, _ in spec.dev_splits},
        "splits": split_meta,
        "records": record_facts.listing(outputs.staged),
    })
  logging.info("Wrote the %s set %s.", spec.name,
               meta_data_path(output_dir, spec.name))
  return meta


def read_meta_data(path: str) -> Dict:
  """Reads a `<task>_meta_data.json` written by `convert`."""
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path}: meta data not found; write it with "
                     "`python -m realformer_tf.data.glue`.")
  with tf.io.gfile.GFile(path, "r") as f:
    try:
      meta = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}).") from e
  size = meta.get("train_data_size") if isinstance(meta, dict) else None
  if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
    raise ValueError(f"{path}: no positive integer 'train_data_size'.")
  return meta


main = utils.flags_main(convert, lambda meta: {
    split: m["num_examples"] for split, m in meta["splits"].items()})


if __name__ == "__main__":
  flags.DEFINE_enum("task", None, list(glue_tasks.GLUE_TASKS),
                    "GLUE task to convert.")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary file.")
  flags.DEFINE_string("output_dir", None, "Where to write the TFRecords.")
  flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
  flags.DEFINE_string("glue_dir", None,
                      "GLUE TSV root (one directory per task, e.g. MRPC/).")
  flags.DEFINE_string("tfds_data_dir", None,
                      "TFDS data_dir holding a prepared glue/<task> "
                      "(instead of --glue_dir; nothing is downloaded).")
  flags.DEFINE_bool("lower_case", True, "Lower-case (uncased vocabulary).")
  flags.mark_flags_as_required(["task", "vocab_file", "output_dir"])
  cli.run(main)
