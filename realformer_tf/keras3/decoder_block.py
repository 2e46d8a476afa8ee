"""RealFormer decoder block for Keras 3 (TensorFlow, JAX and PyTorch backends).

The Keras 3 face of `realformer_tf.layers.realformer_decoder_block`: same
constructor arguments, sub-layer attribute names and semantics. Causal
self-attention and encoder-decoder (cross) attention each carry their own
residual score path (He et al., 2020, Section 3); the masks enter the softmax
only, the running sums are passed on unmasked.

Incremental decoding uses keras-hub's key/value cache format (`[batch, 2,
max_len, num_heads, key_dim]`, updated functionally at `cache_update_index`,
as `keras_hub.layers.CachedMultiHeadAttention`), so a causal LM built from
these blocks runs keras-hub's `generate()` and samplers unchanged.
"""

import keras
from keras import ops

from realformer_tf.keras3 import residual_attention as ra


def _clone_initializer(initializer):
  """A fresh initializer of the same config, one per weight (as keras-hub's
  `transformer_layer_utils.clone_initializer`): a seeded initializer object
  shared between layers would draw the same values for each."""
  initializer = keras.initializers.get(initializer)
  return initializer.__class__.from_config(initializer.get_config())


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBlock(ra.KeepsArgumentDtypes, keras.layers.Layer):
  """RealFormer decoder block: `(hidden, self_scores, cross_scores)` in and out.

  Causal self-attention on one residual path, encoder-decoder attention on
  another, then the feed-forward layer; Post-LN (default) or Pre-LN
  (`norm_first=True`). Constructor arguments and sub-layer attribute names
  (`self_attention`, `self_attention_layer_norm`, `encdec_attention`,
  `encdec_attention_layer_norm`, `intermediate_dense`, `output_dense`,
  `output_layer_norm`) are those of the tf_keras
  `realformer_tf.layers.realformer_decoder_block.RealFormerDecoderBlock`
  (itself Model Garden's `TransformerDecoderBlock`'s). keras-hub's
  `TransformerDecoder` cannot be reused: its attention neither takes the
  previous scores nor returns its own.

  With `cross_attention=False` the block has no encoder-decoder attention (a
  GPT-style block for decoder-only language models) and returns `(hidden,
  self_scores)`: a Keras 3 functional graph cannot carry a None output
  (keras/src/ops/node.py rejects it), so there is no third value, as
  keras-hub's `TransformerDecoder` also returns what its configuration has.

  Keras 3 would cast every floating argument to the compute dtype at the
  block's boundary under a mixed policy, rounding the float32 running sums;
  `KeepsArgumentDtypes` (see `residual_attention`) switches that off and the
  block casts `hidden` and `memory` itself.

  Args:
    num_attention_heads: Number of attention heads; must divide the width.
    intermediate_size: Width of the feed-forward layer.
    intermediate_activation: Activation of the feed-forward layer.
    dropout_rate: Dropout after each attention projection and the
      feed-forward output.
    attention_dropout_rate: Dropout on attention probabilities.
    use_bias: Bias in the attention projections.
    norm_first: Pre-LN if True, Post-LN if False.
    norm_epsilon: LayerNorm epsilon.
    intermediate_dropout: Dropout after the feed-forward activation.
    kernel_initializer: Initializer of the dense kernels.
    attention_initializer: Initializer of the attention kernels; default
      `kernel_initializer`.
    residual_attention: "sum", "mean" or "none", for both paths; see
      `ResidualMultiHeadAttention`.
    self_residual: Whether the self-attention path is residual.
    cross_residual: Whether the encoder-decoder attention path is residual.
    cross_attention: Whether the block has encoder-decoder attention.
    layer_index: 0-based depth of the block; used by "mean".
    score_dtype: "float32" (default) or "compute": dtype of the running
      score sums under mixed precision; see `ResidualMultiHeadAttention`.
    **kwargs: Base `Layer` arguments (name, dtype, ...).

  Call arguments:
    hidden: `[batch, target_len, width]`; with `cache`, the new positions.
    memory: Encoder output `[batch, source_len, memory_width]` (only with
      `cross_attention=True`).
    self_scores: The self-attention path's running sum `[batch, heads,
      target_len, keys]`, None in the first block.
    cross_scores: The cross-attention path's running sum `[batch, heads,
      target_len, source_len]`, None in the first block.
    self_attention_mask: Optional `[batch, target_len, keys]` (or
      `[batch, 1, keys]`), 1 = attend (e.g. target padding); the causal mask
      is always applied.
    cross_attention_mask: Optional `[batch, target_len, source_len]` (or
      `[batch, 1, source_len]`), source padding.
    cache: Incremental decoding: the self-attention's key/value cache
      `[batch, 2, max_len, heads, key_dim]` (keras-hub's format); keys are
      then the `max_len` cache positions and the causal mask lets query `i`
      see positions `<= cache_update_index + i`. The score paths need no
      cache: row `t` of `S_l` depends only on row `t` of `S_{l-1}`, so a step
      hands its `[batch, heads, new_len, max_len]` rows on. Encoder-decoder
      keys and values are recomputed from `memory` at each step.
    cache_update_index: With `cache`: the position of `hidden`'s first row,
      where its keys and values are written into the cache.
    training: Whether dropout is active.
    return_attention_probs: Also return the softmax probabilities.

  Returns:
    `(hidden, self_scores, cross_scores)` (`(hidden, self_scores)` without
    cross-attention), then `self_probs` (and `cross_probs`) with
    `return_attention_probs`, then the updated cache with `cache`.

  Example:

  >>> block = RealFormerDecoderBlock(num_attention_heads=2,
  ...                                intermediate_size=32)
  >>> x = keras.random.normal([2, 4, 16])
  >>> memory = keras.random.normal([2, 6, 16])
  >>> x, s, c = block(x, memory)
  >>> x, s, c = block(x, memory, self_scores=s, cross_scores=c)
  >>> tuple(s.shape), tuple(c.shape)
  ((2, 2, 4, 4), (2, 2, 4, 6))
  """

  def __init__(self,
               num_attention_heads,
               intermediate_size,
               intermediate_activation="relu",
               dropout_rate=0.0,
               attention_dropout_rate=0.0,
               use_bias=True,
               norm_first=False,
               norm_epsilon=1e-12,
               intermediate_dropout=0.0,
               kernel_initializer="glorot_uniform",
               attention_initializer=None,
               residual_attention="sum",
               self_residual=True,
               cross_residual=True,
               cross_attention=True,
               layer_index=0,
               score_dtype="float32",
               **kwargs):
    super().__init__(**kwargs)
    ra.validate_residual_attention(residual_attention)
    ra.validate_score_dtype(score_dtype)
    if layer_index < 0:
      raise ValueError(f"{self.name}: layer_index must be >= 0, got "
                       f"{layer_index}.")
    self.num_attention_heads = int(num_attention_heads)
    self.intermediate_size = int(intermediate_size)
    self.intermediate_activation = keras.activations.get(
        intermediate_activation)
    self.dropout_rate = dropout_rate
    self.attention_dropout_rate = attention_dropout_rate
    self.use_bias = bool(use_bias)
    self.norm_first = bool(norm_first)
    self.norm_epsilon = norm_epsilon
    self.intermediate_dropout = intermediate_dropout
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self.attention_initializer = (
        keras.initializers.get(attention_initializer)
        if attention_initializer is not None else None)
    self.residual_attention = residual_attention
    self.self_residual = bool(self_residual)
    self.cross_residual = bool(cross_residual)
    self.cross_attention = bool(cross_attention)
    self.layer_index = int(layer_index)
    self.score_dtype = score_dtype

  def get_config(self):
    config = super().get_config()
    config.update(
        num_attention_heads=self.num_attention_heads,
        intermediate_size=self.intermediate_size,
        intermediate_activation=keras.activations.serialize(
            self.intermediate_activation),
        dropout_rate=self.dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate,
        use_bias=self.use_bias,
        norm_first=self.norm_first,
        norm_epsilon=self.norm_epsilon,
        intermediate_dropout=self.intermediate_dropout,
        kernel_initializer=keras.initializers.serialize(
            self.kernel_initializer),
        attention_initializer=(
            keras.initializers.serialize(self.attention_initializer)
            if self.attention_initializer is not None else None),
        residual_attention=self.residual_attention,
        self_residual=self.self_residual,
        cross_residual=self.cross_residual,
        cross_attention=self.cross_attention,
        layer_index=self.layer_index,
        score_dtype=self.score_dtype)
    return config

  def build(self, hidden_shape, memory_shape=None, **unused_shapes):
    """Creates the sub-layers for `hidden` (and `memory`) of these shapes.

    `**unused_shapes` takes the shapes of the other tensor arguments, which
    Keras 3 passes all together when it rebuilds a loaded layer
    (`Layer.build_from_config`).
    """
    if len(hidden_shape) != 3 or hidden_shape[-1] is None:
      raise ValueError(
          f"{self.name}: hidden must be [batch, target_len, width] with a "
          f"known width, got shape {hidden_shape}.")
    width = hidden_shape[-1]
    if width % self.num_attention_heads:
      raise ValueError(
          f"{self.name}: num_attention_heads={self.num_attention_heads} does "
          f"not divide the width {width} of hidden.")
    if self.cross_attention and memory_shape is None:
      memory_shape = hidden_shape  # Rebuilt without memory's shape: as wide.

    def attention(name, residual, value_shape):
      layer = ra.ResidualMultiHeadAttention(
          num_heads=self.num_attention_heads,
          key_dim=width // self.num_attention_heads,
          dropout=self.attention_dropout_rate,
          use_bias=self.use_bias,
          kernel_initializer=_clone_initializer(
              self.attention_initializer or self.kernel_initializer),
          residual_attention=self.residual_attention if residual else "none",
          layer_index=self.layer_index,
          score_dtype=self.score_dtype,
          dtype=self.dtype_policy,
          name=name)
      layer.build(hidden_shape, value_shape)
      return layer

    def layer_norm(name):
      layer = keras.layers.LayerNormalization(
          epsilon=self.norm_epsilon, dtype=self.dtype_policy, name=name)
      layer.build(hidden_shape)
      return layer

    def dropout(rate):
      return keras.layers.Dropout(rate, dtype=self.dtype_policy)

    self.self_attention = attention("self_attention", self.self_residual,
                                    hidden_shape)
    self.self_attention_dropout = dropout(self.dropout_rate)
    self.self_attention_layer_norm = layer_norm("self_attention_layer_norm")
    if self.cross_attention:
      self.encdec_attention = attention("encdec_attention",
                                        self.cross_residual, memory_shape)
      self.encdec_attention_dropout = dropout(self.dropout_rate)
      self.encdec_attention_layer_norm = layer_norm(
          "encdec_attention_layer_norm")
    self.intermediate_dense = keras.layers.Dense(
        self.intermediate_size, activation=self.intermediate_activation,
        kernel_initializer=_clone_initializer(self.kernel_initializer),
        dtype=self.dtype_policy, name="intermediate")
    self.intermediate_dense.build(hidden_shape)
    self._intermediate_dropout_layer = dropout(self.intermediate_dropout)
    self.output_dense = keras.layers.Dense(
        width, kernel_initializer=_clone_initializer(self.kernel_initializer),
        dtype=self.dtype_policy, name="output")
    self.output_dense.build(tuple(hidden_shape[:-1]) +
                            (self.intermediate_size,))
    self.output_dropout = dropout(self.dropout_rate)
    self.output_layer_norm = layer_norm("output_layer_norm")

  def _sublayer(self, source, output, dropout, layer_norm, training):
    """Dropout, residual add and (Post-LN) LayerNorm after a sub-layer."""
    output = dropout(output, training=training)
    if self.norm_first:
      return source + output
    return layer_norm(source + output)

  def call(self,
           hidden,
           memory=None,
           self_scores=None,
           cross_scores=None,
           self_attention_mask=None,
           cross_attention_mask=None,
           cache=None,
           cache_update_index=None,
           training=None,
           return_attention_probs=False):
    if self.cross_attention and memory is None:
      raise ValueError(f"{self.name}: memory (the encoder output) is "
                       "required with cross_attention=True.")
    if not self.cross_attention and (memory is not None or
                                     cross_scores is not None or
                                     cross_attention_mask is not None):
      raise ValueError(
          f"{self.name}: got memory, cross_scores or cross_attention_mask, "
          "but the block was built with cross_attention=False.")
    if (cache is None) != (cache_update_index is None):
      raise ValueError(
          f"{self.name}: cache and cache_update_index go together; got "
          f"cache={'None' if cache is None else 'a tensor'} and "
          f"cache_update_index={cache_update_index!r}.")
    compute_dtype = keras.backend.standardize_dtype(self.compute_dtype)
    hidden = ra.to_dtype_if_float(hidden, compute_dtype)
    memory = ra.to_dtype_if_float(memory, compute_dtype)
    query = self.self_attention_layer_norm(hidden) if self.norm_first else (
        hidden)
    # The attention adds the causal mask (offset by cache_update_index with
    # a cache) to self_attention_mask, inside the softmax only.
    results = self.self_attention(
        query, prev_scores=self_scores, attention_mask=self_attention_mask,
        use_causal_mask=True, cache=cache,
        cache_update_index=cache_update_index, training=training,
        return_attention_probs=True)
    if cache is not None:
      attention_output, self_scores, self_probs, cache = results
    else:
      attention_output, self_scores, self_probs = results
    hidden = self._sublayer(hidden, attention_output,
                            self.self_attention_dropout,
                            self.self_attention_layer_norm, training)
    outputs = [self_scores]
    probs = [self_probs]
    if self.cross_attention:
      query = (self.encdec_attention_layer_norm(hidden) if self.norm_first
               else hidden)
      attention_output, cross_scores, cross_probs = self.encdec_attention(
          query, memory, prev_scores=cross_scores,
          attention_mask=cross_attention_mask, training=training,
          return_attention_probs=True)
      hidden = self._sublayer(hidden, attention_output,
                              self.encdec_attention_dropout,
                              self.encdec_attention_layer_norm, training)
      outputs.append(cross_scores)
      probs.append(cross_probs)

    inner = (self.output_layer_norm(hidden) if self.norm_first else hidden)
    inner = self._intermediate_dropout_layer(self.intermediate_dense(inner),
                                             training=training)
    hidden = self._sublayer(hidden, self.output_dense(inner),
                            self.output_dropout, self.output_layer_norm,
                            training)
    outputs = [hidden] + outputs
    if return_attention_probs:
      outputs += probs
    if cache is not None:
      outputs.append(cache)
    return tuple(outputs)
