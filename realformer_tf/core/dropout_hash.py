"""Hashed dropout: the keep mask is a hash of (seed, batch, head, row, column).

Murmur3's 32-bit finalizer: nothing is stored (a backward pass recomputes
the mask) and XLA fuses it. The Pallas kernels and both faces share it, so
one seed drops the same elements. `ops` gives `word`, `srl`, `iota`, `reshape`.
"""

# The golden ratio, a second odd constant and Murmur3's fmix32 constants.
GOLDEN = 0x9E3779B9
GOLDEN2 = 0x7F4A7C15
FMIX_C1 = 0x85EBCA6B
FMIX_C2 = 0xC2B2AE35
# The hash bits compared with the threshold: the rate is exact to 2**-24.
KEEP_BITS = 24


def keep_threshold(rate: float) -> int:
  """Top-`KEEP_BITS` hash values below this are dropped (`rate` of them)."""
  if not 0.0 <= rate < 1.0:
    raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
  return int(round(rate * (1 << KEEP_BITS)))


def fmix32(ops, x):
  """Murmur3's 32-bit finalizer (wrapping arithmetic)."""
  x = x ^ ops.srl(x, 16)
  x = x * ops.word(FMIX_C1)
  x = x ^ ops.srl(x, 13)
  x = x * ops.word(FMIX_C2)
  return x ^ ops.srl(x, 16)


def seed_key(ops, words):
  """One well-mixed key from the seed's 32-bit words (a sequence of scalars)."""
  key = ops.word(GOLDEN2)
  for word in words:
    key = fmix32(ops, key + word * ops.word(GOLDEN))
  return key


def row_keys(ops, words, batch, heads, rows):
  """Per-(batch, head, row) keys, `[batch, heads, rows]` (a few KB)."""
  key = seed_key(ops, words)
  bh = ops.reshape(ops.iota(batch * heads), (batch, heads, 1))
  k_bh = fmix32(ops, key + bh * ops.word(GOLDEN2))
  t = ops.reshape(ops.iota(rows), (1, 1, rows))
  return fmix32(ops, k_bh ^ (t * ops.word(GOLDEN)))


def keep_mask(ops, keys, cols, threshold):
  """The keep mask `[..., rows, cols]` (True: kept) of `row_keys` `keys`,
  global column indices `cols` and `keep_threshold(rate)`."""
  hashes = fmix32(ops, keys[..., None] + cols * ops.word(GOLDEN))
  return ops.srl(hashes, 32 - KEEP_BITS) >= threshold
