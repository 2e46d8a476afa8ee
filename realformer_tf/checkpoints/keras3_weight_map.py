"""One name per weight of a BERT-shaped encoder, on each model that holds one.

`*_slots` map the tf_keras checkpoint names to one layout's variables;
`copy_slots` checks two maps (every mismatch at once) and copies. No
TensorFlow here: `load_bert_backbone` runs on JAX or PyTorch.
"""

from typing import Any, Callable, Dict, Mapping, Tuple

import numpy as np

from realformer_tf.checkpoints import errors
from realformer_tf.keras3 import backbone as backbone_lib

# name -> (shape, reader of the value as a NumPy array).
Source = Mapping[str, Tuple[Tuple[int, ...], Callable[[], np.ndarray]]]

_ATTENTION_DENSES = (("query", "_query_dense"), ("key", "_key_dense"),
                     ("value", "_value_dense"),
                     ("attention_output", "_output_dense"))


def dense_slots(prefix: str, layer) -> Dict[str, Any]:
  """`{prefix/kernel, prefix/bias}` of a (Einsum)Dense layer (Keras 2 or 3)."""
  if getattr(layer, "lora_enabled", False):
    raise ValueError(f"Layer {layer.name!r} has LoRA enabled: its kernel is "
                     "the frozen kernel plus the LoRA update, not one weight. "
                     "Merge or drop the LoRA weights before copying weights.")
  return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def norm_slots(prefix: str, layer) -> Dict[str, Any]:
  return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def attention_slots(prefix: str, attention) -> Dict[str, Any]:
  """The four projections of a Keras (2 or 3) `MultiHeadAttention`."""
  slots = {}
  for name, attribute in _ATTENTION_DENSES:
    slots.update(dense_slots(f"{prefix}/{name}", getattr(attention, attribute)))
  return slots


# Block weight name -> (its slots, `RealFormerEncoderBlock`'s attribute,
# keras-hub `TransformerEncoder`'s).
_BLOCK_WEIGHTS = (
    ("self_attention", attention_slots, "_attention_layer",
     "_self_attention_layer"),
    ("self_attention_layer_norm", norm_slots, "_attention_layer_norm",
     "_self_attention_layer_norm"),
    ("intermediate", dense_slots, "_intermediate_dense",
     "_feedforward_intermediate_dense"),
    ("output", dense_slots, "_output_dense", "_feedforward_output_dense"),
    ("output_layer_norm", norm_slots, "_output_layer_norm",
     "_feedforward_layer_norm"))


def block_slots(prefix: str, block) -> Dict[str, Any]:
  """A `RealFormerEncoderBlock`'s weights (tf_keras or Keras 3: same names)
  or a keras-hub `TransformerEncoder`'s."""
  keras_hub = hasattr(block, "_self_attention_layer")
  slots = {}
  for name, slots_of_layer, ours, theirs in _BLOCK_WEIGHTS:
    slots.update(slots_of_layer(f"{prefix}/{name}",
                                getattr(block, theirs if keras_hub else ours)))
  return slots


def backbone_slots(model) -> Dict[str, Any]:
  """Every weight of a `RealFormerBackbone` or a keras-hub `BertBackbone`
  (the same attribute names), by name."""
  slots = {"word_embeddings/embeddings": model.token_embedding.embeddings,
           "position_embedding/embeddings":
               model.position_embedding.position_embeddings,
           "type_embeddings/embeddings": model.segment_embedding.embeddings,
           **norm_slots("embeddings/layer_norm", model.embeddings_layer_norm),
           **dense_slots("pooler_transform", model.pooled_dense)}
  for i, block in enumerate(model.transformer_layers):
    slots.update(block_slots(f"transformer/layer_{i}", block))
  if getattr(model, "final_layer_norm", None) is not None:
    slots.update(norm_slots("final_layer_norm", model.final_layer_norm))
  return slots


# The MLM head's weights besides the tied embedding (a run's names).
MASKED_LM_DENSE, MASKED_LM_NORM, MASKED_LM_BIAS = (
    "masked_lm/dense", "masked_lm/layer_norm", "masked_lm/output_bias")


def masked_lm_head_slots(head) -> Dict[str, Any]:
  """A keras-hub `MaskedLMHead`'s transform and output bias (tied logits)."""
  # pylint: disable=protected-access
  if getattr(head, "_kernel", None) is not None:
    raise ValueError(f"MaskedLMHead {head.name!r} has its own output kernel "
                     "(no token_embedding): a run's head is tied to the "
                     "token embedding.")
  return {**dense_slots(MASKED_LM_DENSE, head._intermediate_dense),
          **norm_slots(MASKED_LM_NORM, head._intermediate_layer_norm),
          MASKED_LM_BIAS: head._bias}
  # pylint: enable=protected-access


def slots_of(model) -> Dict[str, Any]:
  """The slots of a `RealFormerBackbone` or a keras-hub `BertBackbone`."""
  if (isinstance(model, backbone_lib.RealFormerBackbone) or
      type(model).__name__ == "BertBackbone"):  # keras_hub.models.BertBackbone
    return backbone_slots(model)
  raise TypeError(f"Expected a RealFormerBackbone or a keras-hub BertBackbone, "
                  f"got {type(model).__name__}.")


def _shape(variable) -> Tuple[int, ...]:
  return tuple(int(d) for d in variable.shape)


def variable_source(slots: Mapping[str, Any]) -> Source:
  """A `Source` reading Keras 3, tf_keras or tf variables."""
  return {name: (_shape(v), lambda v=v: np.asarray(v.numpy()))
          for name, v in slots.items()}


def copy_slots(source: Source, target: Mapping[str, Any], header: str,
               footer: str = "") -> None:
  """Assigns every `target` variable the `source` value of its name; before
  any, a `CheckpointMismatchError` lists every missing name or shape."""
  fmt = errors.format_shape
  missing = [f"{name} (shape {fmt(_shape(v))})"
             for name, v in target.items() if name not in source]
  unexpected = [f"{name} (shape {fmt(source[name][0])})"
                for name in source if name not in target]
  mismatched = [f"{name}: source {fmt(source[name][0])}, target "
                f"{fmt(_shape(v))}" for name, v in target.items()
                if name in source and source[name][0] != _shape(v)]
  errors.raise_if_problems(header, missing, unexpected, mismatched, footer)
  for name, variable in target.items():
    variable.assign(source[name][1]())


def copy_weights(source_model, target_model) -> None:
  """Copies all weights between built `RealFormerBackbone`s and keras-hub
  `BertBackbone`s, either way."""
  copy_slots(variable_source(slots_of(source_model)), slots_of(target_model),
             header=f"{type(source_model).__name__} {source_model.name!r} "
             f"does not fit {type(target_model).__name__} "
             f"{target_model.name!r}:",
             footer="Build the target with the source's sizes.")


def load_bert_backbone(bert, residual_attention: str = "none",
                       **overrides) -> backbone_lib.RealFormerBackbone:
  """A `RealFormerBackbone` with the weights of a keras-hub `BertBackbone`;
  `residual_attention` "none" computes `bert`'s outputs exactly, "sum" or
  "mean" warm-start a RealFormer. `overrides`: e.g. `dropout`, `dtype`."""
  config = {k: v for k, v in bert.get_config().items()
            if k not in ("name", "trainable")}
  model = backbone_lib.RealFormerBackbone(
      **{**config, "residual_attention": residual_attention, **overrides})
  copy_weights(bert, model)
  return model
