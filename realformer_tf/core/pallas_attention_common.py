"""Configuration and tile math the fused residual-attention kernels share, so
the forward and backward passes cannot drift apart. Imports without jax.
"""
import dataclasses
import math
import types

import numpy as np

try:
  import jax
  from jax import lax
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import triton as plgpu
  import jax.numpy as jnp
  HAVE_PALLAS = True
except ImportError:  # jax absent, or a jax without Pallas.
  jax = lax = pl = plgpu = jnp = None
  HAVE_PALLAS = False

from realformer_tf.core import dropout_hash  # pylint: disable=g-import-not-at-top

# A finite "minus infinity" for padded key columns (exp2 gives exactly 0, and
# no NaN as -inf - -inf would); jax's reference flash attention's value.
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)
LOG2_E = math.log2(math.e)

# `dropout_hash`'s ops on int32 bit patterns, so the same code lowers to
# Triton, interpret mode and plain XLA without unsigned types.
JNP_HASH_OPS = types.SimpleNamespace(
    word=lambda value: np.int32(np.uint32(value).view(np.int32)),
    srl=lambda x, bits: lax.shift_right_logical(x, jnp.full_like(x, bits)),
    iota=lambda n: jnp.arange(n, dtype=jnp.int32),
    reshape=lambda x, shape: jnp.reshape(x, shape))


def compiler_params(num_warps, num_stages):
  """Triton compiler parameters under the name this jax version uses."""
  cls = getattr(plgpu, "CompilerParams", None)
  if cls is None:  # jax < 0.6 named it TritonCompilerParams.
    cls = plgpu.TritonCompilerParams
  return cls(num_warps=num_warps, num_stages=num_stages)


@dataclasses.dataclass(frozen=True)
class Config:
  """Static description of one fused attention call (hashable: a jit key).

  `scale` is 1/sqrt of the real head size; `seq_q`/`seq_k` the real lengths
  (rows and columns past them are padding); `bias_kind` None, "row" (`[B or
  1, S]`) or "full" (`[B or 1, T, S]`); `bias_batched`: a batch dimension
  larger than 1. The `bwd_` fields are the backward pass's tiles and
  Triton parameters.
  """
  mode: str
  layer_index: int
  scale: float
  seq_q: int
  seq_k: int
  block_q: int
  block_k: int
  bwd_block_q: int
  bwd_block_k: int
  bias_kind: str | None
  bias_batched: bool
  has_prev: bool
  dropout_rate: float
  score_dtype: str
  interpret: bool
  num_warps: int = 4
  num_stages: int = 2
  bwd_num_warps: int = 4
  bwd_num_stages: int = 2

  @property
  def logit_scale(self):
    """Factor from the stored score sum to the logits (Eq. 5, "mean")."""
    return 1.0 / (self.layer_index + 1) if self.mode == "mean" else 1.0

  @property
  def keep_threshold(self):
    """Top-24-bit hash values below this are dropped."""
    return dropout_hash.keep_threshold(self.dropout_rate)


def _seed_words(seed):
  """The seed as a flat int32 vector (bit patterns kept for unsigned)."""
  seed = jnp.ravel(jnp.asarray(seed))
  if not jnp.issubdtype(seed.dtype, jnp.integer):
    raise ValueError(f"seed must be integer, got {seed.dtype}")
  if seed.dtype == jnp.uint32:
    return lax.bitcast_convert_type(seed, jnp.int32)
  return seed.astype(jnp.int32)


def row_keys(seed, batch, heads, rows):
  """Per-(batch, head, row) dropout keys, `[batch, heads, rows]` int32,
  computed by XLA outside the kernels. Every word of `seed` (an integer
  scalar or small vector, e.g. a `SeedGenerator`'s uint32[2]) is folded in.
  """
  words = _seed_words(seed)
  return dropout_hash.row_keys(
      JNP_HASH_OPS, [words[i] for i in range(words.shape[0])], batch, heads,
      rows)


