"""RealFormer causal language model on keras-hub: `fit()` and `generate()`.

`RealFormerCausalLM` is a `keras_hub.models.CausalLM`, so keras-hub's
`compile(sampler=...)`, `generate()` (XLA-compiled on TensorFlow, `jax.jit`
on JAX) and samplers (`"greedy"`, `"top_k"`, `BeamSampler`, ...) run
unchanged; `RealFormerCausalLMPreprocessor` is keras-hub's
`CausalLMPreprocessor` with a `BertTokenizer` (a WordPiece vocabulary file,
no download), e.g. this project's pre-training vocabulary.
"""

import keras
from keras import ops
import keras_hub
from keras_hub import models as gpt2_causal_lm  # .GPT2CausalLM

from realformer_tf.keras3 import decoder_backbone


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerCausalLMPreprocessor(keras_hub.models.CausalLMPreprocessor):
  """keras-hub's `CausalLMPreprocessor` for `RealFormerCausalLM`.

  No code of its own: the base class tokenizes, packs `[CLS] ... [SEP]`
  (the `BertTokenizer`'s start and end tokens) and shifts the labels by one;
  `generate()` stops at `[SEP]`. Construct it with `tokenizer=
  keras_hub.models.BertTokenizer(vocabulary=...)` and `sequence_length`.
  """

  backbone_cls = decoder_backbone.RealFormerDecoderBackbone
  tokenizer_cls = keras_hub.models.BertTokenizer


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerCausalLM(keras_hub.models.CausalLM):
  """A decoder-only RealFormer language model with keras-hub's `generate()`.

  Mirrors keras-hub's `GPT2CausalLM` (keras_hub/src/models/gpt2/
  gpt2_causal_lm.py): logits are the backbone's output times the transposed
  token embedding; `generate_step` and `_build_cache` are `GPT2CausalLM`'s
  own functions (they only use `call_with_cache` and the backbone's
  `num_layers`, `num_heads`, `hidden_dim`, which `RealFormerDecoderBackbone`
  shares). `call_with_cache` is written here because GPT-2's calls
  `TransformerDecoder`s; ours chains each block's self-attention scores into
  the next, with keras-hub's key/value cache `[batch, num_layers, 2,
  max_len, num_heads, head_dim]`. The scores need no cache of their own: the
  rows of the new positions depend only on the same rows one layer down.

  Args:
    backbone: A `RealFormerDecoderBackbone`.
    preprocessor: A `RealFormerCausalLMPreprocessor`, or None (then inputs
      are `{"token_ids", "padding_mask"}` and `generate()` needs
      `stop_token_ids`).
    **kwargs: `keras_hub.models.Task` arguments.

  Example:

  >>> lm = RealFormerCausalLM(backbone=RealFormerDecoderBackbone(
  ...     vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
  ...     intermediate_dim=32, max_sequence_length=8))
  >>> lm.compile(sampler="greedy")
  >>> out = lm.generate({"token_ids": np.array([[2, 5, 0, 0, 0, 0, 0, 0]]),
  ...                    "padding_mask": np.array([[1, 1, 0, 0, 0, 0, 0, 0]])},
  ...                   stop_token_ids=None)
  >>> out["token_ids"].shape
  (1, 8)
  """

  backbone_cls = decoder_backbone.RealFormerDecoderBackbone
  preprocessor_cls = RealFormerCausalLMPreprocessor

  def __init__(self, backbone, preprocessor=None, **kwargs):
    # === Layers ===
    self.backbone = backbone
    self.preprocessor = preprocessor

    # === Functional Model ===
    inputs = backbone.input
    hidden_states = backbone(inputs)
    outputs = backbone.token_embedding(hidden_states, reverse=True)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

  def call_with_cache(self, token_ids, cache, cache_update_index):
    """Forward pass of the new positions `token_ids` with the cache.

    Args:
      token_ids: `[batch, new_len]` int tokens at positions
        `cache_update_index ...`.
      cache: `[batch, num_layers, 2, max_len, num_heads, head_dim]` keys and
        values of every block.
      cache_update_index: Position of `token_ids`' first column.

    Returns:
      `(logits [batch, new_len, vocab], hidden_states [batch, new_len,
      hidden_dim], updated cache)`, as `GPT2CausalLM.call_with_cache`.
    """
    backbone = self.backbone
    tokens = backbone.token_embedding(token_ids)
    positions = backbone.position_embedding(tokens,
                                            start_index=cache_update_index)
    x = backbone.embeddings_add((tokens, positions))
    x = backbone.embeddings_dropout(x)
    scores, caches = None, []
    for i, layer in enumerate(backbone.transformer_layers):
      x, scores, next_cache = layer(
          x, self_scores=scores, cache=cache[:, i, ...],
          cache_update_index=cache_update_index)
      caches.append(next_cache)
    cache = ops.stack(caches, axis=1)
    hidden_states = x = backbone.layer_norm(x)
    logits = backbone.token_embedding(x, reverse=True)
    return logits, hidden_states, cache

  # GPT2CausalLM's own functions: see the class docstring.
  _build_cache = gpt2_causal_lm.GPT2CausalLM._build_cache  # pylint: disable=protected-access
  generate_step = gpt2_causal_lm.GPT2CausalLM.generate_step
