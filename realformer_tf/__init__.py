"""realformer_tf: RealFormer (residual attention Transformers) on TF Model Garden.

`realformer_tf.layers` and `realformer_tf.networks` (tf_keras) load on first
use (PEP 562), so the Keras 3 face, `realformer_tf.keras3`, imports on a
machine with JAX or PyTorch and no TensorFlow.
"""
import importlib

__version__ = "0.1.0"

_LAZY_SUBPACKAGES = ("layers", "networks")


def __getattr__(name):
  if name in _LAZY_SUBPACKAGES:
    return importlib.import_module(f"{__name__}.{name}")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
