"""RealFormer decoder block for Keras 3: one residual score path per attention.

Its key/value cache is keras-hub's, so a causal LM of these blocks runs
keras-hub's `generate()` unchanged.
"""

import keras
from keras import ops

from realformer_tf.core import block as core_block
from realformer_tf.core import options
from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import residual_attention as ra


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerDecoderBlock(encoder_block.BlockBase):
  """RealFormer decoder block: `(hidden, self_scores, cross_scores)` in and out.

  The tf_keras block's sub-layer names, keras-hub's arguments and dtype
  rules. With `cross_attention=False` (GPT-style) it returns `(hidden,
  self_scores)`: a Keras 3 functional graph cannot carry a None output.

  Args: the encoder block's (keras-hub's names; `activation` defaults to
    "relu"), and use_bias, intermediate_dropout, attention_initializer,
    self_residual, cross_residual, cross_attention as the tf_keras block.

  Call arguments: those of the tf_keras block (masks may also be
    `[batch, 1, keys]`; `memory` may be narrower than `hidden`), but:
    cache: The self-attention's keras-hub cache `[batch, 2, max_len, heads,
      key_dim]`; query `i` sees positions `<= cache_update_index + i`.
    cache_update_index: With `cache`: the position of `hidden`'s first row,
      where its keys and values are written.

  Returns:
    `(hidden, self_scores, cross_scores)` (`(hidden, self_scores)` without
    cross-attention), then `self_probs` (and `cross_probs`) with
    `return_attention_probs`, then the updated cache with `cache`.

  Example:

  >>> block = RealFormerDecoderBlock(num_heads=2, intermediate_dim=32)
  >>> x = keras.random.normal([2, 4, 16])
  >>> memory = keras.random.normal([2, 6, 16])
  >>> x, s, c = block(x, memory)
  >>> x, s, c = block(x, memory, self_scores=s, cross_scores=c)
  >>> tuple(s.shape), tuple(c.shape)
  ((2, 2, 4, 4), (2, 2, 4, 6))
  """

  def __init__(self, num_heads, intermediate_dim, activation="relu",
               dropout=0.0, attention_dropout=0.0, normalize_first=False,
               layer_norm_epsilon=1e-12, kernel_initializer="glorot_uniform",
               residual_attention="sum", layer_index=0, score_dtype="auto",
               attention_implementation="auto", use_bias=True,
               intermediate_dropout=0.0, attention_initializer=None,
               self_residual=True, cross_residual=True, cross_attention=True,
               **kwargs):
    super().__init__(
        num_heads=num_heads, intermediate_dim=intermediate_dim,
        activation=activation, dropout=dropout,
        attention_dropout=attention_dropout, normalize_first=normalize_first,
        layer_norm_epsilon=layer_norm_epsilon,
        kernel_initializer=kernel_initializer,
        residual_attention=residual_attention, layer_index=layer_index,
        score_dtype=score_dtype,
        attention_implementation=attention_implementation, **kwargs)
    ra.check_arguments(self, intermediate_dropout=intermediate_dropout)

    # === Config ===
    self.use_bias = use_bias
    self.intermediate_dropout = intermediate_dropout
    self.attention_initializer = keras.initializers.get(attention_initializer)
    self.self_residual = self_residual
    self.cross_residual = cross_residual
    self.cross_attention = cross_attention

  def get_config(self):
    return {
        **super().get_config(),
        "use_bias": self.use_bias,
        "intermediate_dropout": self.intermediate_dropout,
        "attention_initializer": self.attention_initializer and (
            keras.initializers.serialize(self.attention_initializer)),
        "self_residual": self.self_residual,
        "cross_residual": self.cross_residual,
        "cross_attention": self.cross_attention,
    }

  def build(self, hidden_shape, memory_shape=None, **unused_shapes):
    """Creates the sub-layers; `**unused_shapes` takes the other arguments'
    shapes, which Keras passes when it rebuilds a loaded layer."""
    hidden_shape = tuple(hidden_shape)
    width = options.block_width(self.name, hidden_shape, self.num_heads)
    if self.cross_attention and memory_shape is None:
      memory_shape = hidden_shape  # Rebuilt without memory's shape: as wide.
    dropout = lambda rate: hashed_dropout.HashedDropout(
        rate, dtype=self.dtype_policy)
    self.self_attention = encoder_block.attention_layer(
        self, "self_attention", hidden_shape, hidden_shape,
        self.self_residual)
    self.self_attention_dropout = dropout(self.dropout)
    self.self_attention_layer_norm = encoder_block.layer_norm(
        self, "self_attention_layer_norm", hidden_shape)
    if self.cross_attention:
      self.encdec_attention = encoder_block.attention_layer(
          self, "encdec_attention", hidden_shape, memory_shape,
          self.cross_residual)
      self.encdec_attention_dropout = dropout(self.dropout)
      self.encdec_attention_layer_norm = encoder_block.layer_norm(
          self, "encdec_attention_layer_norm", hidden_shape)
    self.intermediate_dense = keras.layers.Dense(
        self.intermediate_dim, activation=self.activation,
        kernel_initializer=encoder_block.clone_initializer(
            self.kernel_initializer),
        dtype=self.dtype_policy, name="intermediate")
    self.intermediate_dense.build(hidden_shape)
    self._intermediate_dropout_layer = dropout(self.intermediate_dropout)
    self.output_dense = keras.layers.Dense(
        width, kernel_initializer=encoder_block.clone_initializer(
            self.kernel_initializer),
        dtype=self.dtype_policy, name="output")
    self.output_dense.build(hidden_shape[:-1] + (self.intermediate_dim,))
    self.output_dropout = dropout(self.dropout)
    self.output_layer_norm = encoder_block.layer_norm(
        self, "output_layer_norm", hidden_shape)

  def call(self, hidden, memory=None, self_scores=None, cross_scores=None,
           self_attention_mask=None, cross_attention_mask=None, cache=None,
           cache_update_index=None, training=None,
           return_attention_probs=False):
    cross_attention = self.cross_attention
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
    results = {}

    def self_attention(inputs):
      output, *results["self"] = self.self_attention(
          inputs, prev_scores=self_scores, attention_mask=self_attention_mask,
          use_causal_mask=True, cache=cache,
          cache_update_index=cache_update_index, training=training,
          return_attention_probs=return_attention_probs)
      return output

    def cross_attention_(inputs):
      output, *results["cross"] = self.encdec_attention(
          inputs, memory, prev_scores=cross_scores,
          attention_mask=cross_attention_mask, training=training,
          return_attention_probs=return_attention_probs)
      return output

    sublayers = core_block.decoder_sublayers(
        self, self_attention, cross_attention_ if cross_attention else None,
        training)
    hidden = core_block.residual_sublayers(ops, hidden, sublayers,
                                           self.normalize_first)
    self_out, cross_out = results["self"], results.get("cross", [])
    # [scores, probs?, cache?] of each attention, in the order documented.
    outputs = [hidden, self_out[0]] + cross_out[:1]
    if return_attention_probs:
      outputs += [self_out[1]] + cross_out[1:2]
    if cache is not None:
      outputs.append(self_out[-1])
    return tuple(outputs)
