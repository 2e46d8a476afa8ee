"""realformer_tf: RealFormer (residual attention Transformers) on TF Model Garden.

`realformer_tf.layers` and `realformer_tf.networks` (tf_keras) load on first
access, so that `realformer_tf.keras3` imports without TensorFlow (Keras 3 on
JAX or PyTorch).
"""
import importlib

__version__ = "0.1.0"

_LAZY_SUBPACKAGES = ("layers", "networks")


def __getattr__(name):
  if name in _LAZY_SUBPACKAGES:
    return importlib.import_module(f"realformer_tf.{name}")
  raise AttributeError(f"module 'realformer_tf' has no attribute {name!r}")
