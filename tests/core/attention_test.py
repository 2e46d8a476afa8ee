"""core.attention over a NumPy ops namespace, against the NumPy reference.

The core takes any namespace with `keras.ops`' names; this one is NumPy's,
so the paper's Eq. 5 is checked here with neither TensorFlow nor Keras.
"""

import types

import numpy as np
import pytest

from realformer_tf.core import attention
from tests.helpers import numpy_reference


def _softmax(x, axis):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


NP_OPS = types.SimpleNamespace(
    multiply=np.multiply, add=np.add, subtract=np.subtract,
    divide=np.divide, einsum=np.einsum, max=np.max, softmax=_softmax,
    stop_gradient=lambda x: x, expand_dims=np.expand_dims,
    less_equal=np.less_equal, arange=np.arange,
    cast=lambda x, dtype: np.asarray(x).astype(dtype),
    dtype=lambda x: np.asarray(x).dtype.name)


@pytest.mark.parametrize("mode", ["sum", "mean", "none"])
def test_eq5_matches_the_reference(mode):
  rng = np.random.default_rng(0)
  q, k, v = (rng.normal(size=(2, n, 3, 4)).astype(np.float32)
             for n in (5, 6, 6))
  prev = rng.normal(size=(2, 3, 5, 6)).astype(np.float32)
  mask = np.ones((2, 5, 6), np.int32)
  mask[1, :, 4:] = 0
  bias = attention.mask_bias(NP_OPS, mask[:, None], "float32", -1e9)
  context, scores, probs = attention.residual_dot_product_attention(
      NP_OPS, q, k, v, prev, bias, mode=mode, layer_index=2)
  # The reference projects; identity projections give the heads as they are.
  eye = np.eye(12, dtype=np.float32).reshape(12, 3, 4)
  w = dict(q_kernel=eye, k_kernel=eye, v_kernel=eye,
           q_bias=np.zeros((3, 4)), k_bias=np.zeros((3, 4)),
           v_bias=np.zeros((3, 4)), o_kernel=eye.reshape(3, 4, 12),
           o_bias=np.zeros(12))
  flat = lambda x: x.reshape(x.shape[0], x.shape[1], 12)
  out, want_scores, want_probs = numpy_reference.attention(
      flat(q), flat(k), w, mask, prev, mode, 2)
  np.testing.assert_allclose(want_scores, scores, atol=1e-5)
  np.testing.assert_allclose(want_probs, probs, atol=1e-6)
  # Identity projections: the reference's values are `k`'s heads.
  np.testing.assert_allclose(
      out, flat(np.einsum("bnts,bsnh->btnh", want_probs, k)), atol=1e-5)
  np.testing.assert_allclose(
      np.einsum("bnts,bsnh->btnh", want_probs, v), context, atol=1e-5)


def test_dropout_callback_weighs_values_not_probs():
  q = k = v = np.ones((1, 2, 1, 2), np.float32)
  context, _, probs = attention.residual_dot_product_attention(
      NP_OPS, q, k, v, dropout=lambda p: p * 0)
  np.testing.assert_allclose(probs, 0.5)
  np.testing.assert_allclose(context, 0.0)


def test_causal_mask_offset():
  mask = attention.causal_mask(NP_OPS, 2, 5, 2)
  np.testing.assert_array_equal(
      mask[0], [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
