"""Independent NumPy decoder block (RealFormer, one residual path per attention).

Written from the paper's Section 3 and Model Garden's Post-LN / Pre-LN
decoder layout; reuses only `numpy_reference`'s attention, LayerNorm and GELU
(themselves written from the equations). Weights are read out of the Keras
layers as plain arrays.
"""

import numpy as np
from scipy import special

from tests.helpers import numpy_reference


def block_inputs(batch, target, source, hidden, heads, seed=0):
  """Random inputs of a decoder block, the same for both faces' tests.

  Args:
    batch, target, source, hidden, heads: The sizes; `batch` >= 2, `target`
      > 3 and `source` > 5 (example 1 pads targets 3 and up, example 0
      sources 5 and up).
    seed: Of the NumPy generator.

  Returns:
    {"x": [batch, target, hidden], "memory": [batch, source, hidden],
     "prev_self": [batch, heads, target, target] and "prev_cross": [batch,
     heads, target, source] incoming scores (float32); "self_mask" [batch,
     target, target] and "cross_mask" [batch, target, source] (int32 0/1)}.
  """
  rng = np.random.default_rng(seed)
  inputs = dict(
      x=rng.normal(size=(batch, target, hidden)).astype(np.float32),
      memory=rng.normal(size=(batch, source, hidden)).astype(np.float32),
      prev_self=rng.normal(
          size=(batch, heads, target, target)).astype(np.float32),
      prev_cross=rng.normal(
          size=(batch, heads, target, source)).astype(np.float32),
      self_mask=np.ones((batch, target, target), np.int32),
      cross_mask=np.ones((batch, target, source), np.int32))
  inputs["self_mask"][1, :, 3:] = 0   # padded target positions
  inputs["cross_mask"][0, :, 5:] = 0  # padded source positions
  return inputs


def causal_mask(batch, length):
  """[B, T, T] lower-triangular 0/1 mask."""
  return np.broadcast_to(np.tril(np.ones((length, length), np.int32)),
                         (batch, length, length))


def _activation(name):
  if name == "relu":
    return lambda x: np.maximum(x, 0.0)
  if name == "gelu":  # Keras' "gelu": the exact (erf) form.
    return lambda x: 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))
  if name == "gelu_approximate":  # GPT-2's tanh form.
    return lambda x: 0.5 * x * (1.0 + np.tanh(
        np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
  raise ValueError(name)


def attention_weights(layer):
  get = lambda l: [v.numpy() for v in l.weights]
  out = {}
  for key, dense in (("q", layer._query_dense), ("k", layer._key_dense),
                     ("v", layer._value_dense), ("o", layer._output_dense)):
    values = get(dense)
    out[f"{key}_kernel"] = values[0]
    out[f"{key}_bias"] = (values[1] if len(values) > 1 else
                          np.zeros(values[0].shape[1:] if key != "o" else
                                   values[0].shape[-1:], np.float32))
  return out


def decoder_block_weights(block):
  """Reads a RealFormerDecoderBlock's weights."""
  get = lambda l: [v.numpy() for v in l.weights]
  w = dict(self_att=attention_weights(block.self_attention),
           self_ln=get(block.self_attention_layer_norm),
           inner=get(block.intermediate_dense), ffn=get(block.output_dense),
           out_ln=get(block.output_layer_norm))
  if hasattr(block, "encdec_attention"):
    w.update(cross_att=attention_weights(block.encdec_attention),
             cross_ln=get(block.encdec_attention_layer_norm))
  return w


def decoder_block(x, memory, w, self_mask, cross_mask, prev_self, prev_cross,
                  self_mode, cross_mode, layer_index, norm_first=False,
                  activation="relu", eps=1e-12):
  """One decoder block; returns (out, self_scores, cross_scores).

  `self_mask` must already contain the causal mask; `memory=None` means no
  cross-attention (decoder-only). `*_mode` is "sum", "mean" or "none" per
  path.
  """
  ln = lambda h, p: numpy_reference.layer_norm(h, *p, eps=eps)

  def sublayer(source, out, norm):
    return source + out if norm_first else ln(source + out, norm)

  q = ln(x, w["self_ln"]) if norm_first else x
  att, self_scores, _ = numpy_reference.attention(
      q, q, w["self_att"], self_mask, prev_self, self_mode, layer_index)
  x = sublayer(x, att, w["self_ln"])
  cross_scores = prev_cross
  if memory is not None:
    q = ln(x, w["cross_ln"]) if norm_first else x
    att, cross_scores, _ = numpy_reference.attention(
        q, memory, w["cross_att"], cross_mask, prev_cross, cross_mode,
        layer_index)
    x = sublayer(x, att, w["cross_ln"])
  h = ln(x, w["out_ln"]) if norm_first else x
  inner = _activation(activation)(h @ w["inner"][0] + w["inner"][1])
  return sublayer(x, inner @ w["ffn"][0] + w["ffn"][1], w["out_ln"]), (
      self_scores), cross_scores


def decoder_only_lm(backbone, token_ids, padding_mask, mode, norm_first=True,
                    activation="gelu_approximate", eps=1e-5):
  """A GPT-2-layout decoder-only LM from a backbone's weights.

  Reads the keras-hub `GPT2Backbone` attribute names (`token_embedding`,
  `position_embedding`, `transformer_layers`, `layer_norm`); the blocks are
  `decoder_block`s without memory, chained through their self-attention
  scores, the padding mask masking keys. Returns `(sequence_output,
  logits)`; the logits are the output times the transposed token embedding.
  """
  get = lambda l: [np.asarray(v.numpy()) for v in l.weights]
  embeddings = get(backbone.token_embedding)[0]
  positions = get(backbone.position_embedding)[0]
  batch, length = token_ids.shape
  x = embeddings[token_ids] + positions[None, :length]
  mask = causal_mask(batch, length) * padding_mask[:, None, :]
  scores = None
  for i, block in enumerate(backbone.transformer_layers):
    x, scores, _ = decoder_block(
        x, None, decoder_block_weights(block), mask, None, scores, None,
        mode, "none", i, norm_first, activation, eps)
  x = numpy_reference.layer_norm(x, *get(backbone.layer_norm), eps=eps)
  return x, x @ embeddings.T