def dropout_keep_mask(seed, batch, heads, seq_q, seq_k, rate):
  """The kernels' dropout keep mask, `[batch, heads, seq_q, seq_k]` bool, in
  plain jnp: which probabilities a given seed drops."""
  keys = row_keys(seed, batch, heads, seq_q)
  cols = jnp.arange(seq_k, dtype=jnp.int32)
  return dropout_hash.keep_mask(JNP_HASH_OPS, keys, cols,
                                dropout_hash.keep_threshold(rate))


def load_bias(cfg, bias_ref, q_index, k_index):
  """The float32 bias tile (`[rows, cols]`, or `[1, cols]` for a "row" bias)
  at indexers `q_index, k_index` of this program's block, or None."""
  if cfg.bias_kind == "row":
    return bias_ref[k_index].astype(jnp.float32)[None, :]
  if cfg.bias_kind == "full":
    return bias_ref[q_index, k_index].astype(jnp.float32)
  return None


def bias_spec(cfg, rows, cols, tile):
  """BlockSpec of the padded bias for a `(tile, batch, head)` grid; `tile`
  maps the grid's first index to the (row, column) block indices."""
  def batch_index(b):
    return b if cfg.bias_batched else 0

  if cfg.bias_kind == "row":
    return pl.BlockSpec(
        (None, cols), lambda i, b, n: (batch_index(b), tile(i)[1]))
  return pl.BlockSpec((None, rows, cols),
                      lambda i, b, n: (batch_index(b),) + tile(i))


def bias_and_keys(cfg, bias, keys, rows, cols, tile, keys_spec):
  """The optional inputs every kernel reads after its fixed ones, in order:
  the padded bias (if `cfg` has one) and the dropout row keys (if `cfg`
  drops), with their BlockSpecs: `([inputs], [specs])`. `rows, cols, tile`
  as `bias_spec`'s; `keys_spec`: the keys' BlockSpec."""
  inputs, specs = [], []
  if cfg.bias_kind:
    inputs.append(bias)
    specs.append(bias_spec(cfg, rows, cols, tile))
  if cfg.dropout_rate:
    inputs.append(keys)
    specs.append(keys_spec)
  return inputs, specs


def logits2(cfg, s, bias, start_k):
  """Base-2 logits (the kernels use exp2) of score tile `s` at key offset
  `start_k`: scaled for "mean", plus the bias; padded columns masked."""
  logits = s * cfg.logit_scale if cfg.logit_scale != 1.0 else s
  if bias is not None:
    logits = logits + bias
  logits = logits * LOG2_E
  if cfg.seq_k % max(cfg.block_k, cfg.bwd_block_k):
    col = start_k + lax.broadcasted_iota(jnp.int32, s.shape, 1)
    logits = jnp.where(col < cfg.seq_k, logits, MASK_VALUE)
  return logits


def dropout_keep(cfg, keys, start_k, cols):
  """Keep mask of a tile (row keys, global key offset start_k), or None."""
  if cfg.dropout_rate == 0.0:
    return None
  col = start_k + lax.iota(jnp.int32, cols)
  return dropout_hash.keep_mask(JNP_HASH_OPS, keys, col, cfg.keep_threshold)


def apply_dropout(cfg, x, keep):
  """Zeroes dropped entries of tile `x` and scales kept ones by 1/(1-rate)."""
  if keep is None:
    return x
  return jnp.where(keep, x * (1.0 / (1.0 - cfg.dropout_rate)), 0.0)


def dot(a, b, *, trans_a=False, trans_b=False):
  """Tile matmul with float32 accumulation; exact (no TF32) for float32."""
  precision = (lax.Precision.HIGHEST if a.dtype == jnp.float32
               else None)
  return plgpu.dot(a, b, trans_a=trans_a, trans_b=trans_b,
                   precision=precision)
