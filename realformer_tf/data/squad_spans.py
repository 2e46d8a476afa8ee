"""SQuAD v1.1 without TensorFlow (the Keras 3 face): `squad_json`'s examples
to BERT's windowed features over a `wordpiece` tokenizer, the ids and answer
positions `squad_lib` gives the tf_keras face; each question's best span back
to its context's text as `squad_lib.postprocess_output` does; the official
v1.1 script's EM/F1. `squad_lib` and Model Garden's evaluator import
TensorFlow, which a GPU machine with JAX alone lacks.
"""

import collections
import re
import string
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from realformer_tf.data import squad_json
from realformer_tf.data import wordpiece

# BERT's run_squad defaults.
N_BEST_SIZE = 20
MAX_ANSWER_LENGTH = 30
ARRAYS = ("token_ids", "segment_ids", "padding_mask")


def validate_lengths(max_seq_length: int, doc_stride: int,
                     max_query_length: int) -> None:
  """Rejects lengths under which squad_lib's doc-span loop cannot progress."""
  if max_query_length < 1 or doc_stride < 1:
    raise ValueError(f"max_query_length={max_query_length} and doc_stride="
                     f"{doc_stride} must be >= 1.")
  if max_seq_length < max_query_length + 4:
    raise ValueError(
        f"max_seq_length={max_seq_length} leaves no room for the context: "
        f"it needs [CLS] + up to max_query_length={max_query_length} question "
        "tokens + 2 [SEP] + at least 1 context token.")


def _windows(num_tokens: int, width: int, stride: int) -> List[range]:
  """squad_lib's doc spans: `width` tokens, `stride` apart, the last ending
  at the end."""
  spans, start = [], 0
  while True:
    spans.append(range(start, min(num_tokens, start + width)))
    if spans[-1].stop == num_tokens:
      return spans
    start += min(len(spans[-1]), stride)


def _is_max_context(spans: Sequence[range], index: int, position: int
                    ) -> bool:
  """squad_lib's rule: the span giving `position` the most context on its
  shorter side (+0.01 per token of span), the first on ties."""
  scores = [min(position - s.start, s.stop - 1 - position) + 0.01 * len(s)
            if position in s else -1.0 for s in spans]
  return int(np.argmax(scores)) == index


def featurize(examples: Sequence[squad_json.SquadExample],
              tokenizer: wordpiece.WordPieceTokenizer, max_seq_length: int,
              doc_stride: int, max_query_length: int, is_training: bool
              ) -> Dict[str, np.ndarray]:
  """squad_lib's features (a window of context a row) as arrays: `ARRAYS`,
  `start_positions`/`end_positions` (0, the [CLS], where the window lacks
  the answer), `example_index`, `orig_index` (each context token's word,
  else -1) and `max_context`. Training drops answers with no WordPiece
  (`squad.drop_answers_without_tokens`); `dropped` counts them."""
  validate_lengths(max_seq_length, doc_stride, max_query_length)
  pieces = {}  # word -> its WordPiece ids; a paragraph's questions share it.
  rows = collections.defaultdict(list)
  dropped, cls, sep = 0, tokenizer.ids[wordpiece.CLS], tokenizer.ids[
      wordpiece.SEP]
  for e, example in enumerate(examples):
    query = tokenizer(example.question_text)[:max_query_length]
    doc, to_word, word_start = [], [], []
    for w, word in enumerate(example.doc_tokens):
      word_start.append(len(doc))
      ids = pieces.get(word)
      if ids is None:
        ids = pieces[word] = tokenizer(word)
      doc += ids
      to_word += [w] * len(ids)
    first = last = 0
    if is_training:
      s, t = example.start_position, example.end_position
      first = word_start[s]
      last = (word_start[t + 1] if t + 1 < len(word_start) else len(doc)) - 1
      if first > last:
        dropped += 1
        continue
      answer = tokenizer(example.orig_answer_text)
      first, last = next(((i, j) for i in range(first, last + 1)
                          for j in range(last, i - 1, -1)
                          if doc[i:j + 1] == answer), (first, last))
    spans = _windows(len(doc), max_seq_length - len(query) - 3, doc_stride)
    offset = len(query) + 2
    for index, span in enumerate(spans):
      ids = [cls] + query + [sep] + doc[span.start:span.stop] + [sep]
      pad = [0] * (max_seq_length - len(ids))
      rows["token_ids"].append(ids + pad)
      rows["segment_ids"].append([0] * offset + [1] * (len(span) + 1) + pad)
      rows["padding_mask"].append([1] * len(ids) + pad)
      rows["orig_index"].append([-1] * offset + to_word[span.start:span.stop]
                                + [-1] * (len(pad) + 1))
      rows["max_context"].append(
          [False] * offset + [_is_max_context(spans, index, i) for i in span]
          + [False] * (len(pad) + 1))
      inside = is_training and span.start <= first and last < span.stop
      rows["start_positions"].append(first - span.start + offset if inside
                                     else 0)
      rows["end_positions"].append(last - span.start + offset if inside else 0)
      rows["example_index"].append(e)
  features = {k: np.asarray(v, bool if k == "max_context" else np.int32)
              for k, v in rows.items()}
  features["dropped"] = np.asarray(dropped)
  return features


