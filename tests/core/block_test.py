"""core.block: the Post-LN / Pre-LN order and the residual add's dtype rule."""

import numpy as np

from realformer_tf.core import block
from tests.core import attention_test

OPS = attention_test.NP_OPS


def test_post_and_pre_ln_order():
  norm = lambda x: x * 10.0
  sublayers = [(norm, lambda x: x + 1.0), (norm, lambda x: x * 2.0)]
  # Post-LN: h = norm(h + f(h)); Pre-LN: h = h + f(norm(h)).
  post = block.residual_sublayers(OPS, np.float32(1.0), sublayers, False)
  pre = block.residual_sublayers(OPS, np.float32(1.0), sublayers, True)
  assert post == 10 * (30 + 2 * 30)
  assert pre == (1 + 11) + 2 * 10 * (1 + 11)


def test_crop_applies_to_the_first_source_only():
  hidden = np.arange(4, dtype=np.float32)
  out = block.residual_sublayers(
      OPS, hidden, [(lambda x: x, lambda x: x[:2]), (lambda x: x, np.negative)],
      False, crop=lambda x: x[:2])
  np.testing.assert_array_equal(out, [0.0, 0.0])


def test_residual_add_in_float32_when_either_is():
  a, b = np.float16(1.0), np.float32(2.0)
  assert block.residual_add(OPS, a, b).dtype == np.float32
  assert block.residual_add(OPS, a, a).dtype == np.float16
