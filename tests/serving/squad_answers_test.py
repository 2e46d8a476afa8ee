"""`squad_answers.best_answers` against Model Garden's `squad_lib`.

Same handmade logits into both: the in-graph selection over the packer's
doc-stride windows, and `squad_lib.postprocess_output` over the training
pipeline's features (the windows are checked to be the same rows). The
chosen text, span score, answer/no-answer decision and v2.0 null odds must
agree. No model is built.
"""

import collections

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import squad_lib
from realformer_tf.serving import options as options_lib
from realformer_tf.serving import squad_answers
from realformer_tf.serving import text_processing
from tests.helpers import serving as common

RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])


class Squad:
  """The questions of `common.SQUAD_QAS` as both sides see them."""

  def __init__(self, root):
    vocab_file = common.write_vocab(str(root / "vocab.txt"))
    self.examples, self.features, self.tokenizer = common.squad_features(
        str(root / "dev.json"), vocab_file, v2=True)
    packer = text_processing.BertTextPacker(vocab_file, lower_case=True,
                                            max_seq_length=common.SEQ_LENGTH)
    questions, contexts = (tf.constant(list(texts))
                           for texts in zip(*common.SQUAD_QAS))
    self.context = packer.tokenize_context(contexts)
    self.windows = packer.squad_windows(
        packer.tokenize(questions), self.context["ids"], common.QUERY_LENGTH,
        common.DOC_STRIDE)
    self.shape = (len(self.features), common.SEQ_LENGTH)
    positions = np.arange(common.SEQ_LENGTH)[None, :]
    offset = self.windows["context_offset"].numpy()[:, None]
    # [windows, seq]: the positions of context tokens.
    self.in_context = (positions >= offset) & (
        positions < offset + self.windows["window_length"].numpy()[:, None])

  def compare(self, start, end, version_2_with_negative=False, n_best_size=4,
              max_answer_length=30, null_score_diff_threshold=0.0):
    """Both answers to float32 `start`, `end` logits; asserts they agree.

    Returns:
      `best_answers`' outputs (numpy) and squad_lib's predictions.
    """
    options = options_lib.QuestionAnsweringOptions(
        max_seq_length=common.SEQ_LENGTH, max_position_embeddings=32,
        vocab_size=len(common.VOCAB), type_vocab_size=2,
        max_query_length=common.QUERY_LENGTH, doc_stride=common.DOC_STRIDE,
        n_best_size=n_best_size, max_answer_length=max_answer_length,
        version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold)
    start, end = np.float32(start), np.float32(end)
    out = squad_answers.best_answers(
        options, self.windows, self.context,
        {"start_logits": tf.constant(start), "end_logits": tf.constant(end)})
    out = {k: v.numpy() for k, v in out.items()}
    # As Model Garden's QA task feeds it: float32 numpy rows per feature.
    results = [RawResult(f.unique_id, start[i], end[i])
               for i, f in enumerate(self.features)]
    predictions, nbest, null_odds = squad_lib.postprocess_output(
        self.examples, self.features, results, n_best_size,
        max_answer_length, self.tokenizer.do_lower_case,
        version_2_with_negative, null_score_diff_threshold)
    for i, example in enumerate(self.examples):
      where = f"question {i}"
      best = nbest[example.qas_id][0]
      # squad_lib's nonce "empty" (no valid span, v1.1) is our no answer.
      nonce = best["text"] == "empty" and best["start_logit"] == 0.0
      expected = "" if nonce else predictions[example.qas_id]
      assert out["answer_text"][i].decode() == expected, where
      assert out["has_answer"][i] == bool(expected), where
      spans = [e for e in nbest[example.qas_id] if e["text"] and not nonce]
      if spans:  # The best non-null span: its score.
        np.testing.assert_allclose(
            out["span_score"][i], spans[0]["start_logit"]
            + spans[0]["end_logit"], rtol=1e-6, err_msg=where)
      else:
        assert out["span_score"][i] == -np.inf, where
      if version_2_with_negative:
        np.testing.assert_allclose(out["null_score_diff"][i],
                                   null_odds[example.qas_id], rtol=1e-6,
                                   atol=1e-6, err_msg=where)
    return out, predictions


