"""Deprecated path of `realformer_tf.serving.heads` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.serving.heads import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.serving.serving_modules is deprecated: import realformer_tf.serving.heads "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
