"""BERT's WordPiece in pure Python: the one vocabulary learner of both faces.

`count_words` is tensorflow-text's BasicTokenizer's words, `learn_vocab`
its `learn` from their counts (computed without its sub-word counts),
`WordPieceTokenizer` its `BertTokenizer`'s ids, without TensorFlow.
"""

import collections
import functools
import itertools
import math
import re
import sys
import unicodedata
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
RESERVED_TOKENS = (PAD, UNK, CLS, SEP, MASK)
JOINER = "##"
MAX_BYTES_PER_WORD = 100  # BertTokenizer's max_bytes_per_word.
# The quickstart's top of the search over the minimum count: its vocabulary
# (956 tokens at 1,000) and so every number it prints; the default gives 977.
QUICKSTART_UPPER_THRESH = 500

# bert_tokenizer.py `_DELIM_REGEX`, less `\p{P}` (see `_word_pattern`).
_ASCII_PUNCTUATION = r"!-/:-@\[-`{-~"
_CJK = ("\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
        "\U0002b740-\U0002b81f\U0002b820-\U0002ceaf\uf900-\ufaff"
        "\U0002f800-\U0002fa1f")
_RE2_SPACE = " \t\n\f\r"  # RE2's \s; Python's would also split at U+00A0.
# ASCII's Cc characters (all of them are), as spaces.
_ASCII_CONTROLS = {c: " " for c in list(range(32)) + [127]}


@functools.lru_cache(maxsize=None)
def _word_pattern(ascii_only: bool = False) -> "re.Pattern":
  """A kept delimiter (punctuation, CJK) or a run of other non-space text.

  RE2's `\\p{P}` as a character class of every code point whose Unicode
  category is P*, built once (about 0.3 s); in ASCII text, ASCII's.
  """
  ranges, start = [], None
  for code in range(0 if ascii_only else sys.maxunicode + 2):
    is_p = (code <= sys.maxunicode and
            unicodedata.category(chr(code)).startswith("P"))
    if is_p and start is None:
      start = code
    elif not is_p and start is not None:
      ranges.append(re.escape(chr(start)) + (
          "-" + re.escape(chr(code - 1)) if code - 1 > start else ""))
      start = None
  delimiters = _ASCII_PUNCTUATION + ("" if ascii_only else
                                     _CJK + "".join(ranges))
  return re.compile(f"[{delimiters}]|[^{_RE2_SPACE}{delimiters}]+")


