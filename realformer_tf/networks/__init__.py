"""RealFormer networks."""
from realformer_tf.networks.realformer_encoder import RealFormerEncoder
