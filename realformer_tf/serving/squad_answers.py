"""`squad_lib.postprocess_output`'s answer choice as graph ops, for `serve_text`
(squad_lib is Python over numpy). Where it predicts its nonce "empty", this
answers "" with `has_answer` False.
"""

from typing import Dict, Mapping

import tensorflow as tf

from realformer_tf.serving import options as options_lib


def best_answers(options: options_lib.QuestionAnsweringOptions,
                 windows: Mapping[str, tf.Tensor],
                 context_tokens: Mapping[str, tf.RaggedTensor],
                 logits: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """squad_lib's answer selection over all doc-stride windows (`windows`,
  `context_tokens`: `BertTextPacker`'s; `logits` `[windows, seq_length]`).

  Returns:
    Per question: `answer_text` ("" for no answer), `answer_start_token` /
    `answer_end_token` (inclusive WordPiece indices, -1 for no answer),
    `answer_start_byte` / `answer_end_byte` (UTF-8 span, end exclusive, -1),
    `has_answer`, `span_score` (-inf if no span is valid), `num_windows`;
    v2.0 also `null_score` and `null_score_diff` (squad_lib's null odds).
  """
  o = options
  seq_length = o.max_seq_length
  k = min(o.n_best_size, seq_length)
  minus_inf = tf.constant(-float("inf"), tf.float64)

  def top_k_rank(values):
    # Each position's rank among the k best (k outside them), on the float32
    # logits; ties: lower index first, as Python's stable sort in squad_lib.
    top = tf.one_hot(tf.math.top_k(values, k=k).indices, seq_length,
                     on_value=True, off_value=False)
    return tf.reduce_min(tf.where(top, tf.range(k)[None, :, None], k), axis=1)

  positions = tf.range(seq_length, dtype=tf.int64)[None, :]
  offset = windows["context_offset"][:, None]
  in_context = (positions >= offset) & (
      positions < offset + windows["window_length"][:, None])
  start_rank = top_k_rank(logits["start_logits"])
  end_rank = top_k_rank(logits["end_logits"])
  valid_start = in_context & windows["max_context"] & (start_rank < k)
  valid_end = in_context & (end_rank < k)
  # float64 sums, as squad_lib's Python floats.
  start = tf.cast(logits["start_logits"], tf.float64)
  end = tf.cast(logits["end_logits"], tf.float64)
  span = positions[0][None, :] - positions[0][:, None]  # end - start
  length_ok = (span >= 0) & (span < o.max_answer_length)
  candidates = (valid_start[:, :, None] & valid_end[:, None, :]
                & length_ok[None, :, :])
  scores = tf.where(candidates, start[:, :, None] + end[:, None, :],
                    minus_inf)
  window_best = tf.reduce_max(scores, axis=[1, 2])
  # Of the spans with a window's best score, squad_lib's stable sort keeps
  # the first it listed: by start rank, then by end rank.
  rank = tf.where(scores == window_best[:, None, None],
                  start_rank[:, :, None] * k + end_rank[:, None, :], k * k + k)
  window_arg = tf.argmin(tf.reshape(rank, [-1, seq_length * seq_length]),
                         axis=1)

  num_windows = windows["num_windows"]
  # Dense, padded with -inf: a ragged reduce_max gives the float64 minimum.
  by_example = tf.RaggedTensor.from_row_lengths(
      window_best, num_windows).to_tensor(minus_inf)
  best_score = tf.reduce_max(by_example, axis=1)
  best_window = (tf.cumsum(num_windows, exclusive=True)
                 + tf.argmax(by_example, axis=1))
  arg = tf.gather(window_arg, best_window)
  start_pos, end_pos = arg // seq_length, arg % seq_length
  has_span = best_score > minus_inf
  window_start = tf.gather(windows["window_start"], best_window)
  offset = tf.gather(windows["context_offset"], best_window)
  token_start = tf.where(has_span, window_start + start_pos - offset, 0)
  token_end = tf.where(has_span, window_start + end_pos - offset, 0)

  if o.version_2_with_negative:
    null = tf.RaggedTensor.from_row_lengths(start[:, 0] + end[:, 0],
                                            num_windows)
    null_score = tf.reduce_min(null, axis=1)
    # As squad_lib's null odds: the null score alone when no span is valid.
    null_score_diff = tf.where(has_span, null_score - best_score, null_score)
    has_answer = has_span & (null_score_diff <= o.null_score_diff_threshold)
  else:
    has_answer = has_span

  text, byte_start, byte_end = _answer_text(context_tokens, token_start,
                                            token_end)

  def or_minus_one(index):  # -1 for no answer.
    return tf.cast(tf.where(has_answer, index, tf.constant(-1, tf.int64)),
                   tf.int32)

  result = {
      "answer_text": tf.where(has_answer, text, ""),
      "answer_start_token": or_minus_one(token_start),
      "answer_end_token": or_minus_one(token_end),
      "answer_start_byte": or_minus_one(byte_start),
      "answer_end_byte": or_minus_one(byte_end),
      "has_answer": has_answer,
      "span_score": tf.cast(best_score, tf.float32),
      "num_windows": tf.cast(num_windows, tf.int32),
  }
  if o.version_2_with_negative:
    result["null_score"] = tf.cast(null_score, tf.float32)
    result["null_score_diff"] = tf.cast(null_score_diff, tf.float32)
  return result


def _answer_text(context_tokens, token_start, token_end):
  """Answer text as squad_lib's `get_final_text` (the words the span touches,
  single-spaced, cut to its WordPieces' characters), and its byte span."""

  def at(key, index):  # context_tokens[key][i, index[i]]
    values = context_tokens[key]
    return tf.gather(values.flat_values, values.row_starts() + index)

  word_start = at("word_index", token_start)
  word_end = at("word_index", token_end)
  first_cut = at("word_begin", token_start)
  last_keep = at("word_end", token_end)
  words = context_tokens["words"]
  span_words = tf.gather(words.flat_values, tf.ragged.range(
      words.row_starts() + word_start, words.row_starts() + word_end + 1))
  joined = tf.strings.reduce_join(span_words, axis=1, separator=" ")
  last_length = tf.cast(tf.strings.length(at("words", word_end)), tf.int64)
  length = (tf.cast(tf.strings.length(joined), tf.int64)
            - (last_length - last_keep) - first_cut)
  text = tf.strings.substr(joined, first_cut, length)
  byte_start = at("words_begin", word_start) + first_cut
  byte_end = at("words_begin", word_end) + last_keep
  return text, byte_start, byte_end
