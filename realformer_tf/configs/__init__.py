"""Configs: the RealFormer encoder config and registered experiments."""
from realformer_tf.configs.encoders import build_realformer_encoder
from realformer_tf.configs.encoders import encoder_config
from realformer_tf.configs.encoders import RealFormerEncoderConfig
