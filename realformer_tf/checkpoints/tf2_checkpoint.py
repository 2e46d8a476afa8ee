"""Loads Model Garden TF2 (object-based) BERT checkpoints into RealFormer.

Model Garden writes encoders with `tf.train.Checkpoint(encoder=...)` (e.g.
`tf2_bert_encoder_checkpoint_converter`, `BertPretrainerV2.checkpoint_items`)
or `tf.train.Checkpoint(model=...)` where the model is the encoder itself, a
`BertPretrainerV2` (`model.encoder_network`) or a `BertClassifier` /
`BertSpanLabeler` (`model._network`). `RealFormerEncoder` keeps
`BertEncoderV2`'s attribute names, so both `BertEncoderV2` and the functional
`BertEncoder` restore into it object by object.

TF's own `tf.train.Checkpoint(...).read(...)` does the matching. Checks read
into an encoder built in a throwaway `tf.Graph`, where `read` only builds
restore ops: nothing is assigned and every missing, unused or mis-shaped
variable is reported at once (`CheckpointMismatchError`), where an eager
`read` assigns as it goes and stops at the first shape error. Loads then read
eagerly, with `assert_existing_objects_matched()`. Optimizer slots and
anything outside the encoder subtree (heads, `optimizer`, `save_counter`) are
never read.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.configs import encoders
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import realformer_encoder

from tensorflow.core.protobuf import trackable_object_graph_pb2  # pylint: disable=g-direct-tensorflow-import

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_VARIABLE_VALUE = "VARIABLE_VALUE"
# Where Model Garden checkpoints keep the encoder, tried in order.
ENCODER_PATHS = ("encoder", "model/encoder_network", "model/_network", "model")

EncoderConfigLike = Union[encoders.RealFormerEncoderConfig,
                          mg_encoders.BertEncoderConfig,
                          mg_encoders.EncoderConfig, Mapping[str, Any]]


def realformer_config_from(config: EncoderConfigLike,
                           residual_attention: Optional[str] = None
                          ) -> encoders.RealFormerEncoderConfig:
  """A `RealFormerEncoderConfig` from a RealFormer/BERT config or a dict.

  Args:
    config: A `RealFormerEncoderConfig`; a Model Garden `BertEncoderConfig`;
      an `EncoderConfig` of type "any" (holding a `RealFormerEncoderConfig`),
      "bert" or "bert_v2"; or a dict of `RealFormerEncoderConfig` fields.
    residual_attention: Overrides the config's value if not None. A BERT
      config has none, so it then gets "sum".

  Returns:
    A new config (the argument is not modified).
  """
  if isinstance(config, mg_encoders.EncoderConfig):
    if config.type == "any":
      config = config.any
      if not isinstance(config, encoders.RealFormerEncoderConfig):
        raise ValueError(
            "encoder_config has type 'any' but its 'any' is a "
            f"{type(config).__name__}, not a RealFormerEncoderConfig.")
    elif config.type in ("bert", "bert_v2"):
      config = config.get()
    else:
      raise ValueError(
          f"encoder_config has type {config.type!r}; only 'any' (RealFormer), "
          "'bert' and 'bert_v2' map onto a RealFormerEncoder.")
  if isinstance(config, encoders.RealFormerEncoderConfig):
    values = config.as_dict()
  elif isinstance(config, mg_encoders.BertEncoderConfig):
    values = config.as_dict()
    if values.pop("return_all_encoder_outputs"):
      raise ValueError("encoder_config.return_all_encoder_outputs=True is not "
                       "supported: RealFormerEncoder always returns "
                       "encoder_outputs.")
    if values.pop("return_word_embeddings"):
      raise ValueError("encoder_config.return_word_embeddings=True is not "
                       "supported by RealFormerEncoderConfig.")
    # BertEncoderV2 has no final LayerNorm even when norm_first.
    values["final_layer_norm"] = False
  elif isinstance(config, Mapping):
    values = dict(config)
    known = {f.name for f in dataclasses.fields(
        encoders.RealFormerEncoderConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ValueError(f"encoder_config has unknown key(s) {unknown}; "
                       f"RealFormerEncoderConfig fields: {sorted(known)}.")
  else:
    raise TypeError(
        "encoder_config must be a RealFormerEncoderConfig, BertEncoderConfig, "
        f"EncoderConfig or dict; got {type(config).__name__}.")
  if residual_attention is not None:
    values["residual_attention"] = ra.validate_residual_attention(
        residual_attention)
  result = encoders.RealFormerEncoderConfig(**values)
  result.validate()
  return result


def _object_graph(reader, path: str
                 ) -> trackable_object_graph_pb2.TrackableObjectGraph:
  if not reader.has_tensor(_OBJECT_GRAPH_KEY):
    raise ValueError(
        f"{path!r} is a name-based (TF1) checkpoint, not an object-based TF2 "
        "one; load it with encoder_from_tf1_checkpoint.")
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
  return graph


def _child(graph, node_id: int, name: str) -> Optional[int]:
  for ref in graph.nodes[node_id].children:
    if ref.local_name == name:
      return ref.node_id
  return None


def _find_encoder_node(graph, path: str,
                       encoder_path: Optional[str]) -> Tuple[int, str]:
  """The node id of the encoder in the checkpoint's object graph."""
  candidates = (encoder_path,) if encoder_path else ENCODER_PATHS
  for candidate in candidates:
    node_id = 0
    for name in candidate.split("/"):
      node_id = _child(graph, node_id, name)
      if node_id is None:
        break
    if node_id is not None and (
        encoder_path or _child(graph, node_id, "_embedding_layer") is not None):
      return node_id, candidate
  roots = sorted(ref.local_name for ref in graph.nodes[0].children)
  raise ValueError(
      f"No encoder found in checkpoint {path!r} at "
      f"{'encoder_path=' + repr(encoder_path) if encoder_path else list(ENCODER_PATHS)}"
      f"; its top-level objects are {roots}.")


