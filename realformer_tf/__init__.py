"""realformer_tf: RealFormer (residual attention Transformers) on TF Model Garden."""
from realformer_tf import layers
from realformer_tf import networks

__version__ = "0.1.0"
