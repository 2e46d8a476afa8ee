"""Deprecated path of `realformer_tf.layers.encoder_block` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.layers.encoder_block import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.layers.realformer_block is deprecated: import realformer_tf.layers.encoder_block "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
