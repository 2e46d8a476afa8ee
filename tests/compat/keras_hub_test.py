"""Upstream keras-hub defects a workaround of ours exists for.

Each test asserts the defect itself, so it fails once keras-hub fixes it:
then the workaround named in its message can go.
"""

import keras_hub
import numpy as np
import pytest

_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]


def test_generate_cuts_a_prompt_that_fills_max_length():
  """`compat.keras_hub.check_prompts`: `CausalLM.generate` preprocesses a
  prompt to `max_length` tokens, cut and all positions taken, silently."""
  preprocessor = keras_hub.models.CausalLMPreprocessor(
      keras_hub.models.BertTokenizer(vocabulary=_VOCAB), sequence_length=8)
  out = preprocessor.generate_preprocess(["the cat sat the cat sat"],
                                         sequence_length=4)
  assert np.asarray(out["token_ids"]).tolist() == [[2, 5, 6, 7]], (
      "upstream fixed the prompt cut: delete compat.keras_hub.check_prompts")
  assert np.asarray(out["padding_mask"]).all()


def test_position_embedding_past_its_length_fails_unnamed():
  """`RealFormerCausalLM._check_generate_length`: `generate` past the
  backbone's positions fails deep inside `PositionEmbedding`."""
  layer = keras_hub.layers.PositionEmbedding(sequence_length=4)
  with pytest.raises(Exception) as raised:
    layer(np.zeros((1, 6, 8), "float32"))
  assert not isinstance(raised.value, ValueError), (
      "upstream checks the length: delete _check_generate_length")
