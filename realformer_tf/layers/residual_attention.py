"""Multi-head attention with RealFormer's residual attention scores.

RealFormer (He et al., 2020, https://arxiv.org/abs/2012.11747) adds one skip
edge to Post-LN BERT: each attention layer adds the previous layer's raw,
pre-softmax scores to its own, softmaxes the sum and hands the sum on:

    S_l = Q_l K_l^T / sqrt(d) + S_{l-1}
    P_l = softmax(S_l + mask)                 # "sum"  (paper Eq. 5)
    P_l = softmax(S_l / (l + 1) + mask)       # "mean" (deep models, > 24 layers)

The mask only enters the softmax; `S_l` is passed on unmasked, as in the
authors' TF1 code. `score_dtype` picks the dtype of `S_l` under mixed
precision: "float32" (default) keeps the sum over layers in float32, where it
neither loses precision nor overflows (float16 sums do); "compute" keeps it in
the policy's compute dtype (bfloat16 on TPU/GPU), which halves the bytes of
the score path (see the README for what that costs in accuracy). The softmax
itself runs in the compute dtype, as in plain attention, so the probabilities
kept for backprop cost no more memory than BERT's.
"""

import math
from typing import Tuple

import tensorflow as tf
import tf_keras

from official.nlp.modeling.layers import attention as mg_attention
from realformer_tf.layers import keras3_seam
# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import control_flow_util
# pylint: enable=g-direct-tensorflow-import

RESIDUAL_MODES = ("sum", "mean", "none")
SCORE_DTYPES = ("float32", "compute")

# Same additive mask value as Keras' Softmax for float32, so "none" matches
# tf_keras.layers.MultiHeadAttention bit for bit. float16 cannot hold it; there
# half its lowest value keeps `score + bias` finite for scores of either sign.
_MASK_ADDER = -1e9
_MASK_ADDER_FLOAT16 = -32752.0


def validate_residual_attention(value: str) -> str:
  if value not in RESIDUAL_MODES:
    raise ValueError(
        f"residual_attention must be one of {RESIDUAL_MODES}, got {value!r}.")
  return value


def validate_score_dtype(value: str) -> str:
  if value not in SCORE_DTYPES:
    raise ValueError(
        f"score_dtype must be one of {SCORE_DTYPES}, got {value!r}.")
  return value


def resolve_score_dtype(score_dtype: str, compute_dtype) -> tf.DType:
  """The dtype of the running score sum for a layer computing in `compute_dtype`."""
  if validate_score_dtype(score_dtype) == "float32":
    return tf.float32
  return tf.as_dtype(compute_dtype)


def attention_bias_from_mask(mask, dtype) -> tf.Tensor:
  """0/1 attention mask (1 = attend) -> additive bias of `dtype` (0 or very negative).

  The encoder builds it once per call at `[batch, 1, 1, to_len]` from the
  padding mask, instead of each layer turning a `[batch, from_len, to_len]`
  mask into a bias: under XLA the add then lands in the softmax fusion and
  reads `to_len` values per row instead of a full mask.
  """
  dtype = tf.as_dtype(dtype)
  adder = _MASK_ADDER_FLOAT16 if dtype == tf.float16 else _MASK_ADDER
  return (1.0 - tf.cast(mask, dtype)) * tf.constant(adder, dtype)


@tf.custom_gradient
def _scores_in_float32(query, key):
  """`query @ key^T` of two low-precision `[B, N, *, H]` tensors, as float32.

  One XLA dot with low-precision operands and a float32 result (HLO
  `dot(bf16, bf16) -> f32`): the float32 running sum is then added to the
  dot's own output type, which XLA's GPU GEMM rewriter can fold into the GEMM
  as its C operand (cuBLAS `beta = 1`); `cast(einsum(...))` instead writes
  the bfloat16 scores and converts them in a separate elementwise pass. Only
  XLA has a kernel for this op (TF's CPU/GPU kernels reject a float32 `Tout`
  for bfloat16 inputs), so callers use it inside XLA clusters only. The
  gradient casts the float32 score gradient to the operands' dtype first,
  exactly what `cast(einsum(...))`'s gradient does.
  """
  scores = tf.raw_ops.BatchMatMulV3(x=query, y=key, Tout=tf.float32,
                                    adj_y=True)

  def grad(d_scores):
    d_scores = tf.cast(d_scores, query.dtype)
    return (tf.matmul(d_scores, key),
            tf.matmul(d_scores, query, transpose_a=True))

  return scores, grad