def _checkpoint_at(encoder_path: str, encoder: tf.Module) -> tf.train.Checkpoint:
  """A checkpoint root that holds `encoder` at "a/b" as `a.b`."""
  *parents, name = encoder_path.split("/")
  root = tf.train.Checkpoint(**{name: encoder})
  for parent in reversed(parents):
    root = tf.train.Checkpoint(**{parent: root})
  return root


def _variable_keys(graph, node_ids) -> Dict[int, str]:
  """Node id -> checkpoint key, for the variables among `node_ids`."""
  return {node_id: attribute.checkpoint_key for node_id in node_ids
          for attribute in graph.nodes[node_id].attributes
          if attribute.name == _VARIABLE_VALUE}


def _find_encoder(path: str, encoder_path: Optional[str]):
  """(reader, object graph, encoder node id, encoder path) of a checkpoint."""
  reader = tf.train.load_checkpoint(path)
  graph = _object_graph(reader, path)
  return (reader, graph) + _find_encoder_node(graph, path, encoder_path)


def check_encoder_checkpoint(checkpoint_path: str,
                             encoder: tf.Module,
                             encoder_path: Optional[str] = None):
  """Matches an encoder built in a `tf.Graph` against a checkpoint.

  Args:
    checkpoint_path: Checkpoint prefix or a directory of them.
    encoder: A built encoder (`BertEncoderV2` attribute layout) in a
      throwaway `tf.Graph`: only its variables' shapes are used. (Eager
      Keras layers made before that graph are unusable until an eager one of
      their class is made again: Keras swaps the classes' v1/v2 bases.)
    encoder_path: Where the encoder is in the checkpoint, e.g. "encoder" or
      "model/encoder_network"; None tries `ENCODER_PATHS` in order.

  Returns:
    `(reader, [(variable, checkpoint key)], encoder path used)`.

  Raises:
    CheckpointMismatchError: Missing, unused or mis-shaped variables (each
      named, with both shapes).
  """
  if tf.executing_eagerly():
    raise ValueError("check_encoder_checkpoint reads into the encoder: build "
                     "it inside `with tf.Graph().as_default():`.")
  path = utils.resolve_checkpoint(checkpoint_path, "TF2 checkpoint")
  reader, graph, encoder_node, found = _find_encoder(path, encoder_path)
  status = _checkpoint_at(found, encoder).read(path)
  # TF has no public accessor for which checkpoint node each object matched
  # (tensorflow/python/checkpoint/checkpoint.py:280, the restore
  # coordinator's `object_by_proto_id`).
  matched = dict(status._checkpoint.object_by_proto_id)  # pylint: disable=protected-access
  keys = _variable_keys(graph, matched)
  key_of = {id(matched[node_id]): key for node_id, key in keys.items()}
  subtree, stack = {encoder_node}, [encoder_node]
  while stack:
    for ref in graph.nodes[stack.pop()].children:
      if ref.node_id not in subtree:
        subtree.add(ref.node_id)
        stack.append(ref.node_id)
  shapes = reader.get_variable_to_shape_map()
  fmt = errors.format_shape
  missing = [f"{v.name} (shape {fmt(v.shape)})"
             for v in encoder.weights if id(v) not in key_of]
  unexpected = sorted(f"{key} (shape {fmt(shapes[key])})" for node_id, key in
                      _variable_keys(graph, subtree - set(matched)).items())
  mismatched = [f"{key_of[id(v)]} -> {v.name}: checkpoint "
                f"{fmt(shapes[key_of[id(v)]])}, model {fmt(v.shape)}"
                for v in encoder.weights if id(v) in key_of and
                tuple(shapes[key_of[id(v)]]) != tuple(v.shape.as_list())]
  errors.raise_if_problems(
      f"Checkpoint {path!r} ({found!r}) does not match the encoder:", missing,
      unexpected, mismatched,
      footer="Check that the encoder config belongs to this checkpoint.")
  return reader, [(v, key_of[id(v)]) for v in encoder.weights], found


