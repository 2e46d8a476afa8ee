"""The GLUE tasks without TensorFlow (realformer_tf.data.glue_tasks): the
paper's metrics equal scikit-learn's and SciPy's, and the pure-Python
packing equals tensorflow-text's `BertTokenizer` and `tokenization.pack_inputs`
on real GLUE text."""
import os
import random

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk
import tensorflow as tf

from realformer_tf.data import glue_tasks
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from tests.helpers import numpy_reference
from tests.helpers import shared_data

# Fixed binary labels / predictions: tp=3, fp=2, fn=1, tn=4.
LABELS = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
PREDS = np.array([1, 1, 1, 0, 1, 1, 0, 0, 0, 0])


def test_binary_metrics_against_sklearn_and_by_hand():
  assert glue_tasks.accuracy(LABELS, PREDS) == pytest.approx(0.7)
  # 2tp / (2tp + fp + fn)
  assert glue_tasks.f1(LABELS, PREDS) == pytest.approx(6 / 9)
  mcc = (3 * 4 - 2 * 1) / np.sqrt(5 * 4 * 6 * 5)
  assert glue_tasks.matthews_corrcoef(LABELS, PREDS) == pytest.approx(mcc)
  assert glue_tasks.f1(LABELS, PREDS) == pytest.approx(
      sk.f1_score(LABELS, PREDS))
  assert glue_tasks.matthews_corrcoef(LABELS, PREDS) == pytest.approx(
      sk.matthews_corrcoef(LABELS, PREDS))
  assert glue_tasks.accuracy(LABELS, PREDS) == sk.accuracy_score(LABELS, PREDS)


def test_metrics_on_random_inputs_against_sklearn_and_scipy():
  rng = np.random.default_rng(0)
  for _ in range(20):
    labels = rng.integers(0, 2, 50)
    preds = rng.integers(0, 2, 50)
    assert glue_tasks.f1(labels, preds) == pytest.approx(
        sk.f1_score(labels, preds))
    assert glue_tasks.matthews_corrcoef(labels, preds) == pytest.approx(
        sk.matthews_corrcoef(labels, preds))
    three_l, three_p = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
    assert glue_tasks.matthews_corrcoef(three_l, three_p) == pytest.approx(
        sk.matthews_corrcoef(three_l, three_p))
    # STS-B-like scores with ties (rounded to 0.25) for Spearman's ranks.
    gold = np.round(rng.uniform(0, 5, 40) * 4) / 4
    pred = gold + rng.normal(0, 1, 40)
    pred[:5] = pred[5]
    assert glue_tasks.pearson(gold, pred) == pytest.approx(
        stats.pearsonr(gold, pred)[0])
    assert glue_tasks.spearman(gold, pred) == pytest.approx(
        stats.spearmanr(gold, pred)[0])