def _in_xla_context() -> bool:
  return control_flow_util.GraphOrParentsInXlaContext(
      tf.compat.v1.get_default_graph())


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class ResidualMultiHeadAttention(tf_keras.layers.MultiHeadAttention):
  """`MultiHeadAttention` that takes and returns pre-softmax attention scores.

  Weights keep Keras' standard names (`query`, `key`, `value`,
  `attention_output`), so checkpoints of a `MultiHeadAttention` load as is.

  Args:
    num_heads: Number of attention heads.
    key_dim: Size of each head for query and key.
    residual_attention: "sum" (RealFormer), "mean" (softmax over the running
      mean `S_l / (layer_index + 1)`; the running sum is still returned), or
      "none" (plain attention; the layer's own scores are still returned).
    layer_index: 0-based depth of this layer in its stack; used by "mean".
    score_dtype: dtype of the running score sum under mixed precision:
      "float32" or "compute" (the policy's compute dtype). Same result under
      a float32 policy.
    **kwargs: Any other `tf_keras.layers.MultiHeadAttention` argument, except
      `attention_axes` (only the sequence axis is supported).

  `call` takes Keras' arguments except `return_attention_scores` (rejected:
  the layer always returns its running scores, and the probabilities with
  `return_attention_probs`), and ragged inputs. The attention itself is
  `_compute_residual_attention`, a method of its own name: Keras'
  `_compute_attention(query, key, value, attention_mask, training)` has no
  place for the previous scores.

  Call arguments:
    query: `[batch, from_len, dim]`.
    value: Optional `[batch, to_len, dim]`; None means self-attention
      (`query`), where under XLA Q, K and V come from one matmul: the three
      kernels are concatenated at call time, so weights keep their names.
    key: Optional `[batch, to_len, dim]`; defaults to `value`.
    attention_mask: Optional `[batch, from_len, to_len]`, 1 = attend.
    prev_scores: Optional `[batch, num_heads, from_len, to_len]` running sum
      from the previous layer (`None` for the first layer).
    training: Python bool, whether dropout is active.
    return_attention_probs: Also return the softmax probabilities.
    attention_bias: Optional additive bias broadcastable to `[batch,
      num_heads, from_len, to_len]` (e.g. `attention_bias_from_mask` of a
      `[batch, 1, 1, to_len]` mask, built once for a whole stack); added to
      the logits like the mask, never to `scores`.
    use_causal_mask: Also mask keys after each query (decoder
      self-attention). Like the padding mask, the causal mask enters the
      softmax only: the returned running sum stays unmasked.
    cache: Incremental decoding: a dict with "key" and "value" `[batch,
      cached_len, num_heads, key_dim]` projections of the earlier positions
      (Model Garden's `CachedAttention` format, what `Seq2SeqTransformer`'s
      beam search carries). This step's keys and values are appended (or,
      with `decode_loop_step`, written at that index) and the dict is updated
      in place. The residual scores need no cache across steps: row `t` of
      `S_l` depends only on row `t` of `S_{l-1}`, so a step passes a
      `[batch, num_heads, 1, t + 1]` score row from layer to layer (with
      `decode_loop_step`: `[batch, num_heads, 1, max_len]`, the columns after
      `t` masked).
    decode_loop_step: With `cache`, the step index for padded (fixed-length,
      TPU) decoding; None appends to the cache.

  Returns:
    `(output, scores)`, or `(output, scores, probs)`: `output` is
    `[batch, from_len, dim]`; `scores` is the unmasked running sum
    `[batch, num_heads, from_len, to_len]` (float32, or the compute dtype with
    `score_dtype="compute"`) to hand to the next layer.

  Example:

  >>> layer = ResidualMultiHeadAttention(num_heads=2, key_dim=8)
  >>> x = tf.random.normal([3, 5, 16])
  >>> out, scores = layer(x, x)
  >>> out, scores = layer(x, x, prev_scores=scores)
  >>> out.shape, scores.shape
  (TensorShape([3, 5, 16]), TensorShape([3, 2, 5, 5]))
  """

  def __init__(self,
               num_heads: int,
               key_dim: int,
               residual_attention: str = "sum",
               layer_index: int = 0,
               score_dtype: str = "float32",
               **kwargs):
    axes = kwargs.get("attention_axes")
    if isinstance(axes, int):
      axes = (axes,)
    if axes is not None and tuple(axes) != (1,):
      # The running sum is [batch, heads, from_len, to_len]: one attention
      # axis, the sequence (what the base class resolves None to for rank-3
      # inputs, and writes into its config). The base class would silently
      # build equations for others.
      raise ValueError(
          f"ResidualMultiHeadAttention attends over the sequence axis only; "
          f"attention_axes must be None, got {kwargs['attention_axes']!r}.")
    super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
    self._residual_attention = validate_residual_attention(residual_attention)
    self._score_dtype = validate_score_dtype(score_dtype)
    if layer_index < 0:
      raise ValueError(f"layer_index must be >= 0, got {layer_index}.")
    self._layer_index = int(layer_index)

  def __call__(self, *args, **kwargs):
    keras3_seam.reject_keras3_arguments(self, args, kwargs)
    return super().__call__(*args, **kwargs)

  @property
  def residual_attention(self) -> str:
    return self._residual_attention

  @property
  def score_dtype(self) -> str:
    return self._score_dtype

  def get_config(self):
    config = super().get_config()
    config.update(residual_attention=self._residual_attention,
                  layer_index=self._layer_index,
                  score_dtype=self._score_dtype)
    return config

  def call(self,
           query,
           value=None,
           key=None,
           attention_mask=None,
           prev_scores=None,
           training=None,
           return_attention_probs=False,
           attention_bias=None,
           use_causal_mask=False,
           cache=None,
           decode_loop_step=None,
           return_attention_scores=False):
    if return_attention_scores:
      raise ValueError(
          f"{self.name}: return_attention_scores is not supported: the layer "
          "returns (output, scores) always, where scores is the pre-softmax "
          "running sum; pass return_attention_probs=True for the softmax "
          "probabilities.")
    if isinstance(query, tf.RaggedTensor) or isinstance(value, tf.RaggedTensor):
      raise ValueError(f"{self.name}: ragged inputs are not supported.")
    if tf.TensorShape(query.shape).rank != 3:
      raise ValueError(
          f"{self.name}: query must have rank 3 [batch, from_len, dim], got "
          f"shape {query.shape}.")
    # `value is query` only survives without mixed precision: Keras casts
    # the first argument alone.
    self_attention = (value is None or value is query) and key is None
    if value is None:
      value = query
    if not self._built_from_signature:
      self._build_from_signature(query=query, value=value, key=key)
    if key is None:
      key = value
    if (attention_mask is not None and
        tf.TensorShape(attention_mask.shape).rank != 3):
      raise ValueError(
          f"{self.name}: attention_mask must have rank 3 "
          f"[batch, from_len, to_len], got shape {attention_mask.shape}.")
    if (attention_bias is not None and
        tf.TensorShape(attention_bias.shape).rank != 4):
      raise ValueError(
          f"{self.name}: attention_bias must have rank 4 (broadcastable to "
          f"[batch, num_heads, from_len, to_len]), got shape "
          f"{attention_bias.shape}.")
    score_dtype = resolve_score_dtype(self._score_dtype, self.compute_dtype)
    # With a cache the keys start before the queries: causal mask below.
    attention_mask = self._compute_attention_mask(
        query, value, key=key, attention_mask=attention_mask,
        use_causal_mask=use_causal_mask and cache is None)

    dense = (self._query_dense, self._key_dense, self._value_dense)
    # Under XLA only: there the kernels' concat and the output's split fuse
    # into their neighbours; in TF they are copies (weight-sized buffers).
    # The first call builds the three layers (their weights' names).
    if (self_attention and self._activity_regularizer is None and
        _in_xla_context() and all(layer.built for layer in dense)):
      query, key, value = self._project_self_attention(query)
    else:
      query = self._query_dense(query)    # [B, T, N, H]
      key = self._key_dense(key)          # [B, S, N, H]
      value = self._value_dense(value)    # [B, S, N, H]
    if cache is not None:
      # Model Garden's own cache update (a plain function of its arguments):
      # official/nlp/modeling/layers/attention.py, CachedAttention.
      key, value = mg_attention.CachedAttention._update_cache(  # pylint: disable=protected-access
          self, key, value, cache, decode_loop_step)
      if use_causal_mask:
        attention_mask = _offset_causal_mask(query, key, attention_mask,
                                             decode_loop_step)
    biases = []
    if attention_mask is not None:
      # [B, T, S] -> [B, 1, T, S]; the mask never enters `scores`.
      biases.append(attention_bias_from_mask(
          tf.expand_dims(attention_mask, axis=1), score_dtype))
    if attention_bias is not None:
      biases.append(tf.cast(attention_bias, score_dtype))
    bias = tf.add_n(biases) if biases else None
    output, scores, probs = self._compute_residual_attention(
        query, key, value, bias, prev_scores=prev_scores, training=training)
    output = self._output_dense(output)
    if return_attention_probs:
      return output, scores, probs
    return output, scores

  def _project_self_attention(self, inputs):
    """Q, K and V `[B, T, N, H]` of `inputs` from one einsum (under XLA).

    The standard `query`/`key`/`value` kernels and biases are concatenated
    along the head size at call time: one `[dim, N, 2 * key_dim + value_dim]`
    GEMM (and one for each gradient) instead of three, and checkpoints keep
    their names. Same sums as three einsums.
    """
    dense = (self._query_dense, self._key_dense, self._value_dense)
    qkv = tf.einsum(self._query_dense.equation, inputs,
                    tf.concat([layer.kernel for layer in dense], axis=-1))
    if self._use_bias:
      qkv += tf.concat([layer.bias for layer in dense], axis=-1)
    sizes = [self._key_dim, self._key_dim, self._value_dim]
    return tf.split(qkv, sizes, axis=-1)

  def _compute_residual_attention(
      self,
      query,
      key,
      value,
      attention_bias=None,
      prev_scores=None,
      training=None) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Residual dot-product attention on projected Q, K, V.

    Returns `(context, scores, probs)`; see the class docstring for why this
    is not `_compute_attention`.

    The form is chosen for XLA (checked on the optimized HLO, see
    benchmarks/README.md): `1/sqrt(d)` scales the `[B, T, N, H]` query (fused
    into the query projection) rather than the `[B, N, T, S]` scores; the
    score dot produces the score dtype itself, so `S_{l-1}` is added in the
    dot's own dtype (a GEMM addend on GPU); the mask arrives as an additive
    bias, and the bias add, the "mean" division, the cast and the softmax are
    elementwise/reduce ops on `S_l` that XLA fuses into one softmax fusion.
    """
    score_dtype = resolve_score_dtype(self._score_dtype, self.compute_dtype)
    query = tf.multiply(query, 1.0 / math.sqrt(float(self._key_dim)))
    if score_dtype == query.dtype:
      scores = tf.einsum(self._dot_product_equation, key, query)  # [B, N, T, S]
    elif _in_xla_context():
      scores = _scores_in_float32(tf.transpose(query, [0, 2, 1, 3]),
                                  tf.transpose(key, [0, 2, 1, 3]))
    else:
      scores = tf.cast(tf.einsum(self._dot_product_equation, key, query),
                       score_dtype)
    if prev_scores is not None and self._residual_attention != "none":
      self._check_prev_scores(prev_scores, scores)
      scores += tf.cast(prev_scores, score_dtype)
    logits = scores
    if self._residual_attention == "mean":
      logits = scores / float(self._layer_index + 1)
    if attention_bias is not None:
      logits += attention_bias
    if self.compute_dtype == "float16" and score_dtype == tf.float32:
      # The running sum can exceed float16's range; softmax is
      # shift-invariant, so shift by the row max in float32 first.
      logits -= tf.stop_gradient(tf.reduce_max(logits, axis=-1, keepdims=True))
    # Softmax in the compute dtype (what backprop keeps), like plain
    # MultiHeadAttention: float32 probabilities would double that memory.
    probs = tf.nn.softmax(tf.cast(logits, self.compute_dtype), axis=-1)
    # Dropping whole tokens to attend to, as in BERT.
    probs_dropout = self._dropout_layer(probs, training=training)
    context = tf.einsum(self._combine_equation, probs_dropout, value)
    return context, scores, probs

  def _check_prev_scores(self, prev_scores, scores):
    """Raises a ValueError naming both shapes when they cannot be added."""
    prev_shape, shape = tf.TensorShape(prev_scores.shape), scores.shape
    if prev_shape.rank is not None and prev_shape.rank != 4:
      raise ValueError(
          f"{self.name}: prev_scores must have rank 4 [batch, num_heads, "
          f"from_len, to_len], got shape {prev_shape}.")
    if prev_shape.rank is not None and not prev_shape.is_compatible_with(shape):
      raise ValueError(
          f"{self.name}: prev_scores has shape {prev_shape}, but this layer's "
          f"scores have shape {shape} [batch, num_heads, from_len, to_len].")


def _offset_causal_mask(query, key, attention_mask, decode_loop_step):
  """Causal mask for queries that start after the cached keys.

  Query row `i` is position `offset + i`, where `offset` is
  `decode_loop_step` (padded decoding) or the number of cached keys; it may
  attend to keys `j <= offset + i`. Keras' `_compute_causal_mask` assumes
  `offset = 0`.

  Args:
    query: Projected queries `[B, T, N, H]`.
    key: Projected keys including the cache, `[B, S, N, H]`.
    attention_mask: None or `[B, T, S]`, 1 = attend.
    decode_loop_step: None or the scalar step index.

  Returns:
    A boolean `[B or 1, T, S]` mask, AND-ed with `attention_mask`.
  """
  query_len, key_len = tf.shape(query)[1], tf.shape(key)[1]
  if decode_loop_step is None:
    offset = key_len - query_len
  else:
    offset = tf.cast(decode_loop_step, tf.int32)
  causal = tf.linalg.band_part(tf.ones((1, query_len, key_len), tf.bool), -1,
                               offset)
  if attention_mask is None:
    return causal
  return tf.cast(attention_mask, tf.bool) & causal
