"""`RealFormerMaskedLM`: keras-hub's `BertMaskedLM` on a `RealFormerBackbone`.

`BertMaskedLM` (keras_hub/src/models/bert/bert_masked_lm.py) builds its
`MaskedLMHead` from what `RealFormerBackbone` has as `BertBackbone` does
(`vocabulary_size`, `token_embedding`, the three inputs and
`sequence_output`), and its base `MaskedLM` supplies `compile`'s defaults; so
only the classes it is bound to change (and `tasks.realformer_task` adds
its checks, export signature and preset names). `backbone_cls` is what
keras-hub's `from_preset`/`save_to_preset` dispatch on (`Task.from_preset`,
keras_hub/src/models/task.py); with it, `BertMaskedLM.from_preset` of a saved
RealFormer preset also finds this class.

The head's transform uses Keras' exact "gelu", as `BertMaskedLM`'s; the
backbone's blocks use the tanh form (see `RealFormerBackbone`). The head's
tied logits (`token_embedding(x, reverse=True)`) and their gradients run in
the compute dtype: the backbone's `embeddings.ReversibleEmbedding` computes
the reverse projection in it when `reverse_dtype` is unset (keras-hub's own
`BertMaskedLM` runs those three GEMMs in float32).
"""

import keras
import keras_hub

from realformer_tf.keras3 import backbone
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import tasks


@keras.saving.register_keras_serializable(package="realformer_tf")
@tasks.realformer_task
class RealFormerMaskedLM(keras_hub.models.BertMaskedLM):
  """Masked language model on a `RealFormerBackbone`.

  `@tasks.realformer_task`: a preprocessor with more ids or positions than
  the backbone is refused, naming both sizes; `export()` serves the
  preprocessor's input names at its lengths on TensorFlow and JAX; presets'
  `metadata.json` names our task classes.

  Args:
    backbone: A `RealFormerBackbone`.
    preprocessor: A `RealFormerMaskedLMPreprocessor` or keras-hub's
      `BertMaskedLMPreprocessor` (same thing), or None (inputs preprocessed:
      `token_ids`, `segment_ids`, `padding_mask`, `mask_positions`).
  """
  backbone_cls = backbone.RealFormerBackbone
  preprocessor_cls = preprocessing.RealFormerMaskedLMPreprocessor

