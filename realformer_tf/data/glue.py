r"""GLUE TSV (or local TFDS) -> `SentencePredictionDataLoader` records.

  python -m realformer_tf.data.glue --task=mrpc --glue_dir=$DATA/glue \
    --vocab_file=vocab.txt --output_dir=/tmp/glue --max_seq_length=128

Writes `<task>_{train,dev}.tf_record` and `<task>_meta_data.json` as one
output set. Model Garden's GLUE processors read only through `tfds.load`.
"""

import csv
import dataclasses
import json
import math
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from official.nlp.data import classifier_data_lib
from realformer_tf import cli
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf import utils
from realformer_tf.data import tokenization

Column = Union[int, str]

_TOKENIZE_BATCH_SIZE = 2048
# Run again to rewrite a set (`output_sets` names it in its errors).
WRITER = "realformer_tf.data.glue"


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
  """How one GLUE task is stored, labelled and scored.

  Attributes:
    name: Lower-case task name (`--task`).
    dir_name: Directory of the task in the GLUE layout.
    text_a: Column of the first sentence (a header name; an index in the
      headerless CoLA files).
    text_b: Column of the second sentence, None for single-sentence tasks.
    label: Column of the label.
    labels: The label strings in class-id order; None for regression (STS-B).
    metrics: The metrics the paper reports for the task (per validation
      file when there are several: MNLI reports `accuracy_matched` and
      `accuracy_mismatched`).
    main_metric: The reported metric key that picks the best grid point in a
      sweep; the first metric when None.
    dev_splits: Output split name -> TSV file name, for the dev sets.
    tfds_text: TFDS features of the two sentences; the TSV columns when None.
    tfds_label_names: TFDS's `ClassLabel` names, in TFDS id order. A name
      that is one of `labels` is that label (MNLI's TFDS order differs from
      ours); otherwise TFDS id i is `labels[i]`.
  """
  name: str
  dir_name: str
  text_a: Column
  text_b: Optional[Column]
  label: Column
  labels: Optional[Tuple[str, ...]]
  metrics: Tuple[str, ...]
  main_metric: Optional[str] = None
  dev_splits: Tuple[Tuple[str, str], ...] = (("dev", "dev.tsv"),)
  tfds_text: Optional[Tuple[str, Optional[str]]] = None
  tfds_label_names: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    if self.main_metric is None:
      object.__setattr__(self, "main_metric", self.metrics[0])

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  @property
  def num_classes(self) -> int:
    return 1 if self.is_regression else len(self.labels)

  @property
  def split_files(self) -> Tuple[Tuple[str, str], ...]:
    """(split, TSV file name) for every converted split, train first."""
    return (("train", "train.tsv"),) + self.dev_splits


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")

GLUE_TASKS: Dict[str, GlueTaskSpec] = {spec.name: spec for spec in (
    GlueTaskSpec("cola", "CoLA", 3, None, 1, _BINARY, ("matthews_corrcoef",),
                 tfds_text=("sentence", None),
                 tfds_label_names=("unacceptable", "acceptable")),
    GlueTaskSpec("sst2", "SST-2", "sentence", None, "label", _BINARY,
                 ("accuracy",), tfds_label_names=("negative", "positive")),
    GlueTaskSpec("mrpc", "MRPC", "#1 String", "#2 String", "Quality", _BINARY,
                 ("f1", "accuracy"), tfds_text=("sentence1", "sentence2"),
                 tfds_label_names=("not_equivalent", "equivalent")),
    GlueTaskSpec("stsb", "STS-B", "sentence1", "sentence2", "score", None,
                 ("pearson", "spearman")),
    GlueTaskSpec("qqp", "QQP", "question1", "question2", "is_duplicate",
                 _BINARY, ("f1", "accuracy"),
                 tfds_label_names=("not_duplicate", "duplicate")),
    GlueTaskSpec("mnli", "MNLI", "sentence1", "sentence2", "gold_label",
                 ("contradiction", "entailment", "neutral"), ("accuracy",),
                 main_metric="accuracy_matched",
                 dev_splits=(("dev_matched", "dev_matched.tsv"),
                             ("dev_mismatched", "dev_mismatched.tsv")),
                 tfds_text=("premise", "hypothesis"),
                 tfds_label_names=("entailment", "neutral", "contradiction")),
    GlueTaskSpec("qnli", "QNLI", "question", "sentence", "label", _NLI2,
                 ("accuracy",), tfds_label_names=_NLI2),
    GlueTaskSpec("rte", "RTE", "sentence1", "sentence2", "label", _NLI2,
                 ("accuracy",), tfds_label_names=_NLI2),
)}

