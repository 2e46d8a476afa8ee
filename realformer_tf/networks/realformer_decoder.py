"""RealFormer decoder stack: a drop-in for Model Garden's `TransformerDecoder`.

`RealFormerDecoder` has the constructor arguments, call signature and
attribute names (`decoder_layers`, `output_normalization`, `num_layers`,
`num_attention_heads`) of `official.nlp.modeling.models.seq2seq_transformer.
TransformerDecoder`, so it fills `Seq2SeqTransformer`'s `decoder_layer` slot:
Model Garden's teacher-forced training, beam search (its key/value cache,
`{str(layer): {"key", "value"}}`) and padded decoding run unchanged. Each
attention type carries its own residual path through the stack.

With `cross_attention=False` the same class is a decoder-only (causal
language model) stack: call it with `memory=None`.
"""

import abc
from typing import Any

import tensorflow as tf
import tf_keras

from official.nlp.modeling.models import seq2seq_transformer
from realformer_tf.layers import realformer_block
from realformer_tf.layers import realformer_decoder_block
from realformer_tf.layers import residual_attention as ra


class BlockStack(realformer_block.ArgumentsConfigLayer,
                 metaclass=abc.ABCMeta):
  """`num_layers` blocks and a final LayerNorm: what both seq2seq stacks share.

  Model Garden's attribute names (`num_layers`, `num_attention_heads`,
  `output_normalization`); the blocks go to `self.<_blocks_attribute>`,
  built by the subclass' `_block(index, width)`.

  Args:
    num_layers: Number of blocks.
    num_attention_heads: Number of attention heads.
    intermediate_size: Feed-forward width.
    activation: Feed-forward activation.
    dropout_rate: Dropout after attention projections and feed-forward.
    attention_dropout_rate: Dropout on attention probabilities.
    norm_first: Pre-LN (default, as Model Garden's seq2seq) or Post-LN.
    norm_epsilon: LayerNorm epsilon of the blocks.
    residual_attention: "sum", "mean" or "none".
    final_layer_norm: Whether a LayerNorm follows the last block. Model
      Garden's seq2seq stacks always have one, so True (the default) keeps
      their checkpoints loadable.
    **kwargs: Base `Layer` arguments.
  """
  _blocks_attribute = ""

  def __init__(self,
               num_layers: int = 6,
               num_attention_heads: int = 8,
               intermediate_size: int = 2048,
               activation: Any = "relu",
               dropout_rate: float = 0.0,
               attention_dropout_rate: float = 0.0,
               norm_first: bool = True,
               norm_epsilon: float = 1e-6,
               residual_attention: str = "sum",
               final_layer_norm: bool = True,
               **kwargs):
    if num_layers < 1:
      raise ValueError(f"num_layers must be >= 1, got {num_layers}.")
    ra.validate_residual_attention(residual_attention)
    final_layer_norm = bool(final_layer_norm)
    super().__init__(locals())
    self.num_layers = num_layers
    self.num_attention_heads = num_attention_heads

  @abc.abstractmethod
  def _block(self, index: int, width: int) -> tf_keras.layers.Layer:
    """Block `index` of the stack, for inputs `width` wide."""

  def _final_norm_epsilon(self) -> float:
    return self._config["norm_epsilon"]

  def build(self, input_shape):
    width = tf.TensorShape(input_shape)[-1]
    setattr(self, self._blocks_attribute,
            [self._block(i, width) for i in range(self.num_layers)])
    if self._config["final_layer_norm"]:
      self.output_normalization = tf_keras.layers.LayerNormalization(
          epsilon=self._final_norm_epsilon(), dtype="float32")
    super().build(input_shape)

  def _normalize(self, x):
    if self._config["final_layer_norm"]:
      return self.output_normalization(x)
    return x


