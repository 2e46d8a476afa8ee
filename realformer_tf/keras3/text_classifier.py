"""`RealFormerTextClassifier`: keras-hub's `BertTextClassifier` on a
`RealFormerBackbone` (only the bound classes change).
"""

import keras
import keras_hub

from realformer_tf.keras3 import backbone
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import tasks


@keras.saving.register_keras_serializable(package="realformer_tf")
@tasks.realformer_task
class RealFormerTextClassifier(keras_hub.models.BertTextClassifier):
  """Sequence classifier on a `RealFormerBackbone`'s pooled output, with
  `BertTextClassifier`'s arguments (`preprocessor`: ours, keras-hub's BERT
  one, or None for preprocessed inputs) and `tasks.RealFormerTask`'s checks.
  """
  backbone_cls = backbone.RealFormerBackbone
  preprocessor_cls = preprocessing.RealFormerTextClassifierPreprocessor