def test_degenerate_inputs():
  assert glue_tasks.f1([0, 0], [0, 0]) == 0.0
  assert glue_tasks.matthews_corrcoef([1, 1, 0], [1, 1, 1]) == 0.0
  assert sk.matthews_corrcoef([1, 1, 0], [1, 1, 1]) == 0.0
  assert np.isnan(glue_tasks.pearson([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))


def test_glue_metrics_per_task():
  logits = np.stack([1 - PREDS, PREDS], axis=1).astype(np.float32)
  assert glue_tasks.glue_metrics("mrpc", logits, LABELS) == pytest.approx(
      {"f1": 6 / 9, "accuracy": 0.7})
  assert glue_tasks.glue_metrics("qqp", logits, LABELS) == pytest.approx(
      {"f1": 6 / 9, "accuracy": 0.7})
  assert set(glue_tasks.glue_metrics("cola", logits, LABELS)) == {
      "matthews_corrcoef"}
  assert glue_tasks.glue_metrics("sst2", logits, LABELS) == {"accuracy": 0.7}
  scores = np.array([[0.5], [1.0], [3.0], [2.0]])
  gold = np.array([0.0, 1.0, 4.0, 5.0])
  result = glue_tasks.glue_metrics("stsb", scores, gold)
  assert result == pytest.approx({
      "pearson": stats.pearsonr(scores[:, 0], gold)[0],
      "spearman": 0.8})
  with pytest.raises(ValueError, match=r"mnli outputs must be \[n, 3\]"):
    glue_tasks.glue_metrics("mnli", logits, LABELS)



def test_majority_class_metrics():
  # MRPC dev: 279 of 408 positive; all-positive scores 0.684 / F1 0.812.
  labels = np.array([1] * 279 + [0] * 129)
  assert glue_tasks.majority_class_metrics("mrpc", labels) == pytest.approx({
      "majority_class_accuracy": 279 / 408,
      "majority_class_f1": 2 * 279 / (2 * 279 + 129)})
  assert glue_tasks.majority_class_metrics("cola", labels) == {
      "majority_class_matthews_corrcoef": 0.0}
  assert not glue_tasks.majority_class_metrics("stsb", [0.5, 1.0])


def test_matthews_on_labels_absent_from_one_side():
  labels, preds = [0, 1, 2, 2, 1, 3], [0, 2, 2, 1, 1, 1]
  assert glue_tasks.matthews_corrcoef(labels, preds) == pytest.approx(
      sk.matthews_corrcoef(labels, preds))
  assert glue_tasks.f1([0, 1, 1, 0], [0, 0, 0, 0]) == sk.f1_score(
      [0, 1, 1, 0], [0, 0, 0, 0], zero_division=0.0)


def test_truncated_lengths_are_berts_loop():
  rng = random.Random(0)
  cases = [(rng.randrange(0, 60), rng.randrange(0, 60), rng.randrange(1, 70))
           for _ in range(3000)]
  cases += [(10, 10, 9), (10, 10, 10), (3, 20, 9), (20, 3, 9), (5, 5, 11)]
  for case in cases:
    assert glue_tasks.truncated_lengths(*case) == (
        numpy_reference.truncated_lengths(*case)), case


_REAL_TASKS = (("mrpc", "dev.tsv"), ("cola", "dev.tsv"), ("stsb", "dev.tsv"),
               ("sst2", "dev.tsv"), ("qnli", "dev.tsv"))


def _texts(task, file_name, rows=150):
  """The first `rows` examples of a shared GLUE file (the MRPC fixture when
  the shared data is absent)."""
  spec = glue_tasks.get_task(task)
  path = os.path.join(shared_data.DATA_DIR, "glue", spec.dir_name, file_name)
  if not os.path.exists(path):
    if task != "mrpc":
      pytest.skip(f"{path} not found (REALFORMER_DATA_DIR)")
    path = os.path.join(shared_data.FIXTURE_DIR, "glue", "MRPC", file_name)
  return glue_tasks.read_tsv_examples(spec, path)[:rows]


@pytest.mark.parametrize("task,file_name", _REAL_TASKS)
def test_pack_equals_tensorflow_texts_on_glue_text(task, file_name):
  examples = _texts(task, file_name)
  vocab_file = shared_data.vocab_file()
  vocab = tokenization.load_vocab(vocab_file)
  tokenizer = tokenization.make_tokenizer(vocab_file)
  segments = [tokenizer.tokenize(tf.constant(texts)).merge_dims(-2, -1)
              for texts in ([e.text_a for e in examples],
                            [e.text_b for e in examples]) if texts[0]]
  lengths = sum(s.row_lengths().numpy() for s in segments) + len(segments) + 1
  for seq_length in (24, 128):  # 24 cuts most pairs, 128 few.
    reference = tokenization.pack_inputs(
        segments, seq_length, vocab.index(wordpiece.CLS),
        vocab.index(wordpiece.SEP))
    packed = glue_tasks.pack(examples, wordpiece.WordPieceTokenizer(vocab),
                             seq_length)
    np.testing.assert_array_equal(packed["token_ids"],
                                  reference["input_word_ids"])
    np.testing.assert_array_equal(packed["segment_ids"],
                                  reference["input_type_ids"])
    np.testing.assert_array_equal(packed["padding_mask"],
                                  reference["input_mask"].numpy() == 1)
    assert packed["num_truncated"] == np.sum(lengths > seq_length)
    np.testing.assert_allclose(packed["labels"], [e.label for e in examples],
                               rtol=1e-6)
  assert packed["labels"].dtype == (np.float32 if task == "stsb" else
                                    np.int32)


def test_pack_refuses_a_length_without_room():
  examples = _texts("mrpc", "dev.tsv", rows=2)
  vocab = tokenization.load_vocab(shared_data.vocab_file())
  with pytest.raises(ValueError, match="max_seq_length=3 leaves no room"):
    glue_tasks.pack(examples, wordpiece.WordPieceTokenizer(vocab), 3)
