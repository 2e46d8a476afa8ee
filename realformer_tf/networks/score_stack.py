"""The score loop of every RealFormer stack (Eq. 5: each block's pre-softmax
scores to the next, one path per attention type) and the seq2seq stacks' base.
"""

import abc
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras

from realformer_tf.core import arguments
from realformer_tf.layers import encoder_block
from realformer_tf.layers import keras3_seam


def chain_blocks(blocks: Sequence[tf_keras.layers.Layer],
                 hidden,
                 score_names: Sequence[str],
                 per_block: Optional[Dict[int, Dict[str, Any]]] = None,
                 **arguments) -> Tuple[List, List[List], List[List]]:
  """Runs `blocks` in order, each on the last one's output and running scores.

  Each block is called as `block(hidden, **{name: S_{l-1}}, **arguments,
  **per_block[l], return_attention_probs=True)` and returns `(hidden,
  *scores, *probs)`, one of each per path in `score_names` (e.g.
  `("scores",)`; None goes to the first block).

  Returns:
    `(hiddens, scores, probs)`: each block's output; per path, each block's
    running sum and probabilities (empty where the blocks return None).
  """
  scores = dict.fromkeys(score_names)
  per_block = per_block or {}
  outputs = []
  for i, block in enumerate(blocks):
    outputs.append(block(hidden, **scores, **arguments,
                         **per_block.get(i, {}), return_attention_probs=True))
    hidden = outputs[-1][0]
    scores = dict(zip(score_names, outputs[-1][1:]))
  columns = [[x for x in column if x is not None] for column in zip(*outputs)]
  paths = len(score_names)
  return columns[0], columns[1:1 + paths], columns[1 + paths:]


class BlockStack(keras3_seam.RejectsKeras3, tf_keras.layers.Layer,
                 metaclass=abc.ABCMeta):
  """`num_layers` blocks and a final LayerNorm: what both seq2seq stacks share.

  Model Garden's seq2seq constructor and attribute names; the subclass'
  `_block(index, width)` builds the blocks into `self.<_blocks_attribute>`.

  Args: Model Garden's seq2seq stacks' (Pre-LN by default), and
    residual_attention: "sum", "mean" or "none".
    final_layer_norm: Whether a LayerNorm follows the last block (True, as
      Model Garden's stacks, keeps their checkpoints loadable).
  """
  _blocks_attribute = ""

  def __init__(self, num_layers: int = 6, num_attention_heads: int = 8,
               intermediate_size: int = 2048, activation="relu",
               dropout_rate: float = 0.0, attention_dropout_rate: float = 0.0,
               norm_first: bool = True, norm_epsilon: float = 1e-6,
               residual_attention: str = "sum", final_layer_norm: bool = True,
               **kwargs):
    arguments.check(
        type(self).__name__, num_layers=num_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size, dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        norm_epsilon=norm_epsilon, residual_attention=residual_attention)
    super().__init__(**kwargs)
    self.num_layers = num_layers
    self.num_attention_heads = num_attention_heads
    self._intermediate_size = intermediate_size
    self._activation = activation
    self._dropout_rate = dropout_rate
    self._attention_dropout_rate = attention_dropout_rate
    self._norm_first = bool(norm_first)
    self._norm_epsilon = norm_epsilon
    self._residual_attention = residual_attention
    self._final_layer_norm = bool(final_layer_norm)

  def get_config(self):
    return {
        **super().get_config(),
        "num_layers": self.num_layers,
        "num_attention_heads": self.num_attention_heads,
        "intermediate_size": self._intermediate_size,
        "activation": encoder_block.serialize_activation(self._activation),
        "dropout_rate": self._dropout_rate,
        "attention_dropout_rate": self._attention_dropout_rate,
        "norm_first": self._norm_first,
        "norm_epsilon": self._norm_epsilon,
        "residual_attention": self._residual_attention,
        "final_layer_norm": self._final_layer_norm,
    }

  @abc.abstractmethod
  def _block(self, index: int, width: int) -> tf_keras.layers.Layer:
    """Block `index` of the stack, for inputs `width` wide."""

  def _block_arguments(self, index: int) -> Dict[str, Any]:
    """The block arguments both stacks pass, by the blocks' names."""
    return dict(
        num_attention_heads=self.num_attention_heads,
        inner_dim=self._intermediate_size, inner_activation=self._activation,
        output_dropout=self._dropout_rate,
        attention_dropout=self._attention_dropout_rate,
        norm_first=self._norm_first, norm_epsilon=self._norm_epsilon,
        residual_attention=self._residual_attention, layer_index=index,
        name=f"layer_{index}")

  def _final_norm_epsilon(self) -> float:
    return self._norm_epsilon

  def build(self, input_shape):
    width = tf.TensorShape(input_shape)[-1]
    setattr(self, self._blocks_attribute,
            [self._block(i, width) for i in range(self.num_layers)])
    if self._final_layer_norm:
      self.output_normalization = tf_keras.layers.LayerNormalization(
          epsilon=self._final_norm_epsilon(), dtype="float32")
    super().build(input_shape)

  def _normalize(self, x):
    if self._final_layer_norm:
      return self.output_normalization(x)
    return x
