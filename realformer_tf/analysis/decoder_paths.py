"""Attention analysis per residual path of a RealFormer encoder-decoder.

The three paths of paper Section 3 (encoder self, decoder causal self,
encoder-decoder), run teacher-forced: per layer and head, entropy and JSD to
the layer below (`path_statistics`), and the paper's violin plots.
"""

import os
from typing import Dict, List

import numpy as np
import tensorflow as tf

from realformer_tf.analysis import metrics
from realformer_tf.analysis import plots
from realformer_tf.data import output_sets
from realformer_tf.layers import residual_attention as ra

PATHS = ("encoder_self", "decoder_self", "cross")
MANIFEST = "decoder_paths.json"
WRITER = "realformer_tf.analysis.decoder_paths"


def _attention(model, inputs, targets):
  """Per-path lists of per-layer probs, and the (query, key) masks."""
  source_mask = tf.not_equal(inputs, 0)
  embedded = model.embedding_lookup(inputs) * tf.cast(
      source_mask, model.compute_dtype)[..., None]
  encoder_inputs = embedded + model.position_embedding(embedded)
  source_len, target_len = tf.shape(inputs)[1], tf.shape(targets)[1]
  mask = tf.cast(source_mask[:, None, :], tf.int32)
  memory, encoder_attention = model.encoder_layer(
      encoder_inputs, attention_mask=tf.tile(mask, [1, source_len, 1]),
      return_attention_scores=True)
  shifted = tf.pad(targets, [[0, 0], [1, 0]])[:, :-1]
  decoder_inputs = model.embedding_lookup(shifted)
  decoder_inputs += model.position_embedding(decoder_inputs)
  _, decoder_attention = model.decoder_layer(
      decoder_inputs, memory,
      cross_attention_mask=tf.tile(mask, [1, target_len, 1]),
      return_attention_scores=True)
  # metrics.py takes 0/1 masks.
  source_mask = tf.cast(source_mask, tf.int32)
  target_mask = tf.cast(tf.not_equal(targets, 0), tf.int32)
  return {
      "encoder_self": (encoder_attention["probs"], source_mask, source_mask),
      "decoder_self": (decoder_attention["self_probs"], target_mask,
                       target_mask),
      "cross": (decoder_attention["cross_probs"], target_mask, source_mask),
  }


def path_statistics(model, inputs, targets
                    ) -> Dict[str, Dict[str, List[List[np.ndarray]]]]:
  """`{path: {"entropy": [layer][head] values, "jsd": [layer - 1][head]}}`
  over unpadded queries, of a translation `model` on source `inputs` and
  `targets` (0: padding)."""
  out = {}
  for path, (probs, queries, keys) in _attention(model, inputs,
                                                 targets).items():
    entropy, jsd = (metrics.unpadded(v, queries) for v in
                    metrics.per_query_entropy_and_jsd(ra.TF_OPS, probs, keys))
    out[path] = {"entropy": _per_layer_and_head(entropy),
                 "jsd": _per_layer_and_head(jsd)}
  return out


def _per_layer_and_head(values) -> List[List[np.ndarray]]:
  """`[tokens, layers, heads]` -> `[layer][head]` arrays over the tokens."""
  return [[values[:, layer, head] for head in range(values.shape[2])]
          for layer in range(values.shape[1])]


def write_path_figures(statistics, output_dir: str) -> List[str]:
  """Writes `<path>_{entropy,jsd}.png` per path as one output set; returns
  the figures."""
  panels = {}
  for path, per_metric in statistics.items():
    for metric, layers in per_metric.items():
      if not layers:
        continue  # One layer: no JSD to the layer below.
      offset = 1 if metric == "jsd" else 0
      panels[os.path.join(output_dir, f"{path}_{metric}.png")] = (
          metric, plots.Panel(title=path, rows=[
              (f"layer {i + offset}" + (f" vs {i}" if offset else ""), heads)
              for i, heads in enumerate(layers)]))
  with output_sets.output_set(os.path.join(output_dir, MANIFEST), WRITER,
                              list(panels)) as outputs:
    for file, (metric, panel) in panels.items():
      plots.violin_figure([panel], outputs.stage(file), metric)
    outputs.commit({})
  return list(panels)
