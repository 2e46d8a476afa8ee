"""Loads Model Garden TF2 (object-based) BERT checkpoints into RealFormer.

Reads `tf.train.Checkpoint(encoder=...)` or `(model=...)` of an encoder, a
`BertPretrainerV2`, `BertClassifier` or `BertSpanLabeler`: `RealFormerEncoder`
keeps `BertEncoderV2`'s attribute names. Every missing, unused or mis-shaped
variable is reported at once (`CheckpointMismatchError`) before any load.
"""

import contextlib
import dataclasses
import functools
from typing import Any, Iterator, List, Mapping, Optional, Union

import tensorflow as tf
# pylint: disable=g-direct-tensorflow-import
from tf_keras.src.engine import base_layer
from tf_keras.src.engine import base_layer_v1
from tf_keras.src.engine import training
from tf_keras.src.engine import training_v1
from tf_keras.src.utils import version_utils
# pylint: enable=g-direct-tensorflow-import

from official.modeling.hyperparams import base_config
from official.nlp.configs import encoders as mg_encoders
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import encoders
from realformer_tf.networks import encoder as encoder_lib

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VARIABLE_VALUE = "VARIABLE_VALUE"
# Where Model Garden checkpoints keep the encoder, tried in order.
ENCODER_PATHS = ("encoder", "model/encoder_network", "model/_network", "model")

EncoderConfigLike = Union[encoders.RealFormerEncoderConfig,
                          mg_encoders.BertEncoderConfig,
                          mg_encoders.EncoderConfig, Mapping[str, Any]]


@contextlib.contextmanager
def shapes_only_graph() -> Iterator[List[Any]]:
  """A throwaway `tf.Graph` for tf_keras models built for their shapes.

  Yields a list to append each model built inside; on exit their classes get
  back the eager bases `version_utils.swap_class` swapped to v1.
  """
  built = []
  try:
    with tf.Graph().as_default():
      yield built
  finally:
    classes = {type(layer) for model in built
               for layer in model._flatten_layers()}  # pylint: disable=protected-access
    for cls in classes:
      version_utils.swap_class(cls, training.Model, training_v1.Model, True)
      version_utils.swap_class(cls, base_layer.Layer, base_layer_v1.Layer,
                               True)


def realformer_config_from(config: EncoderConfigLike,
                           residual_attention: Optional[str] = None
                          ) -> encoders.RealFormerEncoderConfig:
  """A new `RealFormerEncoderConfig` from a RealFormer/BERT config or a dict.

  `config`: ours, a `BertEncoderConfig`, an `EncoderConfig` of type "any",
  "bert" or "bert_v2", or a dict of our fields; `residual_attention`
  overrides its value (a BERT config's is "sum").
  """
  if isinstance(config, mg_encoders.EncoderConfig):
    if config.type not in ("any", "bert", "bert_v2"):
      raise ValueError(
          f"encoder_config has type {config.type!r}; only 'any' (RealFormer), "
          "'bert' and 'bert_v2' map onto a RealFormerEncoder.")
    config = config.get()
  if not isinstance(config, (base_config.Config, Mapping)):
    raise TypeError(
        "encoder_config must be a RealFormerEncoderConfig, BertEncoderConfig, "
        "EncoderConfig (any, bert, bert_v2) or dict; got "
        f"{type(config).__name__}.")
  values = dict(config.as_dict() if isinstance(config, base_config.Config)
                else config)
  if (isinstance(config, mg_encoders.BertEncoderConfig) and  # BERT's, not ours
      not isinstance(config, encoders.RealFormerEncoderConfig)):
    for flag in ("return_all_encoder_outputs", "return_word_embeddings"):
      if values.pop(flag):
        raise ValueError(f"encoder_config.{flag}=True is not supported by "
                         "RealFormerEncoderConfig.")
    # BertEncoderV2 has no final LayerNorm even when norm_first.
    values["final_layer_norm"] = False
  known = {f.name for f in dataclasses.fields(encoders.RealFormerEncoderConfig)}
  unknown = sorted(set(values) - known)
  if unknown:
    raise ValueError(f"encoder_config has unknown key(s) {unknown}; "
                     f"RealFormerEncoderConfig fields: {sorted(known)}.")
  if residual_attention is not None:  # Checked by the encoder's builder.
    values["residual_attention"] = residual_attention
  return encoders.RealFormerEncoderConfig(**values)


