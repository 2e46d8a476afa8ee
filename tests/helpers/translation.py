"""A synthetic parallel corpus (target = reversed source) for translation tests."""

import numpy as np
import sacrebleu

WORDS = ("red", "blue", "green", "gold", "pink", "gray", "teal", "lime")


def make_corpus(num, seed, min_len=3, max_len=6):
  """(sources, targets): random word sequences and their reversals."""
  rng = np.random.default_rng(seed)
  sources, targets = [], []
  for _ in range(num):
    words = list(rng.choice(WORDS, size=rng.integers(min_len, max_len + 1)))
    sources.append(" ".join(words))
    targets.append(" ".join(reversed(words)))
  return sources, targets


def chance_bleu(sources, targets, seed=0):
  """SacreBLEU of a random permutation of each source (right words, random order)."""
  rng = np.random.default_rng(seed)
  guesses = [" ".join(rng.permutation(s.split())) for s in sources]
  return sacrebleu.corpus_bleu(guesses, [targets]).score
