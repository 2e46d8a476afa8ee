"""RealFormer decoder block for Keras 3 (TensorFlow, JAX and PyTorch backends).

The Keras 3 face of `realformer_tf.layers.decoder_block`: same
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

from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import residual_attention as ra


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBlock(encoder_block.ArgumentsConfig,
                             ra.KeepsArgumentDtypes, keras.layers.Layer):
  """RealFormer decoder block: `(hidden, self_scores, cross_scores)` in and out.

  Causal self-attention on one residual path, encoder-decoder attention on
  another, then the feed-forward layer; Post-LN (default) or Pre-LN
  (`norm_first=True`). Constructor arguments and sub-layer attribute names
  (`self_attention`, `self_attention_layer_norm`, `encdec_attention`,
  `encdec_attention_layer_norm`, `intermediate_dense`, `output_dense`,
  `output_layer_norm`) are those of the tf_keras
  `realformer_tf.layers.decoder_block.RealFormerDecoderBlock`
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

  Args: those of the tf_keras block but `recompute` (Model Garden's
    `recompute_grad` is TensorFlow's).

  Call arguments: those of the tf_keras block (masks may also be
    `[batch, 1, keys]`; `memory` may be narrower than `hidden`), but:
    cache: Incremental decoding: the self-attention's key/value cache
      `[batch, 2, max_len, heads, key_dim]` (keras-hub's format); keys are
      then the `max_len` cache positions and the causal mask lets query `i`
      see positions `<= cache_update_index + i`. The score paths need no
      cache: row `t` of `S_l` depends only on row `t` of `S_{l-1}`, so a step
      hands its `[batch, heads, new_len, max_len]` rows on. Encoder-decoder
      keys and values are recomputed from `memory` at each step.
    cache_update_index: With `cache`: the position of `hidden`'s first row
      (`hidden` then holds the new positions only), where its keys and
      values are written into the cache.

  Returns:
    `(hidden, self_scores, cross_scores)` (`(hidden, self_scores)` without
    cross-attention), then `self_probs` (and `cross_probs`) with
    `return_attention_probs`, then the updated cache with `cache`.

  Example:

  >>> block = RealFormerDecoderBlock(num_attention_heads=2, inner_dim=32)
  >>> x = keras.random.normal([2, 4, 16])
  >>> memory = keras.random.normal([2, 6, 16])
  >>> x, s, c = block(x, memory)
  >>> x, s, c = block(x, memory, self_scores=s, cross_scores=c)
  >>> tuple(s.shape), tuple(c.shape)
  ((2, 2, 4, 4), (2, 2, 4, 6))
  """

  def __init__(self, num_attention_heads, inner_dim=None, inner_activation="relu",
               output_dropout=0.0, attention_dropout=0.0, use_bias=True,
               norm_first=False, norm_epsilon=1e-12, intermediate_dropout=0.0,
               kernel_initializer="glorot_uniform", attention_initializer=None,
               residual_attention="sum", self_residual=True,
               cross_residual=True, cross_attention=True, layer_index=0,
               score_dtype="float32", **kwargs):
    # The tf_keras block's aliases (Model Garden's and this block's before).
    inner_dim = kwargs.pop("intermediate_size", inner_dim)
    inner_activation = kwargs.pop("intermediate_activation", inner_activation)
    output_dropout = kwargs.pop("dropout_rate", output_dropout)
    attention_dropout = kwargs.pop("attention_dropout_rate", attention_dropout)
    super().__init__(**kwargs)
    if layer_index < 0:
      raise ValueError(f"{self.name}: layer_index must be >= 0, got "
                       f"{layer_index}.")
    self._config = dict(
        num_attention_heads=encoder_block.check_positive_int(
            self.name, num_attention_heads, "num_attention_heads"),
        inner_dim=encoder_block.check_positive_int(self.name, inner_dim,
                                                   "inner_dim"),
        inner_activation=keras.activations.get(inner_activation),
        output_dropout=output_dropout, attention_dropout=attention_dropout,
        use_bias=bool(use_bias), norm_first=bool(norm_first),
        norm_epsilon=norm_epsilon, intermediate_dropout=intermediate_dropout,
        kernel_initializer=keras.initializers.get(kernel_initializer),
        attention_initializer=(
            keras.initializers.get(attention_initializer)
            if attention_initializer is not None else None),
        residual_attention=ra.validate_residual_attention(residual_attention),
        self_residual=bool(self_residual),
        cross_residual=bool(cross_residual),
        cross_attention=bool(cross_attention), layer_index=int(layer_index),
        score_dtype=ra.validate_score_dtype(score_dtype))

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
    c = self._config
    width = hidden_shape[-1]
    if width % c["num_attention_heads"]:
      raise ValueError(
          f"{self.name}: num_attention_heads={c['num_attention_heads']} does "
          f"not divide the width {width} of hidden.")
    if c["cross_attention"] and memory_shape is None:
      memory_shape = hidden_shape  # Rebuilt without memory's shape: as wide.

    def attention(name, residual, value_shape):
      layer = ra.ResidualMultiHeadAttention(
          num_heads=c["num_attention_heads"],
          key_dim=width // c["num_attention_heads"],
          dropout=c["attention_dropout"], use_bias=c["use_bias"],
          kernel_initializer=encoder_block.clone_initializer(
              c["attention_initializer"] or c["kernel_initializer"]),
          residual_attention=c["residual_attention"] if residual else "none",
          layer_index=c["layer_index"], score_dtype=c["score_dtype"],
          dtype=self.dtype_policy, name=name)
      layer.build(hidden_shape, value_shape)
      return layer

    def layer_norm(name):
      layer = keras.layers.LayerNormalization(
          epsilon=c["norm_epsilon"], dtype=self.dtype_policy, name=name)
      layer.build(hidden_shape)
      return layer

    def dropout(rate):
      return keras.layers.Dropout(rate, dtype=self.dtype_policy)

    self.self_attention = attention("self_attention", c["self_residual"],
                                    hidden_shape)
    self.self_attention_dropout = dropout(c["output_dropout"])
    self.self_attention_layer_norm = layer_norm("self_attention_layer_norm")
    if c["cross_attention"]:
      self.encdec_attention = attention("encdec_attention",
                                        c["cross_residual"], memory_shape)
      self.encdec_attention_dropout = dropout(c["output_dropout"])
      self.encdec_attention_layer_norm = layer_norm(
          "encdec_attention_layer_norm")
    self.intermediate_dense = keras.layers.Dense(
        c["inner_dim"], activation=c["inner_activation"],
        kernel_initializer=encoder_block.clone_initializer(
            c["kernel_initializer"]),
        dtype=self.dtype_policy, name="intermediate")
    self.intermediate_dense.build(hidden_shape)
    self._intermediate_dropout_layer = dropout(c["intermediate_dropout"])
    self.output_dense = keras.layers.Dense(
        width, kernel_initializer=encoder_block.clone_initializer(
            c["kernel_initializer"]),
        dtype=self.dtype_policy, name="output")
    self.output_dense.build(tuple(hidden_shape[:-1]) + (c["inner_dim"],))
    self.output_dropout = dropout(c["output_dropout"])
    self.output_layer_norm = layer_norm("output_layer_norm")

  def _sublayer(self, source, output, dropout, layer_norm, training):
    """Dropout, residual add and (Post-LN) LayerNorm after a sub-layer."""
    output = dropout(output, training=training)
    if self._config["norm_first"]:
      return source + output
    return layer_norm(source + output)

  def call(self, hidden, memory=None, self_scores=None, cross_scores=None,
           self_attention_mask=None, cross_attention_mask=None, cache=None,
           cache_update_index=None, training=None,
           return_attention_probs=False):
    norm_first, cross_attention = (self._config["norm_first"],
                                   self._config["cross_attention"])
    if cross_attention and memory is None:
      raise ValueError(f"{self.name}: memory (the encoder output) is "
                       "required with cross_attention=True.")
    if not cross_attention and (memory is not None or
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
    query = self.self_attention_layer_norm(hidden) if norm_first else (
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
    if cross_attention:
      query = (self.encdec_attention_layer_norm(hidden) if norm_first
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

    inner = (self.output_layer_norm(hidden) if norm_first else hidden)
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
