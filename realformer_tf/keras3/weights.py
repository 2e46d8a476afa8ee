"""Deprecated path of `realformer_tf.checkpoints.keras3_bridge` (moved: the
Keras 3 face imports no TensorFlow; this alias goes in 0.2)."""
import warnings

from realformer_tf.checkpoints.keras3_bridge import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.keras3.weights is deprecated: import "
    "realformer_tf.checkpoints.keras3_bridge (this alias goes in "
    "realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
