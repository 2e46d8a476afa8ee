"""Deprecated path of `realformer_tf.checkpoints.keras3_weight_map` (moved
beside the TF bridge that shares it; this alias goes in 0.2)."""
import warnings

from realformer_tf.checkpoints.keras3_weight_map import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.keras3.weight_map is deprecated: import "
    "realformer_tf.checkpoints.keras3_weight_map (this alias goes in "
    "realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
