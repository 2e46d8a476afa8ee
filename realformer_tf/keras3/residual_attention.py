"""Keras 3 multi-head attention with RealFormer's residual attention scores.

The Keras 3 face of `layers.residual_attention`: `core.attention`'s Eq. 5 on
`keras.ops`, or on a JAX GPU the fused Pallas kernel. The mask (padding,
causal, Keras' implicit masks) enters the softmax only.
"""

import keras
from keras import ops
import numpy as np
# The helper `keras.layers.MultiHeadAttention.call` itself uses to read
# Keras' implicit (`mask_zero`) masks; Keras exports no public accessor.
from keras.src.backend.common import masking as keras_masking

from realformer_tf.core import arguments
from realformer_tf.core import attention as core_attention
from realformer_tf.core import options
from realformer_tf.core import pallas_attention
from realformer_tf.keras3 import hashed_dropout

RESIDUAL_MODES = options.RESIDUAL_MODES  # Public: realformer_tf.keras3.
def resolve_score_dtype(score_dtype, compute_dtype):
  """The dtype name of the running score sum for a layer computing in `compute_dtype`."""
  return options.resolve_score_dtype(
      score_dtype, keras.backend.standardize_dtype(compute_dtype))


def attention_bias_from_mask(mask, dtype):
  """0/1 (or bool) attention mask, 1 = attend -> additive bias of `dtype`."""
  dtype = keras.backend.standardize_dtype(dtype)
  return core_attention.mask_bias(ops, mask, dtype, options.mask_adder(dtype))


def uses_pallas(implementation, wants_probs_or_cache=False):
  """Whether `attention_implementation` runs the fused kernel in this call:
  "pallas" always, "auto" on a JAX GPU; neither for probabilities or a
  cache, which the kernel does not produce or take."""
  if implementation == "reference" or wants_probs_or_cache:
    return False
  if implementation == "pallas":
    return True
  return (keras.backend.backend() == "jax" and pallas_attention.available()
          and pallas_attention.jax.default_backend() == "gpu")


def check_attention_implementation(value):
  """"pallas" needs the JAX backend with Pallas."""
  if value == "pallas" and (keras.backend.backend() != "jax" or
                            not pallas_attention.available()):
    raise ValueError(
        "attention_implementation='pallas' needs the JAX backend with "
        f"Pallas; the Keras backend is {keras.backend.backend()!r}. Use "
        "'auto' or 'reference'.")


def _array_to_tensor(x):
  return ops.convert_to_tensor(x) if isinstance(x, np.ndarray) else x


# The keywords `keras.layers.Layer.__init__` takes (with two it pops).
LAYER_KEYWORDS = arguments.keyword_names(keras.layers.Layer) + (
    "input_dim", "input_shape")
_MHA_KEYWORDS = arguments.keyword_names(
    keras.layers.MultiHeadAttention) + LAYER_KEYWORDS

def check_arguments(layer, **values):
  """`arguments.check` naming `layer`'s class."""
  arguments.check(type(layer).__name__, **values)


def refuse_unknown(layer, kwargs, base=LAYER_KEYWORDS):
  """`arguments.refuse_unknown` for `layer`'s constructor, pointing Model
  Garden's names to keras-hub's."""
  arguments.refuse_unknown(type(layer).__name__, kwargs, base,
                           arguments.keyword_names(type(layer)),
                           arguments.MODEL_GARDEN_NAMES)


class KeepsArgumentDtypes:
  """Layer mixin: Keras 3 does not cast this layer's arguments on call.

  Under a mixed policy Keras would round the float32 running score sum to
  the compute dtype; `call` casts its arguments itself (the flag is the
  one Keras' `Hashing` layer uses). List it before the Keras base class.
  """

  def __call__(self, *args, **kwargs):
    object.__setattr__(self, "_convert_input_args", False)
    args, kwargs = keras.tree.map_structure(_array_to_tensor, (args, kwargs))
    return super().__call__(*args, **kwargs)


def to_dtype_if_float(x, dtype):
  """`x` as a backend tensor; floating `x` cast to `dtype` (None stays None)."""
  if x is None:
    return None
  x = ops.convert_to_tensor(x)
  if (keras.backend.is_float_dtype(x.dtype) and
      keras.backend.standardize_dtype(x.dtype) != dtype):
    x = ops.cast(x, dtype)
  return x


