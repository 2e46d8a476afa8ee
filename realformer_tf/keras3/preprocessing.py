"""keras-hub's BERT tokenizer and preprocessors, bound to `RealFormerBackbone`.

keras-hub's own feed it unchanged; these exist for `backbone_cls`, by which
`from_preset` picks the classes, so a saved RealFormer preset loads back.
"""

import keras
import keras_hub

from realformer_tf.keras3 import backbone
from realformer_tf.keras3 import tasks


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerTokenizer(keras_hub.tokenizers.BertTokenizer):
  """keras-hub's `BertTokenizer` (WordPiece), for `RealFormerBackbone`."""
  backbone_cls = backbone.RealFormerBackbone


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerMaskedLMPreprocessor(
    tasks.PresetSequenceLength, keras_hub.models.BertMaskedLMPreprocessor):
  """keras-hub's `BertMaskedLMPreprocessor`, for `RealFormerBackbone`."""
  backbone_cls = backbone.RealFormerBackbone
  tokenizer_cls = RealFormerTokenizer


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerTextClassifierPreprocessor(
    tasks.PresetSequenceLength,
    keras_hub.models.BertTextClassifierPreprocessor):
  """keras-hub's `BertTextClassifierPreprocessor`, for `RealFormerBackbone`."""
  backbone_cls = backbone.RealFormerBackbone
  tokenizer_cls = RealFormerTokenizer
