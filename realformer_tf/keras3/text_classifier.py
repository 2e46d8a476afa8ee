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
  """Sequence classifier on a `RealFormerBackbone`'s pooled output.

  `@tasks.realformer_task`: a preprocessor with more ids or positions than
  the backbone is refused, naming both sizes; `export()` serves the
  preprocessor's input names at its lengths on TensorFlow and JAX; presets'
  `metadata.json` names our task classes.

  Args:
    backbone: A `RealFormerBackbone`.
    num_classes: Number of classes.
    preprocessor: A `RealFormerTextClassifierPreprocessor` or keras-hub's
      `BertTextClassifierPreprocessor`, or None (preprocessed inputs).
    activation: Activation of the logits layer (None: logits).
    dropout: Dropout on the pooled output.
  """
  backbone_cls = backbone.RealFormerBackbone
  preprocessor_cls = preprocessing.RealFormerTextClassifierPreprocessor
