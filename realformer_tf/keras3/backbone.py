"""`RealFormerBackbone`: keras-hub's `BertBackbone` with residual attention.

Same arguments, inputs, outputs and embedding layers, so keras-hub's BERT
preprocessors feed it; its blocks pass the running score sum on.
"""

import keras
from keras import ops
import keras_hub
from keras_hub.src.models.bert import bert_backbone

from realformer_tf.keras3 import embeddings
from realformer_tf.keras3 import encoder_block
from realformer_tf.keras3 import hashed_dropout
from realformer_tf.keras3 import input_checks
from realformer_tf.keras3 import residual_attention as ra
from realformer_tf.keras3 import saving
from realformer_tf.keras3 import tasks

GELU_APPROXIMATE = encoder_block.GELU_APPROXIMATE
get_activation = encoder_block.get_activation
# The keywords keras-hub's `Backbone` takes besides `dtype`: its functional
# base's (which drops any other keyword).
BASE_KEYWORDS = ("name", "trainable")


class BackboneBase(saving.WritesWhole, input_checks.ChecksInputs):
  """Our backbones' input checks, whole-or-nothing `save` and `export`, and
  the config of the arguments both take. List it before the keras-hub base.
  """

  def save_to_preset(self, preset_dir, max_shard_size=10):
    """keras-hub's `Backbone.save_to_preset` through `saving.save_preset`
    (which raises its FileExistsError first); `metadata.json` names our task
    classes (keras-hub would list BERT's or GPT-2's)."""
    def write(directory):
      super(BackboneBase, self).save_to_preset(
          directory, max_shard_size=max_shard_size)
      tasks.write_preset_task_names(directory, self)
    saving.save_preset(preset_dir, write)

  @classmethod
  def from_preset(cls, preset, load_weights=True, **kwargs):
    """keras-hub's `Backbone.from_preset`, naming the backup of a preset a
    killed save left set aside."""
    saving.check_not_set_aside(preset)
    input_checks.check_preset(preset)
    return super().from_preset(preset, load_weights=load_weights, **kwargs)

  # The arguments both backbones take, kept as attributes of their names;
  # each backbone adds its own to the config.
  _CONFIG_NAMES = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                  "intermediate_dim", "dropout", "max_sequence_length",
                  "residual_attention", "normalize_first",
                  "layer_norm_epsilon", "score_dtype", "activation",
                  "attention_implementation")

  def get_config(self):
    return {**super().get_config(),
            **{name: getattr(self, name) for name in self._CONFIG_NAMES}}


@keras.saving.register_keras_serializable(package="realformer_tf")
class RealFormerBackbone(BackboneBase, keras_hub.models.Backbone):
  """A BERT encoder with RealFormer's residual attention (He et al., 2020).

  Args (keras-hub's names; docs/names.md maps them to the tf_keras
  `RealFormerEncoder`'s):
    vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
      dropout, max_sequence_length, num_segments, dtype: as `BertBackbone`.
    residual_attention: "sum" (RealFormer), "mean" (for models deeper than
      ~24 layers) or "none": then, with the default activation, this is
      `BertBackbone` exactly (`keras3_weight_map.load_bert_backbone`).
    normalize_first: False = Post-LN (BERT, RealFormer), True = Pre-LN.
    final_layer_norm: LayerNorm the last block's output; None =
      `normalize_first`.
    layer_norm_epsilon: Of the blocks (the embeddings' is BERT's 1e-12).
    score_dtype, attention_implementation: As `ResidualMultiHeadAttention`.
    activation: Of the feed-forward layer; "gelu_approximate" (default, the
      tanh form) is what keras-hub's BERT and our tf_keras encoder use.

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

  def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim,
               intermediate_dim, dropout=0.1, max_sequence_length=512,
               num_segments=2, residual_attention="sum", normalize_first=False,
               final_layer_norm=None, layer_norm_epsilon=1e-12,
               score_dtype="auto", activation=GELU_APPROXIMATE,
               attention_implementation="auto", dtype=None, **kwargs):
    ra.refuse_unknown(self, kwargs, BASE_KEYWORDS)
    ra.check_arguments(
        self, vocabulary_size=vocabulary_size, num_layers=num_layers,
        num_heads=num_heads, hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim, dropout=dropout,
        max_sequence_length=max_sequence_length, num_segments=num_segments,
        residual_attention=residual_attention,
        layer_norm_epsilon=layer_norm_epsilon, score_dtype=score_dtype,
        attention_implementation=attention_implementation)
    get_activation(activation)  # Names an unknown one.
    if final_layer_norm is None:
      final_layer_norm = normalize_first
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
            num_heads=num_heads, intermediate_dim=intermediate_dim,
            activation=get_activation(activation), dropout=dropout,
            attention_dropout=dropout, normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon, kernel_initializer=init(),
            residual_attention=residual_attention, layer_index=i,
            score_dtype=score_dtype,
            attention_implementation=attention_implementation, dtype=dtype,
            name=f"transformer_layer_{i}")
        for i in range(num_layers)]
    self.final_layer_norm = None
    if final_layer_norm:
      self.final_layer_norm = keras.layers.LayerNormalization(
          axis=-1, epsilon=layer_norm_epsilon, dtype=dtype,
          name="final_layer_norm")
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
    # [batch, 1, seq]: one padding mask row for every query.
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

    # === Config ===
    self.vocabulary_size = vocabulary_size
    self.num_layers = num_layers
    self.num_heads = num_heads
    self.hidden_dim = hidden_dim
    self.intermediate_dim = intermediate_dim
    self.dropout = dropout
    self.max_sequence_length = max_sequence_length
    self.num_segments = num_segments
    self.residual_attention = residual_attention
    self.normalize_first = normalize_first
    self.use_final_layer_norm = final_layer_norm  # The layer: final_layer_norm.
    self.layer_norm_epsilon = layer_norm_epsilon
    self.score_dtype = score_dtype
    self.activation = activation
    self.attention_implementation = attention_implementation
    self.cls_token_index = 0

  def get_config(self):
    return {
        **super().get_config(),
        "num_segments": self.num_segments,
        "final_layer_norm": self.use_final_layer_norm,
    }
