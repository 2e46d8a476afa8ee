"""The GLUE tasks, their TSV files, the paper's metrics and BERT's packing.

One definition, without TensorFlow or Keras: the TFRecord converter
(`data.glue`), the tf_keras fine-tuning task and the Keras 3 face's JAX
fine-tuning all read the tasks, the rows and the scores from here.
"""

import csv
import dataclasses
import math
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
from scipy import stats

from realformer_tf.data import wordpiece

Column = Union[int, str]


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


def parse_label(spec: GlueTaskSpec, value: str, where: str):
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


def _tsv_rows(path: str, open_file) -> Iterator[Tuple[int, List[str]]]:
  """(line number, fields) of each line of a UTF-8 TSV file (a BOM skipped):
  GLUE's own split, `csv.reader` with tabs and `QUOTE_NONE`."""
  with open_file(path, "rb") as f:
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


def read_tsv_examples(spec: GlueTaskSpec, path: str, exists=os.path.exists,
                      open_file=open) -> List[GlueExample]:
  """The examples of one GLUE TSV file of `spec`'s task, in file order
  (`_tsv_rows`; blank lines are ignored); `exists`, `open_file`: the file
  system's (`tf.io.gfile`'s for `gs://`).

  Raises:
    ValueError: naming `path` and the line, if the file is missing, is not
      UTF-8, lacks a header column, a row lacks a column or has more than
      the format (a tab inside a sentence), a sentence is empty, or a label
      is outside the task's label set.
  """
  if not exists(path):
    raise ValueError(f"{path}: file not found (expected the GLUE "
                     f"{spec.dir_name} layout).")
  rows = _tsv_rows(path, open_file)
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
  # Exactly the header's columns (a tab in a sentence would shift them);
  # headerless files (CoLA) end with their last text column.
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
    label = parse_label(spec, fields[index[spec.label]].strip(), where)
    examples.append(GlueExample(texts[0], (texts + [None])[1], label, where))
  if not examples:
    raise ValueError(f"{path}: no examples.")
  return examples


def read_splits(spec: GlueTaskSpec, glue_dir: str, exists=os.path.exists,
                open_file=open) -> Dict[str, List[GlueExample]]:
  """{split: examples} of every file of `spec.split_files` under `glue_dir`
  (`read_tsv_examples`)."""
  task_dir = os.path.join(glue_dir, spec.dir_name)
  return {split: read_tsv_examples(spec, os.path.join(task_dir, name), exists,
                                   open_file)
          for split, name in spec.split_files}


