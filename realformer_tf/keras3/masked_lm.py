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
backbone's blocks use the tanh form (see `RealFormerBackbone`).
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

  def __init__(self, backbone, preprocessor=None, **kwargs):
    # The tied logits in the compute dtype. keras-hub's `MaskedLMHead` calls
    # `token_embedding(x, reverse=True)`, and `Embedding` does not autocast
    # its table, so under a mixed policy the vocabulary GEMM and its two
    # gradient GEMMs (the step's largest after the encoder's) ran in float32
    # with `x` cast up (keras-hub's `BertMaskedLM` too; see
    # benchmarks/README.md, "Where the Keras 3 step's time goes").
    # `reverse_dtype` casts both operands; the dot still accumulates in
    # float32, the head returned the logits in the compute dtype before
    # too, and the loss computes in float32. A float32 policy: unchanged.
    embedding = backbone.token_embedding
    compute_dtype = backbone.dtype_policy.compute_dtype
    if (embedding.reverse_dtype is None and compute_dtype != "float32"
        and compute_dtype != backbone.dtype_policy.variable_dtype):
      embedding.reverse_dtype = compute_dtype
    super().__init__(backbone, preprocessor=preprocessor, **kwargs)
