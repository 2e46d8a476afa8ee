"""The keras3 face's attention analysis (paper Figures 4-5) on JAX, without
TensorFlow: `analysis.metrics` on the device, `stats.AttentionStats` on the
host; `analysis/<arch>/summary.json` in the tf_keras face's format."""

import os
from typing import Callable, Dict, List

import jax
import keras
import numpy as np

from realformer_tf.analysis import metrics
from realformer_tf.analysis import stats
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.reproduce import keras3_data as data_lib
from realformer_tf.reproduce import keras3_glue
from realformer_tf.reproduce import plan as plan_lib

BATCH_SIZE = 32  # The tf_keras face's (`analysis.runner.run_analysis`').
INPUTS = keras3_glue.INPUTS


def attention_stats(backbone, batches, seed: int = 0) -> stats.AttentionStats:
  """`backbone`'s statistics over `batches` (dicts with `INPUTS`): its blocks
  run again on its embeddings, returning their probabilities."""
  embed = keras.Model(backbone.input,
                      backbone.get_layer("embeddings_dropout").output)
  variables = backbone.weights

  @jax.jit
  def batch_fn(values, inputs):
    with keras.StatelessScope(state_mapping=list(zip(variables, values))):
      hidden, scores = embed(inputs, training=False), None
      mask = keras.ops.expand_dims(inputs["padding_mask"], axis=1)
      outputs = []
      for block in backbone.transformer_layers:
        hidden, scores, probs = block(hidden, scores=scores, training=False,
                                      attention_mask=mask,
                                      return_attention_probs=True)
        outputs.append((probs, scores))
      return metrics.batch_statistics(keras.ops, *zip(*outputs),
                                      inputs["padding_mask"])

  result = stats.AttentionStats(backbone.num_layers, backbone.num_heads,
                                seed=seed)
  values = [v.value for v in variables]
  for batch in batches:
    inputs = {k: batch[k] for k in INPUTS}
    result.update(*metrics.per_token(batch_fn(values, inputs),
                                     inputs["padding_mask"]),
                  len(inputs["token_ids"]))
  return result


def held_out_batches(plan: plan_lib.Plan) -> List[Dict[str, np.ndarray]]:
  """Up to `analysis_examples` held-out sequences, masked as evaluated,
  `BATCH_SIZE` (at most the training batch's) a batch."""
  sequences, size = plan.data["sequences"], plan.size
  count = min(size.analysis_examples, len(sequences.eval))
  rows = min(BATCH_SIZE, size.batch_size)
  batches = data_lib.Batches(sequences, rows, size.max_predictions,
                             seed=0).eval_batches(count)
  # Not the last batch's filler rows.
  return [{k: b[k][:count - i * rows] for k in INPUTS}
          for i, b in enumerate(batches)]


def summary_path(plan: plan_lib.Plan, arch: str) -> str:
  return os.path.join(plan.options.output_dir, "analysis", arch,
                      "summary.json")


def analyse(plan: plan_lib.Plan, backbone_of: Callable) -> Dict[str, str]:
  """`plan_lib.analyse_seed0`, a summary of this run's config kept;
  `backbone_of(plan, arch, seed, run_dir)`: the pre-trained backbone."""
  def done(run, out_dir):
    return (ownership.read_json(summary_path(plan, run.arch), writes.OS_OPS)
            or {}).get("settings", {}).get("config") == plan.config_of(run)

  def analyse_one(run, out_dir):
    backbone = backbone_of(plan, run.arch, run.seed, run.run_dir)
    batches = held_out_batches(plan)
    result = attention_stats(backbone, batches)
    writes.publish_json(summary_path(plan, run.arch), dict(
        settings=dict(config=plan.config_of(run), **metrics.DEFINITIONS,
                      num_examples_requested=plan.size.analysis_examples,
                      data="held-out sequences",
                      reservoir_size=stats.DEFAULT_CAPACITY, seed=0,
                      num_examples=result.num_examples,
                      batch_size=len(batches[0]["token_ids"])),
        models=[dict(name=run.arch, model_dir=run.run_dir,
                     residual_attention=backbone.residual_attention,
                     norm_first=backbone.normalize_first,
                     num_layers=backbone.num_layers,
                     num_heads=backbone.num_heads, **result.to_json())]),
                        plan_lib.WRITER, writes.OS_OPS)
  return plan_lib.analyse_seed0(plan, done, analyse_one)