def basic_words(text: str, lower_case: bool = True) -> List[str]:
  """Words and punctuation of `text`, as tensorflow-text's BasicTokenizer:
  NFKC case folding, accents dropped, Cc/Cf as spaces, split on RE2's `\\s`
  and around each punctuation or CJK character."""
  if text.isascii():  # Most text: the same result, ten times faster.
    return _word_pattern(True).findall(
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
  """Word counts of `lines` (`learner.count_words` of the split lines), a
  block of lines at a time (a newline splits words as a space does)."""
  counts, lines = collections.Counter(), iter(lines)
  while block := list(itertools.islice(lines, 4096)):
    for is_ascii in (True, False):  # ASCII text alone: four times faster.
      counts.update(basic_words("\n".join(
          line for line in block if line.isascii() == is_ascii), lower_case))
  return counts


def _split_starts(word: str, tokens: Dict[str, int]) -> Optional[List[int]]:
  """Ends of `word`'s greedy longest-match pieces in `tokens`, or None."""
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


def _later_suffix_counts(rests: List[Dict[str, int]], tokens: Dict[str, int]
                         ) -> Dict[str, int]:
  """A later iteration's counts of suffixes: `rests[n]` (a word's count per
  rest of n characters after its first piece) taken apart greedily into
  the `##` tokens of `tokens`, longest rests first, each rest once."""
  pieces = [t[len(JOINER):] for t in tokens if t.startswith(JOINER)]
  # Each start of a `##` token's piece: whether it is one.
  starts = dict.fromkeys((p[:n] for p in pieces for n in range(1, len(p))),
                         False)
  starts.update(dict.fromkeys(pieces, True))
  pending = [collections.defaultdict(int, by_rest) for by_rest in rests]
  counts = {}
  for length in range(len(pending) - 1, 0, -1):
    for rest, count in pending[length].items():
      counts[JOINER + rest] = count
      piece = end = 1  # The longest `##` token the rest starts with.
      while end < length and (known := starts.get(rest[:end + 1])) is not None:
        end += 1
        piece = end if known else piece
      if piece < length:
        pending[length - piece][rest[piece:]] += count
  return counts


def _learn_with_thresh(word_counts: Sequence[Tuple[str, int]], thresh: int,
                       reserved: Sequence[str], first: Dict[str, int],
                       prefixes: List[List[Tuple[int, int]]],
                       num_iterations: int) -> List[str]:
  """One candidate vocabulary for a minimum count: tensorflow-text's
  `learn_with_thresh`, without its sub-word counts. What it keeps of one,
  less its longer extensions' counts, is the count of the words (of the
  suffixes after a piece) equal to it; a word's first piece is its longest
  frequent prefix in every iteration. `first`: its suffixes' counts;
  `prefixes`: per word, its shorter prefixes that are words (length, count).
  """
  chars = {c for word, _ in word_counts for c in word}
  chars = dict.fromkeys(list(chars) + [JOINER + c for c in chars], 1)
  words = {w: c for w, c in word_counts if c >= thresh}
  rests = [collections.defaultdict(int) for _ in range(
      1 + max(len(w) for w, _ in word_counts))]
  for (word, count), shorter in zip(word_counts, prefixes):
    if count < thresh and len(word) > 1:
      end = next((n for n, c in shorter if c >= thresh), 1)
      rests[len(word) - end][word[end:]] += count
  tokens = {}
  for iteration in range(num_iterations):
    suffixes = _later_suffix_counts(rests, tokens) if iteration else first
    tokens = {**chars, **words, **{t: c for t, c in suffixes.items()
                                   if c >= thresh}}
  by_count = sorted(sorted(tokens.items()), key=lambda x: x[1], reverse=True)
  return list(dict.fromkeys(
      list(reserved) + sorted(c for c in chars if len(c) == 1) +
      [t for t, _ in by_count]))


def learn_vocab(word_counts: Dict[str, int], vocab_size: int,
                reserved_tokens: Sequence[str] = RESERVED_TOKENS,
                upper_thresh: Optional[int] = int(1e7), lower_thresh: int = 10,
                num_iterations: int = 4, max_input_tokens: int = int(5e6),
                max_token_length: int = 50, max_unique_chars: int = 1000,
                slack_ratio: float = 0.05) -> List[str]:
  """A WordPiece vocabulary for `word_counts`: tensorflow-text's `learn`.

  The binary search over the minimum count stops at a vocabulary within
  `slack_ratio` below `vocab_size`, or when the range is spent; reserved
  tokens first, then every character, then sub-words by falling count. A
  ValueError for no words or a `vocab_size` under 16.
  """
  if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or (
      vocab_size < 16):
    raise ValueError(
        f"vocab_size must be an int, at least 16, got {vocab_size!r}.")
  if not word_counts:
    raise ValueError("No text to learn a WordPiece vocabulary from.")
  counts = list(word_counts.items())
  upper = min(max(c for _, c in counts), upper_thresh or math.inf)
  lower = max(min(c for _, c in counts), lower_thresh)
  words = [(w, c) for w, c in counts
           if len(w) <= max_token_length and w not in reserved_tokens]
  char_counts = collections.defaultdict(int)
  for word, count in words:
    for char in word:
      char_counts[char] += count
  allowed = {c for c, _ in sorted(char_counts.items(), key=lambda x: (
      -x[1], x[0]))[:max_unique_chars]}
  # By falling count, then word: the same order whatever `word_counts`' is.
  words = [(w, c) for w, c in sorted(words, key=lambda x: (-x[1], x[0]))
           if all(ch in allowed for ch in w)][:max_input_tokens]
  first = collections.defaultdict(int)  # The first iteration's: all suffixes.
  for word, count in words:
    for start in range(1, len(word)):
      first[JOINER + word[start:]] += count
  known = dict(words)
  prefixes = [[(n, known[w[:n]]) for n in range(len(w) - 1, 1, -1)
               if w[:n] in known] for w, _ in words]
  slack = max(slack_ratio * vocab_size, 0)
  while True:
    thresh = (upper + lower) // 2
    vocab = _learn_with_thresh(words, thresh, reserved_tokens, first,
                               prefixes, num_iterations)
    if ((len(vocab) <= vocab_size and vocab_size - len(vocab) <= slack) or
        lower >= upper or thresh <= 1):
      return vocab
    if len(vocab) > vocab_size:
      lower = thresh + 1
    else:
      upper = thresh - 1


class WordPieceTokenizer:
  """Text to WordPiece ids over `vocab` (tokens in id order, with the
  `RESERVED_TOKENS`): tensorflow-text's `BertTokenizer(lower_case=True)`,
  ids flattened over words."""

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
