"""Deprecated path of `realformer_tf.networks.seq2seq` (renamed; this alias goes in 0.2)."""
import warnings

from realformer_tf.networks.seq2seq import *  # noqa: F401,F403  pylint: disable=wildcard-import

warnings.warn(
    "realformer_tf.networks.realformer_seq2seq is deprecated: import realformer_tf.networks.seq2seq "
    "(this alias goes in realformer_tf 0.2).", DeprecationWarning, stacklevel=2)
