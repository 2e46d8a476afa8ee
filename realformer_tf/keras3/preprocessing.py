"""keras-hub's BERT tokenizer and preprocessors, bound to `RealFormerBackbone`.

`RealFormerBackbone` takes `BertBackbone`'s inputs, so keras-hub's
`BertTokenizer`, `BertMaskedLMPreprocessor` and
`BertTextClassifierPreprocessor` feed it unchanged: pass them as they are.
The subclasses here change two things. `backbone_cls`: keras-hub's
`from_preset` picks a tokenizer or preprocessor class by the backbone class
a preset was saved with (keras_hub/src/models/preprocessor.py and
keras_hub/src/tokenizers/tokenizer.py, `from_preset`: `find_subclass`), so a
`RealFormerMaskedLM.save_to_preset(...)` directory loads back only when
these exist.
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
