"""Deprecated path of `realformer_tf.training.lr_schedule` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.training.lr_schedule import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.training.schedule is deprecated: import realformer_tf.training.lr_schedule "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