@pytest.fixture(scope="module")
def squad(tmp_path_factory):
  return Squad(tmp_path_factory.mktemp("squad_answers"))


def test_windows_are_the_training_features(squad):
  """The precondition of every comparison here: the same rows."""
  assert squad.shape[0] > len(squad.examples)  # Several windows.
  np.testing.assert_array_equal(
      squad.windows["input_word_ids"].numpy(),
      [f.input_ids for f in squad.features])
  np.testing.assert_array_equal(squad.windows["example_index"].numpy(),
                                [f.example_index for f in squad.features])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("v2", [False, True])
def test_random_logits(squad, seed, v2):
  rng = np.random.RandomState(seed)
  start, end = (rng.normal(0, 3, squad.shape) for _ in range(2))
  _, predictions = squad.compare(start, end, version_2_with_negative=v2)
  assert any(predictions.values())


@pytest.mark.parametrize("n_best_size", [1, 2, 3])
def test_ties(squad, n_best_size):
  """Logits of few distinct values: ties at the n-best cut (the lower index
  first, as squad_lib's stable sort) and between span scores (squad_lib's
  order: window, then start rank, then end rank)."""
  rng = np.random.RandomState(7)
  start, end = (rng.randint(0, 3, squad.shape).astype(np.float32)
                for _ in range(2))
  squad.compare(start, end, n_best_size=n_best_size)
  squad.compare(start, end, n_best_size=n_best_size,
                version_2_with_negative=True)


def test_tied_span_scores_follow_the_start_rank(squad):
  """Two spans of the same score: squad_lib takes the one whose start ranks
  higher (a higher start logit), even at a later position."""
  start = np.zeros(squad.shape)
  end = np.zeros(squad.shape)
  # Question 1, "The  dog sat on the mat.", has one window.
  row = [f.example_index for f in squad.features].index(1)
  offset = int(squad.windows["context_offset"].numpy()[row])
  # Spans (offset+0, offset+1) and (offset+3, offset+4) both score 4;
  # start offset+3 ranks first; (offset+0, offset+4) is too long.
  start[row, offset] = 2.0
  start[row, offset + 3] = 3.0
  end[row, offset + 1] = 2.0
  end[row, offset + 4] = 1.0
  out, _ = squad.compare(start, end, n_best_size=2, max_answer_length=2)
  assert out["answer_start_token"][1] == 3
  assert out["answer_text"][1] == b"on the"


@pytest.mark.parametrize("max_answer_length", [1, 2, 5])
def test_max_answer_length(squad, max_answer_length):
  """The best start and end lie 8 tokens apart: too long a span."""
  start = np.where(squad.in_context, 0.0, -10.0)
  end = np.where(squad.in_context, 0.0, -10.0)
  for row in range(squad.shape[0]):
    first = int(squad.windows["context_offset"].numpy()[row])
    length = int(squad.windows["window_length"].numpy()[row])
    start[row, first] = 5.0
    end[row, first + min(8, length - 1)] = 5.0
    end[row, first + min(max_answer_length, length) - 1] += 1.0
  out, _ = squad.compare(start, end, max_answer_length=max_answer_length)
  lengths = out["answer_end_token"] - out["answer_start_token"] + 1
  assert np.all(lengths[out["has_answer"]] <= max_answer_length)


