"""Deprecated path of `realformer_tf.networks.encoder` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.networks.encoder import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.networks.realformer_encoder is deprecated: import realformer_tf.networks.encoder "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
