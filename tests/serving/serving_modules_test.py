"""SQuAD answer selection in the graph, on hand-made logits (no model)."""

import numpy as np
import tensorflow as tf

from realformer_tf.serving import serving_modules
from realformer_tf.serving import text_processing
from tests.helpers import serving as common


def test_short_context_without_a_valid_span_has_no_answer(tmp_path):
  """A context shorter than the window whose tokens are no top-k end.

  Used to fail with `indices[0] = -4 is not in [0, 1)`: the ragged max over
  no valid span gave the float64 minimum, not -inf, so "no span" read as a
  span at position 0, before the context.
  """
  packer = text_processing.BertTextPacker(
      common.write_vocab(str(tmp_path / "vocab.txt")), lower_case=True,
      max_seq_length=common.SEQ_LENGTH)
  options = serving_modules.QuestionAnsweringOptions(
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
  out = serving_modules.best_answers(options, windows, context, logits)
  assert list(out["has_answer"].numpy()) == [True, False]
  assert out["answer_text"].numpy()[0] in (b"the", b"dog", b"won")
  assert out["answer_text"].numpy()[1] == b""
  assert out["answer_start_token"].numpy()[1] == -1
  assert out["answer_start_byte"].numpy()[1] == -1
  assert out["span_score"].numpy()[1] == -np.inf