def test_spans_crossing_the_context_boundary(squad):
  """The best starts lie in the question and the best ends on the final
  [SEP] or padding: only spans inside the context count."""
  start = np.where(squad.in_context, 1.0, 0.0)
  end = np.where(squad.in_context, 1.0, 0.0)
  lengths = squad.windows["input_mask"].numpy().sum(axis=1)
  for row in range(squad.shape[0]):
    offset = int(squad.windows["context_offset"].numpy()[row])
    start[row, 1:offset - 1] = 9.0  # Question tokens.
    end[row, lengths[row] - 1:] = 9.0  # [SEP] and padding.
    start[row, offset + 1] = 2.0
    end[row, offset + 2] = 2.0
  out, _ = squad.compare(start, end, n_best_size=common.SEQ_LENGTH)
  assert np.all(out["has_answer"])
  assert np.all(out["answer_end_token"] >= out["answer_start_token"])


@pytest.mark.parametrize("threshold", [-1.0, 0.0, 3.0])
def test_v2_null_odds(squad, threshold):
  """[CLS] logits above, near and below the best span's: squad_lib's null
  odds, and "" iff they exceed the threshold."""
  rng = np.random.RandomState(3)
  start, end = (rng.normal(0, 1, squad.shape) for _ in range(2))
  start[:, 0] = np.linspace(-4, 6, squad.shape[0])
  out, predictions = squad.compare(start, end, version_2_with_negative=True,
                                   null_score_diff_threshold=threshold)
  spans = np.isfinite(out["span_score"])  # Else the null score alone.
  np.testing.assert_array_equal(
      out["has_answer"], spans & (out["null_score_diff"] <= threshold))
  np.testing.assert_allclose(
      out["null_score_diff"],
      np.where(spans, out["null_score"] - out["span_score"], out["null_score"]),
      atol=1e-5)
  assert out["has_answer"].any() and not out["has_answer"].all()
  assert [bool(p) for p in predictions.values()] == list(out["has_answer"])


def test_short_context_without_a_valid_span_has_no_answer(tmp_path):
  """A context shorter than the window whose tokens are no top-k end.

  Used to fail with `indices[0] = -4 is not in [0, 1)`: the ragged max over
  no valid span gave the float64 minimum, not -inf, so "no span" read as a
  span at position 0, before the context.
  """
  packer = text_processing.BertTextPacker(
      common.write_vocab(str(tmp_path / "vocab.txt")), lower_case=True,
      max_seq_length=common.SEQ_LENGTH)
  options = options_lib.QuestionAnsweringOptions(
      max_seq_length=common.SEQ_LENGTH, max_position_embeddings=32,
      vocab_size=len(common.VOCAB), type_vocab_size=2,
      max_query_length=common.QUERY_LENGTH, doc_stride=common.DOC_STRIDE,
      n_best_size=4)
  context = packer.tokenize_context(tf.constant(["the dog won", "a"]))
  windows = packer.squad_windows(
      packer.tokenize(tf.constant(["who won?", "who?"])), context["ids"],
      options.max_query_length, options.doc_stride)
  positions = np.arange(common.SEQ_LENGTH)[None, :]
  offset = windows["context_offset"].numpy()[:, None]
  in_context = (positions >= offset) & (
      positions < offset + windows["window_length"].numpy()[:, None])
  # Context tokens: the best starts everywhere, the best ends only in
  # question 0; in question 1 the 4 best ends lie outside the context.
  has_end = (windows["example_index"].numpy() == 0)[:, None]
  logits = {
      "start_logits": tf.constant(np.where(in_context, 5.0, 0.0), tf.float32),
      "end_logits": tf.constant(
          np.where(in_context, np.where(has_end, 5.0, -5.0), 0.0),
          tf.float32)}
  out = squad_answers.best_answers(options, windows, context, logits)
  assert list(out["has_answer"].numpy()) == [True, False]
  assert out["answer_text"].numpy()[0] in (b"the", b"dog", b"won")
  assert out["answer_text"].numpy()[1] == b""
  assert out["answer_start_token"].numpy()[1] == -1
  assert out["answer_start_byte"].numpy()[1] == -1
  assert out["span_score"].numpy()[1] == -np.inf
