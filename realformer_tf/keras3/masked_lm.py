"""`RealFormerMaskedLM`: keras-hub's `BertMaskedLM` on a `RealFormerBackbone`.

Only the bound classes change, and the head's activation and epsilon can
match Model Garden's `layers.MaskedLM` (a train.py run's head).
"""

import keras
import keras_hub

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import preprocessing
from realformer_tf.keras3 import tasks


@keras.saving.register_keras_serializable(package="realformer_tf")
@tasks.realformer_task
class RealFormerMaskedLM(keras_hub.models.BertMaskedLM):
  """Masked language model on a `RealFormerBackbone`.

  Args:
    backbone: A `RealFormerBackbone`.
    preprocessor: A `RealFormerMaskedLMPreprocessor` (or keras-hub's BERT
      one), or None (inputs preprocessed, `mask_positions` included).
    head_activation: "gelu" (keras-hub's) or "gelu_approximate" (Model
      Garden's and train.py's), or any Keras activation name.
    head_layer_norm_epsilon: 1e-5 (keras-hub's) or 1e-12 (Model Garden's).
    **kwargs: `keras_hub.models.Task`'s.

  Example:

  ```python
  import numpy as np
  from realformer_tf.keras3 import RealFormerBackbone, RealFormerMaskedLM

  backbone = RealFormerBackbone(vocabulary_size=100, num_layers=2,
                                num_heads=2, hidden_dim=16,
                                intermediate_dim=32, max_sequence_length=8)
  lm = RealFormerMaskedLM(backbone)
  logits = lm.predict({"token_ids": np.ones((1, 8), "int32"),
                       "segment_ids": np.zeros((1, 8), "int32"),
                       "padding_mask": np.ones((1, 8), "int32"),
                       "mask_positions": np.array([[1, 3]], "int32")})
  print(logits.shape)  # (1, 2, 100)
  ```
  """
  backbone_cls = backbone_lib.RealFormerBackbone
  preprocessor_cls = preprocessing.RealFormerMaskedLMPreprocessor

  def __init__(self, backbone, preprocessor=None, head_activation="gelu",
               head_layer_norm_epsilon=1e-5, **kwargs):
    # As `BertMaskedLM.__init__`, with the head's transform as asked.
    self.backbone = backbone
    self.preprocessor = preprocessor
    self.masked_lm_head = keras_hub.layers.MaskedLMHead(
        vocabulary_size=backbone.vocabulary_size,
        token_embedding=backbone.token_embedding,
        intermediate_activation=backbone_lib.get_activation(head_activation),
        layer_norm_epsilon=head_layer_norm_epsilon,
        # keras-hub's `bert_kernel_initializer()`, as `BertMaskedLM`'s.
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        dtype=backbone.dtype_policy,
        name="mlm_head")
    inputs = {**backbone.input,
              "mask_positions": keras.Input(shape=(None,), dtype="int32",
                                            name="mask_positions")}
    outputs = self.masked_lm_head(
        backbone(backbone.input)["sequence_output"], inputs["mask_positions"])
    keras_hub.models.MaskedLM.__init__(self, inputs=inputs, outputs=outputs,
                                       **kwargs)
    self.head_activation = head_activation
    self.head_layer_norm_epsilon = head_layer_norm_epsilon

  def get_config(self):
    return {**super().get_config(), "head_activation": self.head_activation,
            "head_layer_norm_epsilon": self.head_layer_norm_epsilon}