def load_encoder_weights(checkpoint_path: str,
                         encoder: tf.Module,
                         encoder_path: Optional[str] = None) -> str:
  """Loads an object-based checkpoint's encoder into a built eager `encoder`.

  `tf.train.Checkpoint.read` + `assert_existing_objects_matched()`: TF's
  errors, and the first shape mismatch stops the load part way;
  `encoder_from_tf2_checkpoint` checks first. Arguments as
  `check_encoder_checkpoint`.

  Returns:
    The encoder path used.

  Raises:
    ValueError: The checkpoint's data is unreadable (e.g. truncated), named.
  """
  path = utils.resolve_checkpoint(checkpoint_path, "TF2 checkpoint")
  found = _find_encoder(path, encoder_path)[-1]
  try:
    _checkpoint_at(found, encoder).read(path).assert_existing_objects_matched(
        ).expect_partial()
  except (tf.errors.OpError, IndexError) as e:
    raise ValueError(f"TF2 checkpoint {path!r} is not readable "
                     f"({type(e).__name__}: {e}).") from None
  return found


def encoder_from_tf2_checkpoint(
    checkpoint_path: str,
    encoder_config_or_kwargs: EncoderConfigLike,
    residual_attention: Optional[str] = None,
    encoder_path: Optional[str] = None
) -> realformer_encoder.RealFormerEncoder:
  """A `RealFormerEncoder` from a Model Garden `BertEncoder(V2)` checkpoint.

  Args:
    checkpoint_path: Checkpoint prefix or directory.
    encoder_config_or_kwargs: The checkpoint's encoder config; see
      `realformer_config_from`.
    residual_attention: None keeps the config's value ("sum" for BERT
      configs and dicts without it); "none" reproduces the BERT checkpoint's
      outputs exactly, "sum"/"mean" warm-start a RealFormer from it.
    encoder_path: See `load_encoder_weights`.

  Returns:
    The encoder, all weights loaded.
  """
  config = realformer_config_from(encoder_config_or_kwargs, residual_attention)
  with tf.Graph().as_default():  # Reports every problem, assigns nothing.
    shadow = encoders.build_realformer_encoder(config)
    _ = shadow(utils.dummy_inputs())
    encoder_path = check_encoder_checkpoint(checkpoint_path, shadow,
                                            encoder_path)[-1]
  encoder = encoders.build_realformer_encoder(config)
  _ = encoder(utils.dummy_inputs())
  load_encoder_weights(checkpoint_path, encoder, encoder_path)
  return encoder

