"""Every block of both faces against one NumPy reference and each other.

The drift-proof test (issue 28, item 5): the tf_keras and Keras 3 faces'
encoder block, decoder block (self- and cross-attention) and decoder-only
block, in each residual mode, Post-LN and Pre-LN, under float32 and
mixed_bfloat16, with the same weights; and each face's dtype rules pinned:
Model Garden's (float32 LayerNorm and activation) for tf_keras, keras-hub's
(all in the compute dtype) for Keras 3, scores "auto" in both.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from realformer_tf.keras3 import residual_attention as k3_attention
from realformer_tf.layers import residual_attention as tf_attention
from tests.helpers import both_faces
from tests.helpers import layer_checks

_CASES = list(itertools.product(both_faces.KINDS, ("sum", "mean", "none"),
                                (False, True), ("float32", "mixed_bfloat16")))


@pytest.mark.parametrize("kind, mode, norm_first, policy", _CASES)
def test_both_faces_match_the_reference_and_each_other(kind, mode, norm_first,
                                                       policy):
  data = both_faces.inputs()
  tf_block, k3_block = both_faces.blocks(kind, mode, norm_first, policy)
  with layer_checks.mixed_precision_scope(policy):
    tf_out = both_faces.call(tf_block, kind, data)
  k3_out = both_faces.call(k3_block, kind, data)
  want = both_faces.reference(tf_block, kind, mode, norm_first, data)
  # bfloat16 keeps 8 bits: scores ~ 1e-2 off, LayerNorm outputs more.
  atol = 1e-5 if policy == "float32" else 0.15
  for name, w, a, b in zip(("hidden", "self_scores", "cross_scores"), want,
                           tf_out, k3_out):
    a, b = both_faces.numpy(a), both_faces.numpy(b)
    np.testing.assert_allclose(w, a, atol=atol, err_msg=f"tf_keras {name}")
    np.testing.assert_allclose(w, b, atol=atol, err_msg=f"keras3 {name}")
    np.testing.assert_allclose(a, b, atol=atol, err_msg=f"faces' {name}")
  if policy == "float32":
    return
  # Scores: "auto" = the compute dtype under bfloat16, on both faces.
  assert {both_faces.dtype(t) for t in tf_out[1:] + k3_out[1:]} == {
      "bfloat16"}
  # tf_keras: Model Garden's float32 LayerNorm and activation, so a Post-LN
  # block's output is float32.
  tf_norm = (tf_block._output_layer_norm if kind == "encoder"  # pylint: disable=protected-access
             else tf_block.output_layer_norm)
  tf_act = (tf_block._intermediate_activation_layer if kind == "encoder"  # pylint: disable=protected-access
            else tf_block.intermediate_activation_layer)
  assert (tf_norm.compute_dtype, tf_act.compute_dtype) == ("float32",
                                                           "float32")
  assert both_faces.dtype(tf_out[0]) == (
      "bfloat16" if norm_first else "float32")
  # Keras 3: keras-hub's rule, everything in the compute dtype.
  k3_norm = (k3_block._output_layer_norm if kind == "encoder"  # pylint: disable=protected-access
             else k3_block.output_layer_norm)
  k3_act = (k3_block._intermediate_activation_layer if kind == "encoder"  # pylint: disable=protected-access
            else k3_block.intermediate_dense)
  assert (k3_norm.compute_dtype, k3_act.compute_dtype) == ("bfloat16",
                                                           "bfloat16")
  assert both_faces.dtype(k3_out[0]) == "bfloat16"


@pytest.mark.parametrize("policy, want", [
    ("float32", "float32"), ("mixed_float16", "float32"),
    ("mixed_bfloat16", "bfloat16")])
def test_auto_score_dtype_resolves_alike_on_both_faces(policy, want):
  data = both_faces.inputs()
  query, prev = data["x"], data["prev"]
  with layer_checks.mixed_precision_scope(policy):
    tf_layer = tf_attention.ResidualMultiHeadAttention(num_heads=4, key_dim=4)
    _, tf_scores = tf_layer(query, query, prev_scores=prev)
  k3_layer = k3_attention.ResidualMultiHeadAttention(num_heads=4, key_dim=4,
                                                     dtype=policy)
  _, k3_scores = k3_layer(query, prev_scores=prev)
  assert tf_scores.dtype == tf.as_dtype(want)
  assert keras.backend.standardize_dtype(k3_scores.dtype) == want
