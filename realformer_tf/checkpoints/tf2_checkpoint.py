"""Loads Model Garden TF2 (object-based) BERT checkpoints into RealFormer.

Model Garden writes encoders with `tf.train.Checkpoint(encoder=...)` (e.g.
`tf2_bert_encoder_checkpoint_converter`, `BertPretrainerV2.checkpoint_items`)
or `tf.train.Checkpoint(model=...)` where the model is the encoder itself, a
`BertPretrainerV2` (`model.encoder_network`) or a `BertClassifier` /
`BertSpanLabeler` (`model._network`). `RealFormerEncoder` keeps
`BertEncoderV2`'s attribute names, so both `BertEncoderV2` and the functional
`BertEncoder` map onto it object by object.

Matching follows TF's own object-based restore: walk the checkpoint's object
graph and the encoder's trackable children in parallel, pairing children by
name. Before anything is assigned, every encoder variable must have been
paired, every variable in the checkpoint's encoder subtree must have been
used, and shapes must agree; otherwise a `CheckpointMismatchError` names them.
Optimizer slot variables and anything outside the encoder subtree (heads,
`optimizer`, `save_counter`, `global_step`) are never read.
"""

import collections
import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

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


def _variable_key(node) -> Optional[str]:
  for attribute in node.attributes:
    if attribute.name == _VARIABLE_VALUE:
      return attribute.checkpoint_key
  return None


def match_encoder_variables(reader, graph, encoder_node: int,
                            encoder: tf.Module, where: str
                           ) -> List[Tuple[tf.Variable, str]]:
  """Pairs each encoder variable with its checkpoint key; raises on mismatch.

  Args:
    reader: `tf.train.load_checkpoint` of the checkpoint.
    graph: Its object graph.
    encoder_node: The encoder's node id in `graph`.
    encoder: The built Python encoder.
    where: Checkpoint description for messages.

  Returns:
    `(variable, checkpoint_key)` pairs, one per encoder variable.

  Raises:
    CheckpointMismatchError: Missing, unused or mis-shaped variables.
  """
  pairs = {}        # id(variable) -> (variable, key, node path)
  seen_nodes = set()
  queue = collections.deque([(encoder_node, encoder, ())])
  while queue:
    node_id, obj, obj_path = queue.popleft()
    if node_id in seen_nodes:
      continue
    seen_nodes.add(node_id)
    node = graph.nodes[node_id]
    if isinstance(obj, tf.Variable):
      key = _variable_key(node)
      if key is not None:
        pairs.setdefault(id(obj), (obj, key, "/".join(obj_path)))
      continue
    children = tf.train.TrackableView.children(obj)
    for ref in node.children:
      child = children.get(ref.local_name)
      if child is not None:
        queue.append((ref.node_id, child, obj_path + (ref.local_name,)))

  # Every variable node reachable in the checkpoint's encoder subtree.
  checkpoint_vars: Dict[int, str] = {}
  stack, reachable = [encoder_node], {encoder_node}
  while stack:
    node = graph.nodes[stack.pop()]
    for ref in node.children:
      if ref.node_id not in reachable:
        reachable.add(ref.node_id)
        stack.append(ref.node_id)
  for node_id in reachable:
    key = _variable_key(graph.nodes[node_id])
    if key is not None:
      checkpoint_vars[node_id] = key
  used_keys = {key for _, key, _ in pairs.values()}
  shapes = reader.get_variable_to_shape_map()

  missing = [f"{v.name} (shape {errors.format_shape(v.shape)})"
             for v in encoder.weights if id(v) not in pairs]
  unexpected = sorted(
      f"{key} (shape {errors.format_shape(shapes[key])})"
      for key in set(checkpoint_vars.values()) - used_keys)
  mismatched = [
      f"{key} -> {v.name}: checkpoint {errors.format_shape(shapes[key])}, "
      f"model {errors.format_shape(v.shape)}"
      for v, key, _ in pairs.values()
      if tuple(shapes[key]) != tuple(v.shape.as_list())]
  errors.raise_if_problems(
      f"Checkpoint {where} does not match the encoder:", missing, unexpected,
      mismatched,
      footer="Check that the encoder config belongs to this checkpoint.")
  return [(v, key) for v, key, _ in pairs.values()]


def load_encoder_weights(checkpoint_path: str,
                         encoder: tf.Module,
                         encoder_path: Optional[str] = None) -> str:
  """Loads an object-based checkpoint's encoder into a built `encoder`.

  Args:
    checkpoint_path: Checkpoint prefix or a directory with a 'checkpoint'
      file.
    encoder: A built encoder (`BertEncoderV2` attribute layout).
    encoder_path: Where the encoder is in the checkpoint, e.g. "encoder" or
      "model/encoder_network"; None tries `ENCODER_PATHS` in order.

  Returns:
    The encoder path used.
  """
  reader, pairs, found = check_encoder_checkpoint(checkpoint_path, encoder,
                                                 encoder_path)
  for variable, key in pairs:
    variable.assign(reader.get_tensor(key))
  return found


def check_encoder_checkpoint(checkpoint_path: str,
                             encoder: tf.Module,
                             encoder_path: Optional[str] = None):
  """Matches a built `encoder` against a checkpoint without reading weights.

  Args:
    checkpoint_path: Checkpoint prefix or a directory with a 'checkpoint'
      file.
    encoder: A built encoder; only its variables' shapes are used, so it may
      live in a throwaway `tf.Graph`.
    encoder_path: See `load_encoder_weights`.

  Returns:
    `(reader, [(variable, checkpoint key)], encoder path used)`.

  Raises:
    CheckpointMismatchError: Missing, unused or mis-shaped variables (each
      named, with both shapes).
  """
  path = utils.resolve_checkpoint(checkpoint_path, "TF2 checkpoint")
  reader = tf.train.load_checkpoint(path)
  graph = _object_graph(reader, path)
  node_id, found = _find_encoder_node(graph, path, encoder_path)
  pairs = match_encoder_variables(reader, graph, node_id, encoder,
                                  f"{path!r} ({found!r})")
  return reader, pairs, found


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
  encoder = encoders.build_realformer_encoder(config)
  ids = tf.zeros([1, 2], tf.int32)
  _ = encoder(dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                   input_type_ids=ids))
  load_encoder_weights(checkpoint_path, encoder, encoder_path)
  return encoder

