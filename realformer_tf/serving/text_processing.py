"""In-graph text preprocessing for the exported signatures (tensorflow-text).

Raw UTF-8 text becomes the ids the training data code makes (the same
`BertTokenizer` and `tokenization.pack_inputs`; serving truncates from the
end). SQuAD windows rebuild `squad_lib`'s features. What the model never
sees is counted: `num_truncated_tokens`, `unknown_word_counts`.
"""

from typing import Dict, List, Sequence, Tuple

import tensorflow as tf
import tensorflow_text as tf_text
# Not exported at tensorflow_text's top level; the class BertTokenizer uses.
from tensorflow_text.python.ops import bert_tokenizer as tf_text_bert

from official.nlp.modeling.layers import text_layers
from realformer_tf.data import tokenization

# squad_lib's `_is_whitespace`: the only characters that separate its words.
SQUAD_WHITESPACE_REGEX = "[ \t\r\n\u202f]"
# tensorflow-text's WordPiece limit: a longer word is one [UNK].
MAX_BYTES_PER_WORD = 100


def assert_has_tokens(tokens: tf.RaggedTensor, name: str) -> tf.Operation:
  """Asserts that no row of `tokens` is empty, naming the bad rows."""
  lengths = tokens.row_lengths()
  return tf.debugging.Assert(
      tf.reduce_all(lengths > 0),
      [f"Invalid input: `{name}` holds an empty string (or text with no "
       "WordPiece token: only whitespace or control characters) at batch "
       "positions", tf.where(tf.equal(lengths, 0))[:, 0],
       "; send non-empty UTF-8 text."],
      name=f"check_{name}_not_empty")


def assert_valid_utf8(texts: tf.Tensor, name: str) -> tf.Operation:
  """Asserts that every string of `texts` is valid UTF-8, naming the bad rows
  (not their bytes); the tokenizers would answer about other text."""
  valid = tf.equal(tf.strings.unicode_transcode(
      texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD),
                   texts)
  return tf.debugging.Assert(
      tf.reduce_all(valid),
      [f"Invalid input: `{name}` holds a string that is not valid UTF-8 at "
       "batch positions", tf.where(tf.logical_not(valid))[:, 0],
       "; send text encoded as UTF-8."],
      name=f"check_{name}_utf8")


def assert_same_batch(first: tf.Tensor, second: tf.Tensor, first_name: str,
                      second_name: str) -> tf.Operation:
  """Asserts equal leading dimensions of two inputs."""
  return tf.debugging.assert_equal(
      tf.shape(first)[0], tf.shape(second)[0],
      message=(f"Invalid input: `{first_name}` and `{second_name}` must have "
               "the same batch size"))


