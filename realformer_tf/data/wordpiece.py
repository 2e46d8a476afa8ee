"""BERT's WordPiece in pure Python, for machines without TensorFlow.

What `tokenization.learn_vocab` and `make_tokenizer` do with tensorflow-text,
giving the same vocabulary and ids.
"""

import collections
import functools
import re
import sys
import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
RESERVED_TOKENS = (PAD, UNK, CLS, SEP, MASK)
JOINER = "##"
MAX_BYTES_PER_WORD = 100  # BertTokenizer's max_bytes_per_word.
# The quickstart's upper end of the learner's binary search over the minimum
# count (tensorflow-text starts at the top word's count): the same vocabulary
# on a small corpus, in less time.
QUICKSTART_UPPER_THRESH = 500

# bert_tokenizer.py `_DELIM_REGEX`, less `\p{P}` (see `_punctuation`).
_ASCII_PUNCTUATION = r"!-/:-@\[-`{-~"
_CJK = ("\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
        "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\uf900-\ufaff"
        "\U0002f800-\U0002fa1f")
_RE2_SPACE = " \t\n\f\r"  # RE2's \s; Python's would also split at U+00A0.
# ASCII's Cc characters (all of them are), as spaces.
_ASCII_CONTROLS = {c: " " for c in list(range(32)) + [127]}


@functools.lru_cache(maxsize=None)
def _word_pattern() -> "re.Pattern":
  """A kept delimiter (punctuation, CJK) or a run of other non-space text.

  RE2's `\\p{P}` as a character class of every code point whose Unicode
  category is P*, built once (about 0.3 s).
  """
  ranges, start = [], None
  for code in range(sys.maxunicode + 2):
    is_p = (code <= sys.maxunicode and
            unicodedata.category(chr(code)).startswith("P"))
    if is_p and start is None:
      start = code
    elif not is_p and start is not None:
      ranges.append(re.escape(chr(start)) + (
          "-" + re.escape(chr(code - 1)) if code - 1 > start else ""))
      start = None
  delimiters = f"{_ASCII_PUNCTUATION}{_CJK}{''.join(ranges)}"
  return re.compile(f"[{delimiters}]|[^{_RE2_SPACE}{delimiters}]+")


def basic_words(text: str, lower_case: bool = True) -> List[str]:
  """Words and punctuation of `text`, as tensorflow-text's BasicTokenizer:
  NFKC case folding, accents dropped, Cc/Cf as spaces, split on RE2's `\\s`
  and around each punctuation or CJK character."""
  if text.isascii():  # Most text: the same result, ten times faster.
    return _word_pattern().findall(
        (text.lower() if lower_case else text).translate(_ASCII_CONTROLS))
  if lower_case:
    # ICU's NFKC_Casefold (tensorflow-text's `case_fold_utf8`) drops the
    # default-ignorable code points, most of which are format (Cf) ones.
    text = unicodedata.normalize("NFKC", unicodedata.normalize(
        "NFKC", text).casefold())
    text = unicodedata.normalize("NFD", "".join(
        c for c in text if unicodedata.category(c) != "Cf"))
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
  text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c
                 for c in text)
  return _word_pattern().findall(text)


def count_words(lines: Iterable[str], lower_case: bool = True
                ) -> collections.Counter:
  """Word counts of `lines` (`learner.count_words` of the split lines)."""
  counts = collections.Counter()
  for line in lines:
    counts.update(basic_words(line, lower_case))
  return counts


def _split_starts(word: str, tokens: Dict[str, int]) -> Optional[List[int]]:
  """Ends of `word`'s greedy longest-match pieces in `tokens`; None if a
  piece is missing (`learner.get_split_indices`)."""
  ends, start = [], 0
  while start < len(word):
    end = len(word)
    while end > start and (
        (JOINER if start else "") + word[start:end]) not in tokens:
      end -= 1
    if end == start:
      return None
    ends.append(end)
    start = end
  return ends


def _with_chars(chars: Iterable[str], tokens: Dict[str, int]
                ) -> Dict[str, int]:
  """Every character, alone and as a suffix, in `tokens` (count 1 if new)."""
  for char in chars:
    tokens.setdefault(char, 1)
    tokens.setdefault(JOINER + char, 1)
  return tokens