def truncated_lengths(len_a: int, len_b: int, room: int) -> Tuple[int, int]:
  """The pair lengths BERT's `truncate_seq_pair` keeps in `room` tokens: the
  longer side loses its last token (b on ties) until both fit."""
  kept_a = min(len_a, max((room + 1) // 2, room - len_b))
  return kept_a, min(len_b, room - kept_a)


def pack(examples: Sequence[GlueExample],
         tokenizer: wordpiece.WordPieceTokenizer,
         max_seq_length: int) -> Dict[str, np.ndarray]:
  """Tokenizes and packs examples as BERT inputs, as `tokenization.pack_inputs`
  does with tensorflow-text: `[CLS] a [SEP] b [SEP]`, type ids 0 then 1,
  padded with id 0, a pair cut by `truncated_lengths`.

  Returns:
    {token_ids, segment_ids, padding_mask: int32 / bool `[n, max_seq_length]`,
    labels: int32 (float32 for regression) `[n]`, num_truncated: int}.
  """
  specials = 2 + (examples[0].text_b is not None) if examples else 2
  if max_seq_length < specials + 1:
    raise ValueError(f"max_seq_length={max_seq_length} leaves no room for "
                     f"text ({specials} special tokens).")
  cls_id, sep_id = tokenizer.ids[wordpiece.CLS], tokenizer.ids[wordpiece.SEP]
  room = max_seq_length - specials
  token_ids = np.zeros((len(examples), max_seq_length), np.int32)
  segment_ids = np.zeros_like(token_ids)
  padding_mask = np.zeros(token_ids.shape, bool)
  truncated = 0
  for i, example in enumerate(examples):
    a = tokenizer(example.text_a)
    b = tokenizer(example.text_b) if example.text_b is not None else []
    kept = (truncated_lengths(len(a), len(b), room) if specials == 3 else
            (min(len(a), room), 0))
    truncated += kept != (len(a), len(b))
    ids = [cls_id] + a[:kept[0]] + [sep_id]
    types = [0] * len(ids)
    if specials == 3:
      ids += b[:kept[1]] + [sep_id]
      types += [1] * (kept[1] + 1)
    token_ids[i, :len(ids)], segment_ids[i, :len(ids)] = ids, types
    padding_mask[i, :len(ids)] = True
  labels = np.array([e.label for e in examples])
  return dict(token_ids=token_ids, segment_ids=segment_ids,
              padding_mask=padding_mask, num_truncated=truncated,
              labels=labels.astype(np.float32 if labels.dtype.kind == "f"
                                   else np.int32))



def _flat(labels, predictions) -> Tuple[np.ndarray, np.ndarray]:
  return np.asarray(labels).reshape(-1), np.asarray(predictions).reshape(-1)


def accuracy(labels, predictions) -> float:
  labels, predictions = _flat(labels, predictions)
  return float(np.mean(labels == predictions))


def f1(labels, predictions) -> float:
  """Binary F1 of class 1; 0 when class 1 is never predicted nor true."""
  labels, predictions = _flat(labels, predictions)
  true_positives = np.sum((labels == 1) & (predictions == 1))
  errors = np.sum(labels != predictions)
  return float(2 * true_positives / max(2 * true_positives + errors, 1))


def matthews_corrcoef(labels, predictions) -> float:
  """Matthews' correlation, multi-class (Gorodkin's); 0 when undefined (a
  constant side)."""
  labels, predictions = _flat(labels, predictions)
  classes, ids = np.unique(np.concatenate([labels, predictions]),
                           return_inverse=True)
  confusion = np.zeros((len(classes),) * 2, np.float64)
  np.add.at(confusion, (ids[:len(labels)], ids[len(labels):]), 1)
  true_sums, predicted_sums = confusion.sum(1), confusion.sum(0)
  n = confusion.sum()
  covariance = np.trace(confusion) * n - true_sums @ predicted_sums
  variances = (n * n - true_sums @ true_sums) * (
      n * n - predicted_sums @ predicted_sums)
  return float(covariance / np.sqrt(variances)) if variances else 0.0


def pearson(labels, predictions) -> float:
  """NaN when either side is constant."""
  return float(stats.pearsonr(*_flat(labels, predictions))[0])


def spearman(labels, predictions) -> float:
  """NaN when either side is constant."""
  return float(stats.spearmanr(*_flat(labels, predictions))[0])


METRIC_FNS = dict(accuracy=accuracy, f1=f1, pearson=pearson, spearman=spearman,
                  matthews_corrcoef=matthews_corrcoef)


def glue_metrics(task: str, outputs, labels) -> Dict[str, float]:
  """The paper's metrics (fractions) of GLUE `task` for `labels` (`[n]`) from
  `outputs`: logits `[n, num_classes]` or STS-B scores `[n]` / `[n, 1]`."""
  spec = get_task(task)
  outputs = np.asarray(outputs)
  if not spec.is_regression and (outputs.ndim != 2 or
                                 outputs.shape[1] != spec.num_classes):
    raise ValueError(
        f"{task} outputs must be [n, {spec.num_classes}] logits, got shape "
        f"{outputs.shape}.")
  predictions = (outputs.reshape(-1) if spec.is_regression
                 else np.argmax(outputs, axis=1))
  return {name: METRIC_FNS[name](labels, predictions) for name in spec.metrics}


MAJORITY_PREFIX = "majority_class_"


def majority_class_metrics(task: str, labels) -> Dict[str, float]:
  """The metrics of predicting the most frequent label for every example.

  What a model that learned nothing scores (e.g. MRPC dev: accuracy 0.684,
  F1 0.812, all positive); keys are `MAJORITY_PREFIX + metric`. Empty for
  regression (STS-B: a constant has no correlation).
  """
  spec = get_task(task)
  labels = np.asarray(labels).reshape(-1)
  if spec.is_regression or not len(labels):
    return {}
  values, counts = np.unique(labels, return_counts=True)
  constant = np.full_like(labels, values[np.argmax(counts)])
  return {MAJORITY_PREFIX + name: METRIC_FNS[name](labels, constant)
          for name in spec.metrics}
