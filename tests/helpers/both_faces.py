"""Blocks of both faces built alike, and their NumPy reference outputs.

For `tests/core/both_faces_test.py`: a tf_keras block and a Keras 3 block of
the same kind, arguments and weights (the Keras 3 block takes the tf_keras
block's), called on the same inputs; the reference is the NumPy code of
`numpy_reference` / `numpy_decoder_reference`, which shares nothing with the
package.
"""

import keras
import numpy as np
import tensorflow as tf

from realformer_tf.keras3 import decoder_block as k3_decoder
from realformer_tf.keras3 import encoder_block as k3_encoder
from realformer_tf.layers import decoder_block as tf_decoder
from realformer_tf.layers import encoder_block as tf_encoder
from tests.helpers import layer_checks
from tests.helpers import numpy_decoder_reference as ndr
from tests.helpers import numpy_reference

B, T, S, D, N = 2, 5, 6, 16, 4
KINDS = ("encoder", "decoder", "decoder_only")
# Each kind's feed-forward activation: the encoder's default family, the
# decoder's default.
_ACTIVATION = {"encoder": "gelu", "decoder": "relu", "decoder_only": "relu"}


def inputs(seed=0):
  rng = np.random.default_rng(seed)
  pad = np.ones((B, T, T), np.int32)
  pad[1, :, 3:] = 0
  cross = np.ones((B, T, S), np.int32)
  cross[0, :, 4:] = 0
  f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)
  return dict(x=f32(B, T, D), memory=f32(B, S, D), prev=f32(B, N, T, T),
              prev_cross=f32(B, N, T, S), mask=pad, cross_mask=cross)


def blocks(kind, mode, norm_first, policy):
  """`(tf_keras block, Keras 3 block)`, built, with the same weights."""
  common = dict(residual_attention=mode, layer_index=1,
                score_dtype="auto")
  data = inputs()
  with layer_checks.mixed_precision_scope(policy):
    cls = tf_encoder.RealFormerEncoderBlock if kind == "encoder" else (
        tf_decoder.RealFormerDecoderBlock)
    extra = {} if kind == "encoder" else dict(
        cross_attention=kind == "decoder")
    tf_block = cls(num_attention_heads=N, inner_dim=24, norm_first=norm_first,
                   inner_activation=_ACTIVATION[kind], **common, **extra)
    call(tf_block, kind, data)
  cls = k3_encoder.RealFormerEncoderBlock if kind == "encoder" else (
      k3_decoder.RealFormerDecoderBlock)
  k3_block = cls(num_heads=N, intermediate_dim=24, normalize_first=norm_first,
                 activation=_ACTIVATION[kind], dtype=policy, **common, **extra)
  call(k3_block, kind, data)
  k3_block.set_weights(tf_block.get_weights())
  return tf_block, k3_block


def call(block, kind, data):
  """`(hidden, scores)` (the self-attention's), plus the cross scores."""
  if kind == "encoder":
    return block(data["x"], scores=data["prev"],
                 attention_mask=data["mask"])
  cross = kind == "decoder"
  out = block(data["x"], data["memory"] if cross else None,
              self_scores=data["prev"],
              cross_scores=data["prev_cross"] if cross else None,
              self_attention_mask=data["mask"],
              cross_attention_mask=data["cross_mask"] if cross else None)
  return tuple(out[:3] if cross else out[:2])


def reference(block, kind, mode, norm_first, data):
  """The NumPy outputs of `call` for `block`'s weights."""
  if kind == "encoder":
    activation = numpy_reference.gelu_erf
    out, scores, _ = numpy_reference.block(
        data["x"], numpy_reference.block_weights(block), data["mask"],
        data["prev"], mode, 1, norm_first, activation)
    return out, scores
  cross = kind == "decoder"
  out, self_scores, cross_scores = ndr.decoder_block(
      data["x"], data["memory"] if cross else None,
      ndr.decoder_block_weights(block), data["mask"] * ndr.causal_mask(B, T),
      data["cross_mask"], data["prev"], data["prev_cross"] if cross else None,
      mode, mode, 1, norm_first, "relu")
  return (out, self_scores, cross_scores) if cross else (out, self_scores)


def numpy(x):
  if isinstance(x, tf.Tensor):
    return tf.cast(x, tf.float32).numpy()
  return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def dtype(x):
  return keras.backend.standardize_dtype(x.dtype.name if isinstance(
      x, tf.Tensor) else x.dtype)