def _learn_with_thresh(word_counts: Sequence[Tuple[str, int]], thresh: int,
                       reserved: Sequence[str], max_token_length: int,
                       num_iterations: int) -> List[str]:
  """One candidate vocabulary for a minimum count (`learn_with_thresh`)."""
  chars = {c for word, _ in word_counts for c in word}
  tokens = _with_chars(chars, {})
  for iteration in range(num_iterations):
    # by_length[n]: sub-words of n characters (suffixes with the joiner).
    by_length = [collections.defaultdict(int)
                 for _ in range(max_token_length + 1)]
    for word, count in word_counts:
      ends = (range(1, len(word) + 1) if iteration == 0 else
              _split_starts(word, tokens))
      if not ends:
        continue
      start = 0
      for index in ends:
        for end in range(start + 1, len(word) + 1):
          by_length[end - start][
              (JOINER if start else "") + word[start:end]] += count
        start = index
    tokens = {}
    for length in range(max_token_length, 0, -1):
      for token, count in by_length[length].items():
        if count >= thresh:
          tokens[token] = count
        # A kept sub-word's count no longer counts for its prefixes.
        joiner = len(JOINER) if len(token) > length else 0
        for i in range(1 + joiner, length + joiner):
          if token[:i] in by_length[i - joiner]:
            by_length[i - joiner][token[:i]] -= count
    tokens = _with_chars(chars, tokens)
  by_count = sorted(sorted(tokens.items()), key=lambda x: x[1], reverse=True)
  return list(dict.fromkeys(
      list(reserved) + sorted(chars) + [t for t, _ in by_count]))


def learn_vocab(word_counts: Dict[str, int], vocab_size: int,
                reserved_tokens: Sequence[str] = RESERVED_TOKENS,
                upper_thresh: Optional[int] = int(1e7),
                lower_thresh: Optional[int] = 10, num_iterations: int = 4,
                max_input_tokens: Optional[int] = int(5e6),
                max_token_length: int = 50, max_unique_chars: int = 1000,
                slack_ratio: float = 0.05) -> List[str]:
  """A WordPiece vocabulary for `word_counts`: tensorflow-text's `learn`.

  The binary search over the minimum count stops at a vocabulary within
  `slack_ratio` below `vocab_size`, or when the range is spent; reserved
  tokens first, then every character, then sub-words by falling count.

  Raises:
    ValueError: No words, or a `vocab_size` under 16.
  """
  if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or (
      vocab_size < 16):
    raise ValueError(f"vocab_size must be an int >= 16, got {vocab_size!r}.")
  if not word_counts:
    raise ValueError("No words to learn a WordPiece vocabulary from.")
  counts = list(word_counts.items())
  upper = max(c for _, c in counts)
  upper = upper if upper_thresh is None or upper < upper_thresh else (
      upper_thresh)
  lower = min(c for _, c in counts)
  lower = lower if lower_thresh is None or lower > lower_thresh else (
      lower_thresh)
  words = [(w, c) for w, c in counts
           if len(w) <= max_token_length and w not in reserved_tokens]
  char_counts = collections.defaultdict(int)
  for word, count in words:
    for char in word:
      char_counts[char] += count
  allowed = {c for c, _ in sorted(sorted(char_counts.items()),
                                  key=lambda x: x[1],
                                  reverse=True)[:max_unique_chars]}
  words = [(w, c) for w, c in sorted(words, key=lambda x: x[1], reverse=True)
           if all(ch in allowed for ch in w)]
  if max_input_tokens not in (None, -1):
    words = words[:max_input_tokens]
  slack = max(slack_ratio * vocab_size, 0)
  while True:
    thresh = (upper + lower) // 2
    vocab = _learn_with_thresh(words, thresh, reserved_tokens,
                               max_token_length, num_iterations)
    if ((len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack) or
        lower >= upper or thresh <= 1):
      return vocab
    if len(vocab) > vocab_size:
      lower = thresh + 1
    else:
      upper = thresh - 1


class WordPieceTokenizer:
  """Text to WordPiece ids over a vocabulary (tensorflow-text's
  `BertTokenizer(lower_case=True)`, ids flattened over words).

  Args:
    vocab: Tokens in id order; must hold `RESERVED_TOKENS`.
  """

  def __init__(self, vocab: Sequence[str], lower_case: bool = True):
    self.vocab = list(vocab)
    self.ids = {token: i for i, token in enumerate(self.vocab)}
    missing = [t for t in RESERVED_TOKENS if t not in self.ids]
    if missing or len(self.ids) != len(self.vocab):
      raise ValueError(f"Not a BERT WordPiece vocabulary: missing "
                       f"{missing}, {len(self.vocab) - len(self.ids)} "
                       "repeated token(s).")
    self.lower_case = lower_case
    self._words = {}  # word -> its ids; corpora repeat words.

  def word_ids(self, word: str) -> List[int]:
    ids = self._words.get(word)
    if ids is None:
      ends = (None if len(word.encode("utf-8")) > MAX_BYTES_PER_WORD else
              _split_starts(word, self.ids))
      ids, start = [], 0
      for end in ends or ():
        ids.append(self.ids[(JOINER if start else "") + word[start:end]])
        start = end
      self._words[word] = ids = ids or [self.ids[UNK]]
    return ids

  def __call__(self, text: str) -> List[int]:
    return [i for word in basic_words(text, self.lower_case)
            for i in self.word_ids(word)]
