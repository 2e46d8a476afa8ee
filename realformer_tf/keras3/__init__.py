"""RealFormer in Keras 3: layers and models on the TensorFlow, JAX and PyTorch backends.

Written with `keras`, `keras.ops` and keras-hub's public API only: nothing
here imports TensorFlow, tf_keras or Model Garden. The weight bridge to the
tf_keras face is `realformer_tf.checkpoints.keras3_bridge`.
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
from realformer_tf.keras3.saving import load_model
from realformer_tf.keras3.saving import save_model
