"""One input packer: GLUE records, serving's text signatures and the analysis
CLI's --input_text give the same ids for the same text.

The expectation is built from the vocabulary and BERT's `truncate_seq_pair`
loop, not from any of the packers under test.
"""

import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.analysis import runner
from realformer_tf.data import glue
from realformer_tf.data import glue_tasks
from realformer_tf.serving import text_processing

SEQ_LENGTH = 12
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "cat",
         "sat", "on", "mat", "play", "##ing", "##s", ",", ".", "!", "a", "is",
         "un", "##aff", "##able"]
# Text -> its word pieces (lower-cased, split on punctuation, unknown words
# become [UNK]).
TEXTS = {
    "The dog sat.": "the dog sat .",
    "DOGS, playing!": "dog ##s , play ##ing !",
    "a cat is unaffable on the mat.": "a cat is un ##aff ##able on the mat .",
    "the bird sat": "the [UNK] sat",
    "Cats sat on a mat, the dogs sat on the cat.":
        "cat ##s sat on a mat , the dog ##s sat on the cat .",
}
SINGLES = list(TEXTS)
PAIRS = [(SINGLES[0], SINGLES[1]), (SINGLES[2], SINGLES[0]),
         (SINGLES[4], SINGLES[4]), (SINGLES[3], SINGLES[2]),
         (SINGLES[1], SINGLES[4])]


def _ids(text):
  return [VOCAB.index(t) for t in TEXTS[text].split()]


def _truncate_seq_pair(a, b, max_tokens):
  """BERT's `truncate_seq_pair`: pop from the longer side, ties from b."""
  a, b = list(a), list(b)
  while len(a) + len(b) > max_tokens:
    (a if len(a) > len(b) else b).pop()
  return a, b


def _expected(examples):
  """{input_word_ids, input_mask, input_type_ids} int lists per example."""
  cls, sep = VOCAB.index("[CLS]"), VOCAB.index("[SEP]")
  rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
  for example in examples:
    if isinstance(example, tuple):
      a, b = _truncate_seq_pair(_ids(example[0]), _ids(example[1]),
                                SEQ_LENGTH - 3)
      ids = [cls] + a + [sep] + b + [sep]
      types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    else:
      ids = [cls] + _ids(example)[:SEQ_LENGTH - 2] + [sep]
      types = [0] * len(ids)
    pad = [0] * (SEQ_LENGTH - len(ids))
    rows["input_word_ids"].append(ids + pad)
    rows["input_mask"].append([1] * len(ids) + pad)
    rows["input_type_ids"].append(types + pad)
  return rows


def _assert_features(features, examples):
  for name, expected in _expected(examples).items():
    assert np.asarray(features[name]).tolist() == expected, name


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(VOCAB) + "\n")
  return str(path)


def test_expectation_truncates_and_pads():
  rows = _expected([PAIRS[2], SINGLES[4]])
  # 15 + 15 pieces -> 5 + 4 (a keeps the odd token); single -> first 10.
  assert rows["input_type_ids"][0] == [0] * 7 + [1] * 5
  assert rows["input_word_ids"][1][1:11] == _ids(SINGLES[4])[:10]
  assert rows["input_mask"][0] == [1] * 12


def _read_records(path):
  spec = {k: tf.io.FixedLenFeature([SEQ_LENGTH], tf.int64)
          for k in ("input_ids", "input_mask", "segment_ids")}
  rows = [tf.io.parse_single_example(r, spec)
          for r in tf.data.TFRecordDataset(path)]
  return {name: [row[key].numpy().tolist() for row in rows]
          for name, key in (("input_word_ids", "input_ids"),
                            ("input_mask", "input_mask"),
                            ("input_type_ids", "segment_ids"))}


@pytest.mark.parametrize("task, examples", [("sst2", SINGLES),
                                            ("rte", PAIRS)])
def test_glue_records(tmp_path, vocab_file, task, examples):
  task_dir = tmp_path / "glue" / glue_tasks.get_task(task).dir_name
  task_dir.mkdir(parents=True)
  if task == "sst2":
    rows = ["sentence\tlabel"] + [f"{t}\t1" for t in examples]
  else:
    rows = ["index\tsentence1\tsentence2\tlabel"] + [
        f"{i}\t{a}\t{b}\tentailment" for i, (a, b) in enumerate(examples)]
  for name in ("train.tsv", "dev.tsv"):
    (task_dir / name).write_text("\n".join(rows) + "\n")
  out = tmp_path / "out"
  glue.convert(task, vocab_file, str(out), max_seq_length=SEQ_LENGTH,
               glue_dir=str(tmp_path / "glue"))
  _assert_features(_read_records(str(out / f"{task}_train.tf_record")),
                   examples)


@pytest.mark.parametrize("examples", [SINGLES, PAIRS])
def test_serving_text_packer(vocab_file, examples):
  packer = text_processing.BertTextPacker(vocab_file, True, SEQ_LENGTH)
  columns = (list(zip(*examples)) if isinstance(examples[0], tuple)
             else [examples])
  segments = [packer.tokenize(tf.constant(list(c))) for c in columns]
  features, _ = packer.pack(segments, ["a", "b"][:len(segments)])
  _assert_features(features, examples)


def test_analysis_input_text(tmp_path, vocab_file):
  text_file = tmp_path / "text.txt"
  text_file.write_text("\n".join(SINGLES) + "\n")
  batches = list(runner.text_dataset(str(text_file), vocab_file, SEQ_LENGTH,
                                     batch_size=2))
  features = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
  _assert_features(features, SINGLES)
