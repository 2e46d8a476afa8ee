"""RealFormer in Keras 3: layers and models on the TensorFlow, JAX and PyTorch backends.

Written with `keras` and `keras.ops` only (keras-hub for the models); nothing
here imports TensorFlow or tf_keras. The tf_keras face is `realformer_tf.layers`.
"""
from realformer_tf.keras3.residual_attention import RESIDUAL_MODES
from realformer_tf.keras3.residual_attention import ResidualMultiHeadAttention
from realformer_tf.keras3.encoder_block import RealFormerEncoderBlock
from realformer_tf.keras3.decoder_block import RealFormerDecoderBlock
from realformer_tf.keras3.decoder_backbone import RealFormerDecoderBackbone
from realformer_tf.keras3.causal_lm import RealFormerCausalLM
from realformer_tf.keras3.causal_lm import RealFormerCausalLMPreprocessor
from realformer_tf.keras3.backbone import RealFormerBackbone
from realformer_tf.keras3.masked_lm import RealFormerMaskedLM
from realformer_tf.keras3.text_classifier import RealFormerTextClassifier
from realformer_tf.keras3.preprocessing import RealFormerMaskedLMPreprocessor
from realformer_tf.keras3.preprocessing import RealFormerTextClassifierPreprocessor
from realformer_tf.keras3.preprocessing import RealFormerTokenizer
from realformer_tf.keras3.weight_map import load_bert_backbone
# realformer_tf.keras3.weights (our tf_keras runs <-> RealFormerBackbone)
# imports TensorFlow: import it explicitly.