def get_task(name: str) -> GlueTaskSpec:
  """The spec of a GLUE task by (case-insensitive) name; WNLI is excluded."""
  key = (name or "").strip().lower().replace("-", "")
  if key not in GLUE_TASKS:
    raise ValueError(
        f"Unknown GLUE task {name!r}; expected one of "
        f"{', '.join(GLUE_TASKS)} (WNLI is excluded, as in the paper).")
  return GLUE_TASKS[key]


@dataclasses.dataclass
class GlueExample:
  """One labelled row; `source` is 'file:line' (or 'tfds:split:index')."""
  text_a: str
  text_b: Optional[str]
  label: Union[int, float]
  source: str


def _parse_label(spec: GlueTaskSpec, value: str, where: str):
  if spec.is_regression:
    try:
      score = float(value)
    except ValueError:
      score = math.nan  # Fails the range check, as inf does.
    if not 0 <= score <= 5:
      raise ValueError(
          f"{where}: {spec.name} label {value!r} is not a number in [0, 5].")
    return score
  if value not in spec.labels:
    raise ValueError(
        f"{where}: label {value!r} is not one of the {spec.name} labels "
        f"{list(spec.labels)}.")
  return spec.labels.index(value)


def _tsv_rows(path: str) -> Iterator[Tuple[int, List[str]]]:
  """(line number, fields) of each line of a UTF-8 TSV file (a BOM skipped):
  GLUE's own split, `csv.reader` with tabs and `QUOTE_NONE`."""
  with tf.io.gfile.GFile(path, "rb") as f:
    raw = f.read()
  try:
    lines = raw.decode("utf-8-sig").split("\n")
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: not UTF-8 text ({e}).") from e
  reader = csv.reader((line.rstrip("\r") for line in lines), delimiter="\t",
                      quoting=csv.QUOTE_NONE)
  try:
    for fields in reader:
      yield reader.line_num, fields
  except csv.Error as e:  # A carriage return inside a row; a huge field.
    raise ValueError(f"{path}:{reader.line_num}: not a tab-separated row "
                     f"({e}).") from e


def read_tsv_examples(spec: GlueTaskSpec, path: str) -> List[GlueExample]:
  """The examples of one GLUE TSV file of `spec`'s task, in file order
  (`_tsv_rows`; blank lines are ignored).

  Raises:
    ValueError: naming `path` and the line, if the file is missing, is not
      UTF-8, lacks a header column, a row lacks a column or has more than
      the format (a tab inside a sentence), a sentence is empty, or a label
      is outside the task's label set.
  """
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{path}: file not found (expected the GLUE "
                     f"{spec.dir_name} layout).")
  rows = _tsv_rows(path)
  has_header = isinstance(spec.label, str)
  text_columns = [c for c in (spec.text_a, spec.text_b) if c is not None]
  index = {c: c for c in text_columns + [spec.label]}
  if has_header:
    header = next(rows)[1]
    missing = [c for c in index if c not in header]
    if missing:
      raise ValueError(
          f"{path}:1: the header lacks column(s) {missing} of the "
          f"{spec.name} format (header: {header}).")
    index = {name: header.index(name) for name in index}
  # Rows have exactly the header's columns: a tab inside a sentence would
  # shift the columns and silently pair a fragment with the label.
  # Headerless files (CoLA) end with their last text column.
  width = len(header) if has_header else max(index.values()) + 1
  examples = []
  for line_number, fields in rows:
    if not "".join(fields).strip():
      continue
    where = f"{path}:{line_number}"
    if len(fields) < width:
      raise ValueError(
          f"{where}: {len(fields)} column(s), but the {spec.name} format "
          f"needs {width} (missing column).")
    if len(fields) > width:
      raise ValueError(
          f"{where}: {len(fields)} columns, but the {spec.name} format has "
          f"{width}: a tab inside a sentence? (it would shift the columns).")
    texts = [fields[index[c]] for c in text_columns]
    for column, sentence in zip(text_columns, texts):
      if not sentence.strip():
        raise ValueError(f"{where}: empty sentence in column {column!r}.")
    label = _parse_label(spec, fields[index[spec.label]].strip(), where)
    examples.append(GlueExample(texts[0], (texts + [None])[1], label, where))
  if not examples:
    raise ValueError(f"{path}: no examples.")
  return examples