@keras.saving.register_keras_serializable(package="realformer_tf")
class ResidualMultiHeadAttention(KeepsArgumentDtypes,
                                 keras.layers.MultiHeadAttention):
  """`keras.layers.MultiHeadAttention` that takes and returns pre-softmax scores.

  Weights keep Keras' names, so a `MultiHeadAttention`'s weights load as
  they are. The cache is keras-hub's `CachedMultiHeadAttention`'s.

  Args:
    num_heads, key_dim, residual_attention, layer_index, score_dtype: as
      `realformer_tf.layers.ResidualMultiHeadAttention`.
    attention_implementation: "auto" (the fused Pallas kernel on a JAX GPU,
      else the `keras.ops` reference), "reference" or "pallas" (JAX only).
    **kwargs: `keras.layers.MultiHeadAttention`'s, but not `attention_axes`
      (the sequence axis only) nor `flash_attention` (it returns no scores).

  Call arguments: Keras' (`query`, `value` (None: self-attention), `key`,
  `attention_mask` `[batch, from_len, to_len]` 1 = attend, `use_causal_mask`,
  `training`, `query_mask`, `value_mask`, `key_mask`), and:
    prev_scores: Optional `[batch, num_heads, from_len, to_len]` running sum
      of the previous layer.
    cache: Optional keras-hub cache `[batch, 2, max_len, num_heads, key_dim]`,
      which the scores span; this call's keys and values are written at
      `cache_update_index` (int or int tensor), query row `i` being position
      `cache_update_index + i` for `use_causal_mask`.
    return_attention_probs: Also return the softmax probabilities.

  Returns:
    `(output, scores)`, then `probs` with `return_attention_probs`, then the
    new cache with `cache`. `output` is `[batch, from_len, dim]`, `scores` the
    unmasked running sum (of `score_dtype`), `probs` `[batch, num_heads,
    from_len, to_len]`.
  """

  def __init__(self, num_heads, key_dim, residual_attention="sum",
               layer_index=0, score_dtype="auto",
               attention_implementation="auto", **kwargs):
    axes = kwargs.get("attention_axes")
    if isinstance(axes, int):
      axes = (axes,)
    if axes is not None and tuple(axes) != (1,):
      # The running sum has one attention axis, the sequence.
      raise ValueError(
          f"ResidualMultiHeadAttention attends over the sequence axis only; "
          f"attention_axes must be None, got {kwargs['attention_axes']!r}.")
    if kwargs.pop("flash_attention", None):
      raise ValueError(
          "ResidualMultiHeadAttention: flash_attention is not supported: "
          "flash kernels return no attention scores to pass on.")
    # Set after the base __init__, which refuses dropout under a global
    # `enable_flash_attention()` this layer never uses.
    dropout = kwargs.pop("dropout", 0.0)
    refuse_unknown(self, kwargs, _MHA_KEYWORDS)
    check_arguments(self, residual_attention=residual_attention,
                    layer_index=layer_index, score_dtype=score_dtype,
                    attention_implementation=attention_implementation)
    super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
    self._flash_attention = False
    self._dropout = dropout
    check_attention_implementation(attention_implementation)

    # === Config ===
    self.residual_attention = residual_attention
    self.layer_index = layer_index
    self.score_dtype = score_dtype
    self.attention_implementation = attention_implementation

  def get_config(self):
    return {
        **super().get_config(),
        "residual_attention": self.residual_attention,
        "layer_index": self.layer_index,
        "score_dtype": self.score_dtype,
        "attention_implementation": self.attention_implementation,
    }

  def build(self, query_shape, value_shape=None, key_shape=None):
    if len(query_shape) != 3:
      raise ValueError(
          f"{self.name}: query must have rank 3 [batch, from_len, dim], got "
          f"shape {tuple(query_shape)}.")
    super().build(query_shape,
                  query_shape if value_shape is None else value_shape,
                  key_shape)

  def _check_arguments(self, query, value, key, prev_scores, attention_mask,
                       cache, cache_update_index, use_causal_mask, value_mask,
                       key_mask):
    """Raises a ValueError naming the argument and its shape; shapes only."""
    for name, x, rank in (("query", query, 3), ("value", value, 3),
                          ("key", key, 3), ("prev_scores", prev_scores, 4),
                          ("attention_mask", attention_mask, 3),
                          ("cache", cache, 5)):
      if x is not None and len(x.shape) != rank:
        raise ValueError(
            f"{self.name}: {name} must have rank {rank}, got shape "
            f"{tuple(x.shape)}.")
    if cache is None:
      if cache_update_index is not None:
        raise ValueError(
            f"{self.name}: cache_update_index={cache_update_index!r} was "
            "given without a cache.")
      return
    if (tuple(cache.shape[1:2]) != (2,) or
        tuple(cache.shape[3:]) != (self._num_heads, self._key_dim)):
      raise ValueError(
          f"{self.name}: cache must have shape [batch, 2, max_len, "
          f"{self._num_heads}, {self._key_dim}] (keras-hub's "
          f"CachedMultiHeadAttention format), got {tuple(cache.shape)}.")
    if use_causal_mask and cache_update_index is None:
      raise ValueError(
          f"{self.name}: use_causal_mask with a cache needs "
          "cache_update_index (the position of the first query).")
    if self._sliding_window is not None:
      raise ValueError(
          f"{self.name}: sliding_window is not supported with a cache.")
    if value_mask is not None or key_mask is not None:
      raise ValueError(
          f"{self.name}: value_mask/key_mask cannot be used with a cache "
          "(they cover this call's keys, not the cache); pass "
          "attention_mask [batch, from_len, max_len] instead.")

  def _scores_shape(self, query_shape, to_len):
    return (query_shape[0], self._num_heads, query_shape[1], to_len)

  def _check_prev_scores(self, prev_scores, scores_shape):
    for got, want in zip(prev_scores.shape, scores_shape):
      if got is not None and want is not None and got != want:
        raise ValueError(
            f"{self.name}: prev_scores has shape {tuple(prev_scores.shape)}, "
            f"but this layer's scores have shape {tuple(scores_shape)} "
            "[batch, num_heads, from_len, to_len].")

  def call(self,
           query,
           value=None,
           key=None,
           *,
           prev_scores=None,
           attention_mask=None,
           use_causal_mask=False,
           cache=None,
           cache_update_index=None,
           training=None,
           return_attention_probs=False,
           query_mask=None,
           value_mask=None,
           key_mask=None):
    compute_dtype = keras.backend.standardize_dtype(self.compute_dtype)
    score_dtype = resolve_score_dtype(self.score_dtype, compute_dtype)
    self_attention = value is None
    # Keras' implicit masks, read and then cleared as the base class' call
    # does (its projections do not support masking).
    query_mask, value_mask, key_mask = (
        keras_masking.get_keras_mask(x) if m is None and x is not None else m
        for x, m in ((query, query_mask), (value, value_mask),
                     (key, key_mask)))
    for x in (query, value, key):
      if x is not None:
        keras_masking.set_keras_mask(x, None)
    query = to_dtype_if_float(query, compute_dtype)
    value = query if self_attention else to_dtype_if_float(value, compute_dtype)
    if self_attention and value_mask is None and cache is None:
      value_mask = query_mask
    key = value if key is None else to_dtype_if_float(key, compute_dtype)
    prev_scores = to_dtype_if_float(prev_scores, score_dtype)
    cache = to_dtype_if_float(cache, compute_dtype)
    if attention_mask is not None:
      attention_mask = ops.convert_to_tensor(attention_mask)
    self._check_arguments(query, value, key, prev_scores, attention_mask,
                          cache, cache_update_index, use_causal_mask,
                          value_mask, key_mask)
    # The base class' merge of all masks; with a cache the causal mask is
    # offset by the cache position, below.
    attention_mask = self._compute_attention_mask(
        query, value, query_mask=query_mask, value_mask=value_mask,
        key_mask=key_mask, attention_mask=attention_mask,
        use_causal_mask=use_causal_mask and cache is None)

    gate = self._gate_dense(query) if self._use_gate else None
    projected_query = self._query_dense(query)  # [B, T, N, H]
    if cache is None:
      projected_key = self._key_dense(key)          # [B, S, N, H]
      projected_value = self._value_dense(value)    # [B, S, N, H]
    else:
      projected_key, projected_value = cache[:, 0, ...], cache[:, 1, ...]
      if cache_update_index is not None:
        start = [0, cache_update_index, 0, 0]
        projected_key = ops.slice_update(projected_key, start,
                                         self._key_dense(key))
        projected_value = ops.slice_update(projected_value, start,
                                           self._value_dense(value))
        cache = ops.stack((projected_key, projected_value), axis=1)
      if use_causal_mask:
        causal = core_attention.causal_mask(
            ops, ops.shape(query)[1], ops.shape(projected_key)[1],
            cache_update_index)
        attention_mask = (causal if attention_mask is None else
                          ops.logical_and(attention_mask, causal))

    if prev_scores is not None:
      self._check_prev_scores(prev_scores, self._scores_shape(
          projected_query.shape, projected_key.shape[1]))
    bias = None
    if attention_mask is not None:
      # [B, T, S] -> [B, 1, T, S]; the mask never enters `scores`.
      bias = attention_bias_from_mask(ops.expand_dims(attention_mask, 1),
                                      score_dtype)
    # Symbolic dimensions (shape inference, export) take the reference.
    concrete = all(isinstance(d, int) for d in
                   tuple(projected_query.shape) + tuple(projected_key.shape))
    if concrete and uses_pallas(self.attention_implementation,
                                return_attention_probs or cache is not None):
      output, scores = self._fused_attention(
          projected_query, projected_key, projected_value, prev_scores, bias,
          score_dtype, training)
      probs = None
    else:
      dropout = lambda p: self._dropout_layer(p, training=training)
      if training and self._dropout and hashed_dropout.hashes_dropout():
        seed, rate = self._draw_seed(), self._dropout
        dropout = lambda p: hashed_dropout.hashed_dropout(p, seed, rate)
      output, scores, probs = core_attention.residual_dot_product_attention(
          ops, projected_query, projected_key, projected_value, prev_scores,
          bias, mode=self.residual_attention, layer_index=self.layer_index,
          score_dtype=score_dtype, dropout=dropout)
    if gate is not None:
      output = ops.multiply(output, gate)
    output = self._output_dense(output)
    if query_mask is not None:
      keras_masking.set_keras_mask(output, query_mask)
    outputs = (output, scores)
    if return_attention_probs:
      outputs += (probs,)
    if cache is not None:
      outputs += (cache,)
    return outputs

  def _draw_seed(self):
    """One dropout seed per call, for the kernel's and the reference's masks."""
    return keras.random.randint((), 0, 2**31 - 1, dtype="int32",
                                seed=self._dropout_layer.seed_generator)

  def _fused_attention(self, query, key, value, prev_scores, bias,
                       score_dtype, training):
    """`core.pallas_attention.fused_residual_attention`; on JAX the reference
    path draws the same seed and drops the same probabilities."""
    rate = self._dropout if training else 0.0
    seed = self._draw_seed() if rate else None
    return pallas_attention.fused_residual_attention(
        query, key, value, prev_scores, bias,
        mode=self.residual_attention, layer_index=self.layer_index,
        score_dtype=score_dtype, dropout_rate=rate, seed=seed)

  def compute_output_spec(self, query, value=None, key=None, *,
                          prev_scores=None, attention_mask=None,
                          use_causal_mask=False, cache=None,
                          cache_update_index=None, training=None,
                          return_attention_probs=False, query_mask=None,
                          value_mask=None, key_mask=None):
    del training, query_mask  # Unused.
    self._check_arguments(query, value, key, prev_scores, attention_mask,
                          cache, cache_update_index, use_causal_mask,
                          value_mask, key_mask)
    compute_dtype = keras.backend.standardize_dtype(self.compute_dtype)
    score_dtype = resolve_score_dtype(self.score_dtype, compute_dtype)
    value_shape = query.shape if value is None else value.shape
    output_shape = self.compute_output_shape(
        query.shape, value_shape, None if key is None else key.shape)
    to_len = value_shape[1] if cache is None else cache.shape[2]
    scores_shape = self._scores_shape(query.shape, to_len)
    if prev_scores is not None:
      self._check_prev_scores(prev_scores, scores_shape)
    outputs = (keras.KerasTensor(output_shape, dtype=compute_dtype),
               keras.KerasTensor(scores_shape, dtype=score_dtype))
    if return_attention_probs:
      outputs += (keras.KerasTensor(scores_shape, dtype=compute_dtype),)
    if cache is not None:
      outputs += (keras.KerasTensor(cache.shape, dtype=compute_dtype),)
    return outputs