def _read(path: str, reader, encoder: tf.Module, encoder_path: Optional[str],
          what: str = "encoder"):
  """`(status, {id(object): node id}, path used)` of reading `encoder` at
  `encoder_path` or the first of `ENCODER_PATHS` that matches; ValueError for
  a TF1 or unreadable checkpoint, or no encoder there."""
  if not reader.has_tensor(_OBJECT_GRAPH_KEY):
    raise ValueError(
        f"{path!r} is a name-based (TF1) checkpoint, not an object-based TF2 "
        "one; load it with encoder_from_tf1_checkpoint.")
  for found in (encoder_path,) if encoder_path else ENCODER_PATHS:
    try:
      root = functools.reduce(  # "a/b" holds the encoder as root.a.b.
          lambda child, name: tf.train.Checkpoint(**{name: child}),
          reversed(found.split("/")), encoder)
      status = root.read(path).expect_partial()
    except (tf.errors.OpError, IndexError) as e:  # E.g. a truncated file.
      raise ValueError(f"TF2 checkpoint {path!r} is not readable "
                       f"({type(e).__name__}: {e}).") from None
    # No public accessor says which checkpoint node each object matched.
    coordinator = status._checkpoint  # pylint: disable=protected-access
    matched = {id(obj): node_id for node_id, obj in
               coordinator.object_by_proto_id.items()}
    if id(encoder) in matched and (
        encoder_path or any(id(v) in matched for v in encoder.weights)):
      return status, matched, found
  where = (list(ENCODER_PATHS) if not encoder_path else
           f"encoder_path={encoder_path!r}" if what == "encoder" else
           repr(encoder_path))
  roots = [ref.local_name for ref in coordinator.object_graph_proto.nodes[0]
           .children]
  raise ValueError(f"No {what} found in checkpoint {path!r} at {where}; its "
                   f"top-level objects are {sorted(roots)}.")


def check_encoder_checkpoint(checkpoint_path: str,
                             encoder: tf.Module,
                             encoder_path: Optional[str] = None,
                             what: str = "encoder"):
  """`(reader, [(variable, checkpoint key)], encoder path used)` of an
  encoder built in a `shapes_only_graph` (only its variables' shapes are used)
  against a checkpoint prefix or directory; `encoder_path` None tries
  `ENCODER_PATHS`; `what` names the encoder in the messages. Raises a
  `CheckpointMismatchError` naming every missing, unused or mis-shaped one.
  """
  if tf.executing_eagerly():
    raise ValueError("check_encoder_checkpoint reads into the encoder: build "
                     "it inside `with tf.Graph().as_default():`.")
  path = run_directory.resolve_checkpoint(checkpoint_path, "TF2 checkpoint")
  reader = tf.train.load_checkpoint(path)
  status, matched, found = _read(path, reader, encoder, encoder_path, what)
  graph = status._checkpoint.object_graph_proto  # pylint: disable=protected-access

  def variable_keys(node_ids):
    return {node_id: a.checkpoint_key for node_id in node_ids
            for a in graph.nodes[node_id].attributes
            if a.name == _VARIABLE_VALUE}

  node_keys = variable_keys(matched.values())
  key_of = {id_: node_keys[n] for id_, n in matched.items() if n in node_keys}
  subtree = [matched[id(encoder)]]
  for node_id in subtree:  # The checkpoint's encoder subtree, breadth first.
    subtree.extend(ref.node_id for ref in graph.nodes[node_id].children
                   if ref.node_id not in subtree)
  shapes = reader.get_variable_to_shape_map()
  fmt = errors.format_shape
  missing = [f"{v.name} (shape {fmt(v.shape)})"
             for v in encoder.weights if id(v) not in key_of]
  unused = set(subtree) - set(matched.values())
  unexpected = sorted(f"{key} (shape {fmt(shapes[key])})"
                      for key in variable_keys(unused).values())
  mismatched = [f"{key_of[id(v)]} -> {v.name}: checkpoint "
                f"{fmt(shapes[key_of[id(v)]])}, model {fmt(v.shape)}"
                for v in encoder.weights if id(v) in key_of and
                tuple(shapes[key_of[id(v)]]) != tuple(v.shape.as_list())]
  errors.raise_if_problems(
      f"Checkpoint {path!r} ({found!r}) does not match the {what}:", missing,
      unexpected, mismatched,
      footer="Check that the encoder config belongs to this checkpoint.")
  return reader, [(v, key_of[id(v)]) for v in encoder.weights], found


def load_encoder_weights(checkpoint_path: str,
                         encoder: tf.Module,
                         encoder_path: Optional[str] = None) -> str:
  """Loads a checkpoint's encoder into a built eager `encoder`; returns the
  path used. Unchecked: a mismatch stops part way, with TF's error."""
  path = run_directory.resolve_checkpoint(checkpoint_path, "TF2 checkpoint")
  status, _, found = _read(path, tf.train.load_checkpoint(path), encoder,
                           encoder_path)
  status.assert_existing_objects_matched()
  return found


def encoder_from_tf2_checkpoint(
    checkpoint_path: str,
    encoder_config_or_kwargs: EncoderConfigLike,
    residual_attention: Optional[str] = None,
    encoder_path: Optional[str] = None
) -> encoder_lib.RealFormerEncoder:
  """A `RealFormerEncoder` from a Model Garden `BertEncoder(V2)` checkpoint.

  `residual_attention`: None keeps the config's; "none" reproduces a BERT
  checkpoint exactly, "sum"/"mean" warm-start a RealFormer from it.
  """
  config = realformer_config_from(encoder_config_or_kwargs, residual_attention)
  # In a graph `read` assigns nothing, so every problem is reported first.
  with shapes_only_graph() as built:
    shadow = encoders.build_realformer_encoder(config)
    built.append(shadow)
    _ = shadow(utils.dummy_inputs())
    encoder_path = check_encoder_checkpoint(checkpoint_path, shadow,
                                            encoder_path)[-1]
  encoder = encoders.build_realformer_encoder(config)
  _ = encoder(utils.dummy_inputs())
  load_encoder_weights(checkpoint_path, encoder, encoder_path)
  return encoder

