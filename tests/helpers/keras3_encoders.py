"""Tiny encoders and inputs shared by the Keras 3 encoder-side tests."""

import keras
import numpy as np

TINY = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, dropout=0.0, max_sequence_length=12,
            num_segments=2)
# The same encoder as a tf_keras `RealFormerEncoderConfig`.
TINY_TF_KERAS = dict(vocab_size=50, num_layers=2, num_attention_heads=2,
                     hidden_size=16, intermediate_size=32, dropout_rate=0.0,
                     attention_dropout_rate=0.0, max_position_embeddings=12,
                     type_vocab_size=2)


def randomize(model, seed=0, stddev=0.3):
  """Draws every weight of `model` (Keras 3 or tf_keras) from N(0, stddev),
  LayerNorm gammas from N(1, 0.1): BERT's initializer (stddev 0.02) leaves
  attention nearly uniform, where parity tests would barely see the scores.
  """
  rng = np.random.default_rng(seed)
  for v in model.weights:
    mean, std = (1.0, 0.1) if "gamma" in (v.path if hasattr(v, "path")
                                         else v.name) else (0.0, stddev)
    v.assign(rng.normal(mean, std, tuple(v.shape)).astype("float32"))
  return model


def backbone_inputs(batch=2, seq=8, vocab=50, seed=0):
  """Random ids and segments; the second example is padded after 5 tokens."""
  rng = np.random.default_rng(seed)
  padding_mask = np.ones((batch, seq), "int32")
  padding_mask[1:, 5:] = 0
  return {"token_ids": rng.integers(1, vocab, (batch, seq)).astype("int32"),
          "segment_ids": (np.arange(seq)[None] >= seq // 2).repeat(
              batch, 0).astype("int32"),
          "padding_mask": padding_mask}


def tf_keras_inputs(inputs):
  """`backbone_inputs` under the tf_keras encoder's input names."""
  return dict(input_word_ids=inputs["token_ids"],
              input_type_ids=inputs["segment_ids"],
              input_mask=inputs["padding_mask"])


def to_numpy(outputs):
  """`{name: np.ndarray}` of a model's dict of outputs (any backend)."""
  return {k: np.asarray(keras.ops.convert_to_numpy(v))
          for k, v in outputs.items() if k in ("sequence_output",
                                               "pooled_output")}


def assert_outputs_close(actual, expected, atol=1e-5):
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(actual[key], expected[key], atol=atol, rtol=0,
                               err_msg=key)