def final_text(predicted: str, original: str) -> str:
  """squad_lib's `get_final_text` (lower case): `original`'s characters that
  `predicted` (its basic tokens, lower-cased) covers; `original` when the
  alignment fails."""
  tokenized = " ".join(wordpiece.basic_words(original))
  start = tokenized.find(predicted)
  kept = [i for i, c in enumerate(original) if c != " "]
  if start == -1 or len(kept) != len(tokenized.replace(" ", "")):
    return original
  to_kept = {i: n for n, i in enumerate(
      i for i, c in enumerate(tokenized) if c != " ")}
  first = to_kept.get(start)
  last = to_kept.get(start + len(predicted) - 1)
  if first is None or last is None:
    return original
  return original[kept[first]:kept[last] + 1]


def predictions(examples: Sequence[squad_json.SquadExample],
                features: Mapping[str, np.ndarray], start_logits: np.ndarray,
                end_logits: np.ndarray, vocab: Sequence[str],
                n_best_size: int = N_BEST_SIZE,
                max_answer_length: int = MAX_ANSWER_LENGTH) -> Dict[str, str]:
  """{question id: answer text}: `squad_lib.postprocess_output`'s v1.1
  answer, the best-scoring valid span over the question's windows ("empty"
  where none is valid, as there)."""
  best = {}  # example index -> (score, feature, start, end), first on ties.
  for f, e in enumerate(features["example_index"]):
    orig, is_max = features["orig_index"][f], features["max_context"][f]
    length = int(features["padding_mask"][f].sum())
    # Stable sorts: squad_lib's order among equal logits.
    starts = np.argsort(-start_logits[f], kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits[f], kind="stable")[:n_best_size]
    for i in starts:
      if i >= length or orig[i] < 0 or not is_max[i]:
        continue
      for j in ends:
        if j < length and orig[j] >= 0 and i <= j < i + max_answer_length:
          score = start_logits[f][i] + end_logits[f][j]
          if e not in best or score > best[e][0]:
            best[e] = (score, f, i, j)
  answers = {}
  for e, example in enumerate(examples):
    if e not in best:
      answers[example.qas_id] = "empty"
      continue
    _, f, i, j = best[e]
    text = " ".join(vocab[t] for t in features["token_ids"][f][i:j + 1])
    text = " ".join(text.replace(" ##", "").replace("##", "").split())
    words = example.doc_tokens[features["orig_index"][f][i]:
                               features["orig_index"][f][j] + 1]
    answers[example.qas_id] = final_text(text, " ".join(words))
  return answers


# === The official evaluate-v1.1.py ===
def normalize_answer(text: str) -> str:
  """Lower case, no punctuation, articles or extra whitespace."""
  text = "".join(c for c in text.lower() if c not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def f1_score(prediction: str, truth: str) -> float:
  predicted, gold = normalize_answer(prediction).split(), normalize_answer(
      truth).split()
  same = sum((collections.Counter(predicted) &
              collections.Counter(gold)).values())
  if not same:
    return 0.0
  precision, recall = same / len(predicted), same / len(gold)
  return 2 * precision * recall / (precision + recall)


def evaluate(examples: Sequence[squad_json.SquadExample],
             answers: Mapping[str, str]) -> Tuple[float, float]:
  """(exact match, F1) as fractions: each question's best over its gold
  answers, averaged over all questions (an unanswered one scores 0)."""
  exact = f1 = 0.0
  for example in examples:
    if example.qas_id in answers:
      answer = answers[example.qas_id]
      exact += max(float(normalize_answer(answer) == normalize_answer(t))
                   for t in example.answers)
      f1 += max(f1_score(answer, t) for t in example.answers)
  return exact / len(examples), f1 / len(examples)
