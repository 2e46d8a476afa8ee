"""RealFormer in Keras 3: layers and models on the TensorFlow, JAX and PyTorch backends.

Written with `keras` and `keras.ops` only (keras-hub for the models); nothing
here imports TensorFlow or tf_keras. The tf_keras face is `realformer_tf.layers`.
"""
from realformer_tf.keras3.residual_attention import RESIDUAL_MODES
from realformer_tf.keras3.residual_attention import ResidualMultiHeadAttention
from realformer_tf.keras3.encoder_block import RealFormerEncoderBlock