def read_tfds(spec: GlueTaskSpec,
              tfds_data_dir: str) -> Dict[str, List[GlueExample]]:
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
        label = _parse_label(spec, repr(float(row["label"])), where)
      else:
        label = int(row["label"])
        if not 0 <= label < len(names):
          raise ValueError(f"{where}: label id {label} is not a "
                           f"{spec.name} class (test split?).")
        if names[label] in spec.labels:
          label = spec.labels.index(names[label])
      text_a, text_b = (row[f].decode("utf-8") if f else None
                        for f in spec.tfds_text or (spec.text_a, spec.text_b))
      examples.append(GlueExample(text_a, text_b, label, where))
    if not examples:
      raise ValueError(f"TFDS {name} split {tfds_split} under "
                       f"{tfds_data_dir!r} is empty.")
    splits[split] = examples
  return splits


def encode_examples(examples: Sequence[GlueExample], tokenizer, cls_id: int,
                    sep_id: int, max_seq_length: int
                    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
  """Tokenizes examples and packs them with `tokenization.pack_inputs`.

  Returns:
    (input_ids, input_mask, segment_ids) int64 arrays of shape
    [num_examples, max_seq_length] and the number of truncated examples.
  """
  columns = [[e.text_a for e in examples]]
  if examples[0].text_b is not None:
    columns.append([e.text_b for e in examples])
  packed, truncated = [], 0
  for start in range(0, len(examples), _TOKENIZE_BATCH_SIZE):
    segments = [tokenizer.tokenize(tf.constant(
        texts[start:start + _TOKENIZE_BATCH_SIZE])).merge_dims(-2, -1)
                for texts in columns]
    lengths = tf.add_n([s.row_lengths() for s in segments]) + len(columns) + 1
    truncated += int(tf.math.count_nonzero(lengths > max_seq_length))
    packed.append(tokenization.pack_inputs(segments, max_seq_length, cls_id,
                                           sep_id))
  return tuple(np.concatenate([p[k] for p in packed]).astype(np.int64)
               for k in ("input_word_ids", "input_mask", "input_type_ids")
               ) + (truncated,)


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
  """Converts one GLUE task to TFRecords plus a meta-data JSON.

  Exactly one of `glue_dir` and `tfds_data_dir` is given. All input is read
  and checked before anything is written; the outputs replace the previous
  ones as one set (see the module docstring).

  Returns:
    The meta data written to `<output_dir>/<task>_meta_data.json`.
  """
  spec = get_task(task)
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
  cls_id, sep_id = map(vocab.index, (tokenization.CLS, tokenization.SEP))
  if glue_dir:
    task_dir = os.path.join(glue_dir, spec.dir_name)
    splits = {split: read_tsv_examples(spec, os.path.join(task_dir, name))
              for split, name in spec.split_files}
  else:
    splits = read_tfds(spec, tfds_data_dir)
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=lower_case)
  split_meta = {}
  with output_sets.output_set(
      meta_data_path(output_dir, spec.name), WRITER,
      [record_path(output_dir, spec.name, split) for split in splits]
  ) as outputs:
    for split, examples in splits.items():
      *packed, truncated = encode_examples(examples, tokenizer, cls_id,
                                           sep_id, max_seq_length)
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
  flags.DEFINE_enum("task", None, list(GLUE_TASKS), "GLUE task to convert.")
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
