"""RealFormer layers: residual multi-head attention and the encoder block."""
from realformer_tf.layers.encoder_block import RealFormerEncoderBlock
from realformer_tf.layers.hashed_dropout import HashedDropout
from realformer_tf.layers.residual_attention import RESIDUAL_MODES
from realformer_tf.layers.residual_attention import ResidualMultiHeadAttention
from realformer_tf.layers.residual_attention import residual_dot_product_attention
from realformer_tf.layers.decoder_block import RealFormerDecoderBlock