@tf_keras.utils.register_keras_serializable(package="RealFormer")
class RealFormerDecoder(BlockStack):
  """A stack of `RealFormerDecoderBlock`s and a final LayerNorm.

  Args:
    *args: `BlockStack`'s arguments, in Model Garden's `TransformerDecoder`
      order (`num_layers`, `num_attention_heads`, `intermediate_size`,
      `activation`, `dropout_rate`, `attention_dropout_rate`); the others by
      keyword.
    use_bias: Bias in the attention projections.
    intermediate_dropout: Dropout after the feed-forward activation.
    self_residual: Residual path for decoder self-attention.
    cross_residual: Residual path for encoder-decoder attention.
    cross_attention: False for a decoder-only stack.
    **kwargs: `BlockStack`'s arguments (the final LayerNorm's epsilon is
      Model Garden's 1e-6 whatever `norm_epsilon`) and base `Layer` ones.

  Call arguments:
    target: `[batch, target_len, width]` embedded target.
    memory: Encoder output `[batch, source_len, width]`, or None.
    self_attention_mask: Optional `[batch, target_len, keys]`; the causal
      mask is always applied.
    cross_attention_mask: `[batch, target_len, source_len]` source padding.
    cache: `{str(layer): {"key", "value"}}` for incremental decoding, updated
      in place.
    decode_loop_step: Step index for padded decoding.
    return_all_decoder_outputs: Return each block's output, normalized.
    return_attention_scores: Also return a dict of per-layer lists
      "self_scores", "cross_scores", "self_probs", "cross_probs".
    training: Whether dropout is active.

  Returns:
    The normalized output `[batch, target_len, width]` (a list with
    `return_all_decoder_outputs`), and the attention dict if asked.
  """

  _blocks_attribute = "decoder_layers"

  def __init__(self,
               *args,
               use_bias: bool = False,
               intermediate_dropout: float = 0.0,
               self_residual: bool = True,
               cross_residual: bool = True,
               cross_attention: bool = True,
               **kwargs):
    super().__init__(*args, **kwargs)
    self._config.update(
        use_bias=use_bias, intermediate_dropout=intermediate_dropout,
        self_residual=bool(self_residual), cross_residual=bool(cross_residual),
        cross_attention=bool(cross_attention))

  def _block(self, index, width):
    c = self._config
    return realformer_decoder_block.RealFormerDecoderBlock(
        num_attention_heads=self.num_attention_heads,
        intermediate_size=c["intermediate_size"],
        intermediate_activation=c["activation"],
        dropout_rate=c["dropout_rate"],
        attention_dropout_rate=c["attention_dropout_rate"],
        use_bias=c["use_bias"], norm_first=c["norm_first"],
        norm_epsilon=c["norm_epsilon"],
        intermediate_dropout=c["intermediate_dropout"],
        # Model Garden's seq2seq attention initializer.
        attention_initializer=seq2seq_transformer.attention_initializer(
            width),
        residual_attention=c["residual_attention"],
        self_residual=c["self_residual"], cross_residual=c["cross_residual"],
        cross_attention=c["cross_attention"], layer_index=index,
        name=f"layer_{index}")

  def _final_norm_epsilon(self):
    return 1e-6  # Model Garden's TransformerDecoder's, whatever norm_epsilon.

  @property
  def cross_attention(self) -> bool:
    return self._config["cross_attention"]

  def call(self,
           target,
           memory=None,
           self_attention_mask=None,
           cross_attention_mask=None,
           cache=None,
           decode_loop_step=None,
           return_all_decoder_outputs: bool = False,
           return_attention_scores: bool = False,
           training=None):
    hidden, self_scores, cross_scores = target, None, None
    outputs = []
    attention = {"self_scores": [], "cross_scores": [], "self_probs": [],
                 "cross_probs": []}
    for i, layer in enumerate(self.decoder_layers):
      hidden, self_scores, cross_scores, self_probs, cross_probs = layer(
          hidden, memory, self_scores=self_scores, cross_scores=cross_scores,
          self_attention_mask=self_attention_mask,
          cross_attention_mask=cross_attention_mask,
          cache=None if cache is None else cache[str(i)],
          decode_loop_step=decode_loop_step, training=training,
          return_attention_probs=True)
      if return_all_decoder_outputs:
        outputs.append(self._normalize(hidden))
      for key, value in (("self_scores", self_scores),
                         ("cross_scores", cross_scores),
                         ("self_probs", self_probs),
                         ("cross_probs", cross_probs)):
        if value is not None:
          attention[key].append(value)
    output = outputs if return_all_decoder_outputs else self._normalize(hidden)
    if return_attention_scores:
      return output, attention
    return output
