"""`RealFormerBackbone`: keras-hub's `BertBackbone` with residual attention.

Same arguments, inputs, outputs and embedding layers, so keras-hub's BERT
preprocessors feed it; its blocks pass the running score sum on.
"""

import keras
from keras import ops
import keras_hub
from keras_hub.src.models.bert import bert_backbone

from realformer_tf.core import arguments
from realformer_tf.keras3 import embeddings
from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import input_checks
from realformer_tf.keras3 import saving
from realformer_tf.keras3 import tasks

GELU_APPROXIMATE = encoder_block.GELU_APPROXIMATE
get_activation = encoder_block.get_activation


def backbone_spec(*keys, **defaults):
  """A backbone's arguments (keras-hub's names), by key, in this order."""
  both = arguments.STACK + arguments.BLOCK
  return both.only(*keys).replace(**defaults)


class BackboneConfig(saving.WritesWhole, input_checks.ChecksInputs,
                     encoder_block.SpecConfig):
  """keras-hub's config convention on `core.arguments`, our backbones'
  input checks (`input_checks.ChecksInputs`), and their `save` and `export`
  written whole or not at all (`saving.WritesWhole`).

  As keras-hub's backbones, each argument is an attribute of its name
  (`_renamed`: where that name is a layer's) and in `get_config`. List it
  before the keras-hub base class.
  """
  _renamed = {}
  # keras-hub's `Backbone` takes `dtype` (named in our `__init__`s), its
  # functional base `name` and `trainable` only (keras/src/models/
  # functional.py drops any other keyword).
  _BASE_KEYWORDS = ("name", "trainable", "dtype")
  _KEYWORD_ONLY = ("dtype",)
  _deserialize = dict(encoder_block.SpecConfig._deserialize,
                      activation=lambda name: get_activation(name) and name)

  def save_to_preset(self, preset_dir, max_shard_size=10):
    """keras-hub's `Backbone.save_to_preset`, written whole or not at all
    (`saving.save_preset`); `metadata.json` then names our task classes
    (keras-hub lists those of the class' `__base__`, BERT's or GPT-2's:
    keras_hub/src/utils/preset_utils.py, `_save_metadata`).

    Raises:
      FileExistsError: As `saving.save_preset`, before anything is written.
    """
    def write(directory):
      super(BackboneConfig, self).save_to_preset(
          directory, max_shard_size=max_shard_size)
      tasks.write_preset_task_names(directory, self)
    saving.save_preset(preset_dir, write)

  @classmethod
  def from_preset(cls, preset, load_weights=True, **kwargs):
    """keras-hub's `Backbone.from_preset`; a preset that a killed save left
    set aside is named with its backup (`saving.check_not_set_aside`)."""
    saving.check_not_set_aside(preset)
    input_checks.check_preset(preset)
    return super().from_preset(preset, load_weights=load_weights, **kwargs)

  _serialize = dict(encoder_block.SpecConfig._serialize,
                    activation=lambda name: name)

  def _set_attributes(self):
    for a in self.ARGUMENTS.on(arguments.KERAS3):
      name = a.name(arguments.KERAS3)
      setattr(self, self._renamed.get(name, name), self._config[a.key])

  def _block_arguments(self, index):
    """The arguments (by key) each block takes from the backbone."""
    block_keys = arguments.BLOCK.keys(arguments.KERAS3)
    c = self._config
    return dict({k: v for k, v in c.items() if k in block_keys},
                inner_activation=get_activation(c["inner_activation"]),
                attention_dropout=c["output_dropout"], layer_index=index)


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerBackbone(BackboneConfig, keras_hub.models.Backbone):
  """A BERT encoder with RealFormer's residual attention (He et al., 2020).

  Args (keras-hub's names; docs/names.md maps them to the tf_keras
  `RealFormerEncoder`'s, which are still taken with a DeprecationWarning):
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
      dropout, max_sequence_length, num_segments, dtype: as `BertBackbone`.
    residual_attention: "sum" (RealFormer), "mean" (running mean, for models
      deeper than ~24 layers) or "none": then, with the default activation,
      this is `BertBackbone` exactly (`keras3_weight_map.load_bert_backbone`
      copies one's weights in).
    normalize_first: False = Post-LN (BERT, RealFormer), True = Pre-LN.
    final_layer_norm: LayerNorm the last block's output; None =
      `normalize_first` (as our tf_keras `RealFormerEncoder`).
    layer_norm_epsilon: LayerNorm epsilon of the blocks (the embeddings' is
      1e-12 as in BERT).
    score_dtype: dtype of the running score sum under mixed precision:
      "auto" (default), "float32" or "compute"; see docs/layers.md.
    attention_implementation: "auto", "reference" or "pallas"; see
      `ResidualMultiHeadAttention`.
    activation: Activation name of the feed-forward layer.
      "gelu_approximate" (default, the tanh form) is what both weight sources
      were trained with: keras-hub's `BertBackbone` (which hard-codes it)
      and our tf_keras `RealFormerEncoder` (`hidden_activation: gelu`).
      Keras' "gelu" is the exact form, which neither uses.

  Example:

  >>> backbone = RealFormerBackbone(vocabulary_size=100, num_layers=2,
  ...     num_heads=2, hidden_dim=16, intermediate_dim=32,
  ...     max_sequence_length=8)
  >>> out = backbone({"token_ids": np.ones((1, 4), "int32"),
  ...                 "segment_ids": np.zeros((1, 4), "int32"),
  ...                 "padding_mask": np.ones((1, 4), "int32")})
  >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
  ((1, 4, 16), (1, 16))
  """
  # `final_layer_norm` is the LayerNorm layer (None without one).
  _renamed = {"final_layer_norm": "use_final_layer_norm"}
  ARGUMENTS = backbone_spec(
      "vocab_size", "num_layers", "num_attention_heads", "hidden_size",
      "inner_dim", "output_dropout", "max_sequence_length",
      "type_vocab_size", "residual_attention", "norm_first",
      "final_layer_norm", "norm_epsilon", "score_dtype", "inner_activation",
      "attention_implementation",
      # BertBackbone's defaults.
      output_dropout=0.1, type_vocab_size=2, inner_activation=GELU_APPROXIMATE)

  def __init__(self, *args, dtype=None, **kwargs):
    self._config, kwargs = self._bind(args, kwargs)
    c = self._config
    if c["final_layer_norm"] is None:
      c["final_layer_norm"] = c["norm_first"]
    (vocabulary_size, num_heads, hidden_dim, dropout, max_sequence_length,
     num_segments, norm_epsilon) = (
         c[k] for k in ("vocab_size", "num_attention_heads", "hidden_size",
                        "output_dropout", "max_sequence_length",
                        "type_vocab_size", "norm_epsilon"))
    if hidden_dim % num_heads:
      raise ValueError(f"hidden_dim={hidden_dim} is not divisible by "
                       f"num_heads={num_heads}.")
    init = bert_backbone.bert_kernel_initializer
    # === Layers (BertBackbone's, same names) ===
    self.token_embedding = embeddings.ReversibleEmbedding(
        input_dim=vocabulary_size, output_dim=hidden_dim,
        embeddings_initializer=init(), dtype=dtype, name="token_embedding")
    self.position_embedding = keras_hub.layers.PositionEmbedding(
        initializer=init(), sequence_length=max_sequence_length, dtype=dtype,
        name="position_embedding")
    self.segment_embedding = embeddings.Embedding(
        input_dim=num_segments, output_dim=hidden_dim,
        embeddings_initializer=init(), dtype=dtype, name="segment_embedding")
    self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
    self.embeddings_layer_norm = keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, dtype=dtype, name="embeddings_layer_norm")
    self.embeddings_dropout = hashed_dropout.HashedDropout(
        dropout, dtype=dtype, name="embeddings_dropout")
    self.transformer_layers = [
        encoder_block.RealFormerEncoderBlock(
            **arguments.BLOCK.named(arguments.KERAS3, dict(
                self._block_arguments(i), kernel_initializer=init())),
            dtype=dtype, name=f"transformer_layer_{i}")
        for i in range(c["num_layers"])]
    self.final_layer_norm = None
    if c["final_layer_norm"]:
      self.final_layer_norm = keras.layers.LayerNormalization(
          axis=-1, epsilon=norm_epsilon, dtype=dtype, name="final_layer_norm")
    self.pooled_dense = keras.layers.Dense(
        hidden_dim, kernel_initializer=init(), activation="tanh", dtype=dtype,
        name="pooled_dense")

    # === Functional Model ===
    ids = lambda name: keras.Input(shape=(None,), dtype="int32", name=name)
    inputs = {name: ids(name)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    tokens = self.token_embedding(inputs["token_ids"])
    x = self.embeddings_add((tokens, self.position_embedding(tokens),
                             self.segment_embedding(inputs["segment_ids"])))
    x = self.embeddings_dropout(self.embeddings_layer_norm(x))
    # [batch, 1, seq]: one padding mask row for every query, as keras-hub's
    # `merge_padding_and_attention_mask`; it enters each softmax only.
    attention_mask = ops.expand_dims(inputs["padding_mask"], axis=1)
    scores = None
    for block in self.transformer_layers:
      x, scores = block(x, scores=scores, attention_mask=attention_mask)
    if self.final_layer_norm is not None:
      x = self.final_layer_norm(x)
    super().__init__(
        inputs=inputs,
        outputs={"sequence_output": x,
                 "pooled_output": self.pooled_dense(x[:, 0, :])},
        dtype=dtype, **kwargs)

    self._set_attributes()
    self.cls_token_index = 0