class BertTextPacker(tf.Module):
  """Model Garden's `text_layers.BertTokenizer` and BERT packing, plus the
  [MASK] literal, ids back to tokens and SQuAD windows."""

  def __init__(self, vocab_file: str, lower_case: bool, max_seq_length: int):
    """`vocab_file`: exported as an asset, at a path unique to this
    vocabulary (tables are shared by path); `max_seq_length`: at least 3."""
    super().__init__(name="text_packer")
    if max_seq_length < 3:
      raise ValueError(f"max_seq_length={max_seq_length} leaves no room for "
                       "text between [CLS] and [SEP].")
    vocab = tokenization.load_vocab(vocab_file)  # Clear errors for a bad file.
    self.lower_case = bool(lower_case)
    self.max_seq_length = int(max_seq_length)
    self._tokenizer = text_layers.BertTokenizer(
        vocab_file=vocab_file, lower_case=self.lower_case,
        tokenize_with_offsets=True)
    special_ids = self._tokenizer.get_special_tokens_dict()
    self.cls_id, self.sep_id, self.mask_id = (special_ids[k] for k in (
        "start_of_sequence_id", "end_of_segment_id", "mask_id"))
    # -1 (never an id) for a vocabulary without [UNK].
    self.unk_id = (vocab.index(tokenization.UNK) if tokenization.UNK in vocab
                   else -1)
    # The words the layer's WordPiece step sees (the same BasicTokenizer).
    self._basic_tokenizer = tf_text_bert.BasicTokenizer(
        lower_case=self.lower_case)
    self._id_to_token = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            vocab_file, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
            tf.string, tf.lookup.TextFileIndex.WHOLE_LINE),
        default_value=tokenization.UNK)

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """WordPiece ids of each text: int64 ragged `[batch, tokens]` (the
    layer's are int32)."""
    return tf.cast(self._tokenizer(texts)[0].merge_dims(-2, -1), tf.int64)

  def tokenize_with_masks(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Like `tokenize`, but each literal "[MASK]" becomes the [MASK] id (the
    text is split on it first: the basic tokenizer would split it)."""
    pieces = tf.strings.split(texts, sep=tokenization.MASK)  # [batch, pieces]
    piece_ids = self.tokenize(pieces.flat_values)  # [pieces, tokens]
    num_pieces = tf.shape(pieces.flat_values)[0]
    mask_column = tf.RaggedTensor.from_tensor(
        tf.fill([num_pieces, 1], tf.constant(self.mask_id, tf.int64)))
    # Each piece followed by a [MASK], but for a text's last.
    with_masks = tf.concat([piece_ids, mask_column], axis=1)
    per_text = tf.RaggedTensor.from_row_splits(
        with_masks, pieces.row_splits).merge_dims(1, 2)
    return per_text[:, :-1]

  def id_to_token(self, ids: tf.Tensor) -> tf.Tensor:
    """Vocabulary strings of `ids` (any shape)."""
    return self._id_to_token.lookup(tf.cast(ids, tf.int64))

  def pack(self, segments: Sequence[tf.RaggedTensor],
           names: Sequence[str]) -> Tuple[Dict[str, tf.Tensor],
                                          List[tf.Operation]]:
    """`tokenization.pack_inputs` of `segments` (one or two int64 ragged
    `[batch, tokens]`, input `names` for errors) and the checks to run first."""
    checks = [assert_has_tokens(s, n) for s, n in zip(segments, names)]
    return tokenization.pack_inputs(segments, self.max_seq_length,
                                    self.cls_id, self.sep_id), checks

  @staticmethod
  def num_truncated_tokens(segments: Sequence[tf.RaggedTensor],
                           features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """int32 `[batch]`: tokens of `segments` that `pack` cut off."""
    total = tf.add_n([tf.cast(s.row_lengths(), tf.int32) for s in segments])
    kept = tf.reduce_sum(features["input_mask"], axis=1) - (len(segments) + 1)
    return total - kept

  def unknown_word_counts(self, texts: tf.Tensor,
                          split_masks: bool = False) -> Dict[str, tf.Tensor]:
    """int32 `[batch]` counts of words that became [UNK] (`num_unknown_words`),
    their characters and those over `MAX_BYTES_PER_WORD`; with `split_masks`
    literal "[MASK]"s are left out."""
    if split_masks:
      pieces = tf.strings.split(texts, sep=tokenization.MASK)
      flat = self.unknown_word_counts(pieces.flat_values)
      return {k: tf.math.unsorted_segment_sum(v, pieces.value_rowids(),
                                              tf.shape(texts)[0])
              for k, v in flat.items()}
    ids = self._tokenizer(texts)[0]  # [batch, words, pieces]
    words = self._basic_tokenizer.tokenize(texts)  # [batch, words]
    unknown = tf.reduce_any(tf.equal(ids, tf.cast(self.unk_id, ids.dtype)),
                            axis=-1)  # Ragged [batch, words].
    unknown = tf.cast(unknown, tf.int32)
    chars = tf.strings.length(words, unit="UTF8_CHAR")
    overlong = tf.cast(tf.strings.length(words) > MAX_BYTES_PER_WORD, tf.int32)
    return dict(
        num_unknown_words=tf.reduce_sum(unknown, axis=1),
        num_unknown_chars=tf.reduce_sum(unknown * chars, axis=1),
        num_overlong_words=tf.reduce_sum(unknown * overlong, axis=1))

  def _normalize_like_tokenizer(self, texts: tf.Tensor) -> tf.Tensor:
    """The text the basic tokenizer's offsets refer to."""
    if self.lower_case:
      texts = tf_text.case_fold_utf8(texts)
      texts = tf_text.normalize_utf8(texts, "NFD")
      texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return tf.strings.regex_replace(texts, r"\p{Cc}|\p{Cf}", " ")

  def tokenize_context(self, contexts: tf.Tensor) -> Dict[str, tf.RaggedTensor]:
    """squad_lib's tokenization of `[batch]` strings (each whitespace-split
    word on its own), with offsets into them.

    Returns:
      Ragged `[batch, tokens]`: `ids` (int64), `word_index` (into `words`),
      `word_begin` / `word_end` (byte offsets in its word, end exclusive; the
      whole word when normalizing changed its length, as squad_lib's
      `get_final_text`); ragged `[batch, words]`: `words`, `words_begin`.
    """
    words, words_begin, words_end = tf_text.regex_split_with_offsets(
        contexts, SQUAD_WHITESPACE_REGEX, "")
    flat_words = words.flat_values
    pieces, begin, end = self._tokenizer(flat_words)
    pieces, begin, end = (t.merge_dims(-2, -1) for t in (pieces, begin, end))
    word_length = words_end.flat_values - words_begin.flat_values
    aligned = tf.equal(
        tf.cast(tf.strings.length(self._normalize_like_tokenizer(flat_words)),
                tf.int64),
        word_length)
    # Per token of each word.
    token_aligned = tf.gather(aligned, pieces.value_rowids())
    token_word_length = tf.gather(word_length, pieces.value_rowids())
    begin = tf.where(token_aligned, begin.flat_values,
                     tf.zeros_like(begin.flat_values))
    end = tf.where(token_aligned, end.flat_values, token_word_length)
    # Global word index (into words.flat_values) -> index within its context.
    word_in_context = (tf.range(tf.shape(flat_words, out_type=tf.int64)[0])
                       - tf.gather(words.row_starts(), words.value_rowids()))
    token_word = tf.gather(word_in_context, pieces.value_rowids())

    def by_context(values):
      # [words, tokens] flat values -> [batch, tokens].
      return tf.RaggedTensor.from_row_splits(
          pieces.with_flat_values(values), words.row_splits).merge_dims(1, 2)

    return dict(ids=by_context(tf.cast(pieces.flat_values, tf.int64)),
                word_index=by_context(token_word),
                word_begin=by_context(begin),
                word_end=by_context(end),
                words=words,
                words_begin=words_begin)

  def squad_windows(self, question_ids: tf.RaggedTensor,
                    context_ids: tf.RaggedTensor, max_query_length: int,
                    doc_stride: int) -> Dict[str, tf.Tensor]:
    """squad_lib's features (doc-stride windows) for each question/context.

    Returns:
      Per window (`[windows]` or `[windows, max_seq_length]`): the int32
      model inputs, `example_index`, `window_start` (first context token),
      `window_length`, `context_offset` (its position in the sequence),
      `max_context` (squad_lib's `token_is_max_context`); per example:
      `num_windows`. Indices are int64.
    """
    seq_length = self.max_seq_length
    question = question_ids[:, :max_query_length]
    query_length = question.row_lengths()
    context_length = context_ids.row_lengths()
    max_doc = seq_length - query_length - 3
    step = tf.minimum(max_doc, doc_stride)
    extra = tf.maximum(context_length - max_doc, 0)
    num_windows = 1 + (extra + step - 1) // step
    example_index = tf.repeat(
        tf.range(tf.size(num_windows, out_type=tf.int64)), num_windows)
    window_in_example = tf.ragged.range(num_windows).flat_values
    window_start = window_in_example * tf.gather(step, example_index)
    window_length = tf.minimum(
        tf.gather(context_length, example_index) - window_start,
        tf.gather(max_doc, example_index))
    base = tf.gather(context_ids.row_starts(), example_index) + window_start
    context_part = tf.gather(context_ids.flat_values,
                             tf.ragged.range(base, base + window_length))
    # Windows fit: packing trims nothing.
    features = tokenization.pack_inputs(
        [tf.gather(question, example_index), context_part], seq_length,
        self.cls_id, self.sep_id)

    # Max context (squad_lib's `_check_is_max_context`): the token at
    # context index g scores min(left, right) + 0.01 * length in each window
    # holding it; the first best window owns it. float64, as in Python.
    context_offset = tf.gather(query_length, example_index) + 2
    positions = tf.range(seq_length, dtype=tf.int64)[None, :]
    g = window_start[:, None] + positions - context_offset[:, None]  # [W, S]
    in_window = (g >= window_start[:, None]) & (
        g < (window_start + window_length)[:, None])
    # [windows, 1, max_windows]: starts/lengths of the example's windows.
    other_start, other_length = (tf.gather(
        tf.RaggedTensor.from_row_lengths(t, num_windows).to_tensor(),
        example_index)[:, None, :] for t in (window_start, window_length))
    g3 = g[:, :, None]
    holds = (g3 >= other_start) & (g3 < other_start + other_length)
    score = (tf.cast(tf.minimum(g3 - other_start,
                                other_start + other_length - 1 - g3),
                     tf.float64)
             + 0.01 * tf.cast(other_length, tf.float64))
    score = tf.where(holds, score, tf.constant(-1.0, tf.float64))
    best_window = tf.argmax(score, axis=2, output_type=tf.int64)  # first max
    max_context = in_window & tf.equal(best_window,
                                       window_in_example[:, None])
    features.update(example_index=example_index, window_start=window_start,
                    window_length=window_length, context_offset=context_offset,
                    max_context=max_context, num_windows=num_windows)
    return features
