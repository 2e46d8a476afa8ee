"""keras-hub workarounds (tests/compat/keras_hub_test.py); no TensorFlow."""

from keras import ops


def check_prompts(task, prompts, max_length: int):
  """`generate` cuts a prompt filling `max_length` (none: an IndexError)."""
  if isinstance(prompts, dict):
    return prompts  # Not plain prompts: the preprocessor's own structure.
  lengths = token_counts(task.preprocessor.tokenizer(prompts))
  if not lengths:
    raise ValueError(
        f"generate(): no prompts (got {prompts!r}); pass a string or a "
        "non-empty list of strings.")
  start = int(getattr(task.preprocessor, "add_start_token", True))
  for i, count in enumerate(lengths):
    if count + start >= max_length:
      raise ValueError(
          f"generate(): prompt {i} is {count + start} tokens long "
          f"({'[CLS] included' if start else 'no start token'}) and "
          f"max_length is {max_length}: nothing would be generated (a "
          "prompt longer than max_length is cut to it). Pass a max_length "
          f"above {count + start} (at most the model's "
          f"{task.backbone.max_sequence_length} positions) or shorten the "
          "prompt.")
  return prompts


def token_counts(token_ids):
  """Tokens per prompt of a tokenizer's lists, arrays or `tf.RaggedTensor`."""
  if hasattr(token_ids, "row_lengths"):  # tf.RaggedTensor
    return [int(n) for n in token_ids.row_lengths()]
  if isinstance(token_ids, list):
    if token_ids and not isinstance(token_ids[0], (list, tuple)):
      return [len(token_ids)]
    return [len(row) for row in token_ids]
  array = ops.convert_to_numpy(token_ids)
  return [array.shape[-1]] * (array.shape[0] if array.ndim > 1 else 1)
