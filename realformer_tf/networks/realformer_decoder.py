"""Deprecated path of `realformer_tf.networks.decoder` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.networks.decoder import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.networks.realformer_decoder is deprecated: import realformer_tf.networks.decoder "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
