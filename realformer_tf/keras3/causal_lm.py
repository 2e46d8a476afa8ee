"""RealFormer causal language model on keras-hub: `fit()` and `generate()`.

`RealFormerCausalLM` is a `keras_hub.models.CausalLM`, so keras-hub's
samplers and `generate()` run unchanged; `RealFormerCausalLMPreprocessor` is
its `CausalLMPreprocessor` with a `BertTokenizer` (a WordPiece vocabulary).
"""

import numbers

import keras
from keras import ops
import keras_hub

from realformer_tf.compat import keras_hub as compat_keras_hub
from realformer_tf.keras3 import decoder_backbone
from realformer_tf.keras3 import tasks


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerCausalLMPreprocessor(tasks.PresetSequenceLength,
                                     keras_hub.models.CausalLMPreprocessor):
  """keras-hub's `CausalLMPreprocessor` with a `BertTokenizer` (`[CLS] ...
  [SEP]`; `generate()` stops at `[SEP]`). From a preset without one,
  `sequence_length` is the backbone's positions where fewer than 1024.
  """

  backbone_cls = decoder_backbone.RealFormerDecoderBackbone
  tokenizer_cls = keras_hub.models.BertTokenizer


@keras.saving.register_keras_serializable(package="realformer_tf")
@tasks.realformer_task
class RealFormerCausalLM(keras_hub.models.CausalLM):
  """A decoder-only RealFormer language model with keras-hub's `generate()`.

  Reuses keras-hub's `GPT2CausalLM.generate_step` and `_build_cache`;
  `call_with_cache` chains each block's scores into the next. Without a
  preprocessor, inputs are `{"token_ids", "padding_mask"}` and `generate()`
  needs `stop_token_ids`.

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
    self.backbone = backbone
    self.preprocessor = preprocessor
    inputs = backbone.input
    hidden_states = backbone(inputs)
    outputs = backbone.token_embedding(hidden_states, reverse=True)
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

  def call_with_cache(self, token_ids, cache, cache_update_index):
    """`token_ids` `[batch, new_len]` at `cache_update_index` on `cache`
    `[batch, num_layers, 2, max_len, num_heads, head_dim]`: `(logits,
    hidden_states, updated cache)`, as `GPT2CausalLM.call_with_cache`."""
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

  def generate(self, inputs, max_length=None, stop_token_ids="auto",
               strip_prompt=False):
    """keras-hub's `CausalLM.generate`, refusing lengths it would mishandle
    (it cuts a prompt that fills `max_length` and generates nothing, and
    fails inside `PositionEmbedding` past the model's positions).

    `max_length` counts prompt, `[CLS]` and generated tokens (None: the
    preprocessor's `sequence_length`); without a preprocessor keras-hub
    ignores it and the width of `inputs["token_ids"]` counts. A ValueError
    for a bad `max_length` or prompt."""
    if self.preprocessor is None:
      # keras-hub ignores it: the inputs' width counts (keras-hub#989).
      max_length = None
    else:
      # As `preprocess_samples` (tasks.py): a vocabulary loaded after the
      # task was built (from a preset or `.keras` file) is checked here.
      tasks.check_preprocessor(self.backbone, self.preprocessor)
      if max_length is None:  # Not `or`: max_length=0 is refused below.
        max_length = self.preprocessor.sequence_length
      if (isinstance(max_length, bool) or
          not isinstance(max_length, numbers.Integral) or max_length < 2):
        raise ValueError(
            f"generate(): max_length must be an int >= 2 (the prompt's "
            f"[CLS] and one generated token), got {max_length!r}; None "
            "(default) is the preprocessor's sequence_length "
            f"({self.preprocessor.sequence_length}).")
      max_length = int(max_length)
      self._check_generate_length(max_length, "max_length")
    self._generate_max_length = max_length
    try:
      return super().generate(inputs, max_length=max_length,
                              stop_token_ids=stop_token_ids,
                              strip_prompt=strip_prompt)
    finally:
      self._generate_max_length = None

  def _check_generate_length(self, length, what):
    positions = self.backbone.max_sequence_length
    if length > positions:
      raise ValueError(
          f"generate(): {what} is {length} but the model has {positions} "
          f"positions (the backbone's max_sequence_length={positions}). "
          f"Use a length <= {positions}.")

  def _normalize_generate_inputs(self, inputs):
    # The one place that sees every batch of prompts, a dataset's included.
    batches, is_scalar = super()._normalize_generate_inputs(inputs)
    if self.preprocessor is None:
      return (self._check_width(batch) for batch in batches), is_scalar
    if isinstance(batches, list):  # One batch: check it now.
      for batch in batches:
        self._check_prompts(batch)
      return batches, is_scalar
    return (self._check_prompts(batch) for batch in batches), is_scalar

  def _check_width(self, batch):
    shape = tuple(batch["token_ids"].shape)
    if len(shape) != 2 or not shape[0]:
      raise ValueError(
          f"generate(): inputs['token_ids'] must be [batch, length] with at "
          f"least one row, got shape {shape}.")
    self._check_generate_length(shape[-1], "the width of inputs['token_ids']")
    return batch

  def _check_prompts(self, prompts):
    return compat_keras_hub.check_prompts(self, prompts,
                                          self._generate_max_length)

  # GPT2CausalLM's own functions: see the class docstring.
  _build_cache = keras_hub.models.GPT2CausalLM._build_cache  # pylint: disable=protected-access
  generate_step = keras_hub.models.GPT2CausalLM.generate_step
