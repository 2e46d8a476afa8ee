"""TF1 RealFormer checkpoints written the TF1 way, and a NumPy forward pass.

`write_tf1_checkpoint` writes random values under Google BERT's exact variable
names and shapes with `tf.compat.v1` variables and `tf.compat.v1.train.Saver`
(plus the optimizer state TF1 runs leave behind). `numpy_forward` re-implements
google-research/realformer `realformer.py` (BERT `modeling.py` + residual
attention) in float64 NumPy, independently of the TF2 code under test.
"""

import json
import math
import os
from typing import Dict, Iterable, Optional

import numpy as np
import tensorflow as tf

from tests.helpers import numpy_reference

TINY_CONFIG = dict(
    vocab_size=40,
    hidden_size=32,
    num_hidden_layers=3,
    num_attention_heads=4,
    intermediate_size=48,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    max_position_embeddings=24,
    type_vocab_size=2,
    initializer_range=0.02,
)


def tf1_variable_shapes(config: Dict, with_heads: bool = True
                       ) -> Dict[str, tuple]:
  """Google BERT's TF1 variable names and shapes for `config`."""
  h, inner = config["hidden_size"], config["intermediate_size"]
  shapes = {
      "bert/embeddings/word_embeddings": (config["vocab_size"], h),
      "bert/embeddings/token_type_embeddings": (config["type_vocab_size"], h),
      "bert/embeddings/position_embeddings":
          (config["max_position_embeddings"], h),
      "bert/embeddings/LayerNorm/gamma": (h,),
      "bert/embeddings/LayerNorm/beta": (h,),
      "bert/pooler/dense/kernel": (h, h),
      "bert/pooler/dense/bias": (h,),
  }
  for i in range(config["num_hidden_layers"]):
    p = f"bert/encoder/layer_{i}"
    for part in ("attention/self/query", "attention/self/key",
                 "attention/self/value", "attention/output/dense"):
      shapes[f"{p}/{part}/kernel"] = (h, h)
      shapes[f"{p}/{part}/bias"] = (h,)
    for part in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[f"{p}/{part}/gamma"] = (h,)
      shapes[f"{p}/{part}/beta"] = (h,)
    shapes[f"{p}/intermediate/dense/kernel"] = (h, inner)
    shapes[f"{p}/intermediate/dense/bias"] = (inner,)
    shapes[f"{p}/output/dense/kernel"] = (inner, h)
    shapes[f"{p}/output/dense/bias"] = (h,)
  if with_heads:
    shapes.update({
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/transform/LayerNorm/gamma": (h,),
        "cls/predictions/transform/LayerNorm/beta": (h,),
        "cls/predictions/output_bias": (config["vocab_size"],),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    })
  return shapes


def random_values(shapes: Dict[str, tuple], seed: int = 0
                 ) -> Dict[str, np.ndarray]:
  """Random float32 weights, large enough that attention is far from uniform."""
  rng = np.random.default_rng(seed)
  values = {}
  for name, shape in shapes.items():
    if name.endswith("/gamma"):
      value = 1.0 + 0.2 * rng.standard_normal(shape)
    elif name.endswith(("/beta", "/bias", "output_bias")):
      value = 0.2 * rng.standard_normal(shape)
    elif "embeddings" in name:
      value = 0.5 * rng.standard_normal(shape)
    else:
      value = rng.standard_normal(shape) / math.sqrt(shape[0]) * 1.5
    values[name] = value.astype(np.float32)
  return values


def write_tf1_checkpoint(directory: str,
                         values: Dict[str, np.ndarray],
                         config: Optional[Dict] = None,
                         optimizer_state: bool = True,
                         extra: Optional[Dict[str, np.ndarray]] = None,
                         drop: Iterable[str] = ()) -> str:
  """Writes a TF1 Saver checkpoint (and bert_config.json); returns its prefix."""
  os.makedirs(directory, exist_ok=True)
  drop = set(drop)
  with tf.Graph().as_default():
    variables = []
    for name, value in {**values, **(extra or {})}.items():
      if name in drop:
        continue
      variables.append(tf.compat.v1.get_variable(name, initializer=value))
      if optimizer_state:
        for slot in ("adam_m", "adam_v"):
          variables.append(tf.compat.v1.get_variable(
              f"{name}/{slot}", initializer=np.zeros_like(value)))
    if optimizer_state:
      variables.append(tf.compat.v1.get_variable(
          "global_step", initializer=np.int64(1000), trainable=False))
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      prefix = saver.save(session, os.path.join(directory, "model.ckpt"),
                          global_step=1000, write_meta_graph=False)
  if config is not None:
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
      json.dump(config, f)
  return prefix


def numpy_forward(values, config, word_ids, input_mask, type_ids,
                  use_running_mean: bool = False, residual: bool = True):
  """TF1 RealFormer `BertModel` forward pass; returns (sequence, pooled).

  Args:
    values: TF1 name -> array.
    config: bert config dict.
    word_ids, input_mask, type_ids: int arrays [batch, seq].
    use_running_mean: RealFormer's running mean (softmax of `cur / (l + 1)`).
    residual: False gives plain BERT (no score skip edge).
  """
  v = {k: np.asarray(a, np.float64) for k, a in values.items()}
  b, s = word_ids.shape
  h = config["hidden_size"]
  n = config["num_attention_heads"]
  d = h // n
  x = (v["bert/embeddings/word_embeddings"][word_ids]
       + v["bert/embeddings/token_type_embeddings"][type_ids]
       + v["bert/embeddings/position_embeddings"][:s][None])
  x = numpy_reference.layer_norm(x, v["bert/embeddings/LayerNorm/gamma"],
                  v["bert/embeddings/LayerNorm/beta"])
  adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
  prev = None

  def heads(t):
    return t.reshape(b, s, n, d).transpose(0, 2, 1, 3)

  for i in range(config["num_hidden_layers"]):
    p = f"bert/encoder/layer_{i}/"

    def dense(t, name):
      return t @ v[p + name + "/kernel"] + v[p + name + "/bias"]

    q = heads(dense(x, "attention/self/query"))
    k = heads(dense(x, "attention/self/key"))
    val = heads(dense(x, "attention/self/value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    cur = scores + prev if (residual and prev is not None) else scores
    logits = cur / (i + 1) if use_running_mean else cur
    probs = numpy_reference.softmax(logits + adder)
    prev = cur
    context = (probs @ val).transpose(0, 2, 1, 3).reshape(b, s, h)
    attention = numpy_reference.layer_norm(dense(context, "attention/output/dense") + x,
                            v[p + "attention/output/LayerNorm/gamma"],
                            v[p + "attention/output/LayerNorm/beta"])
    inner = numpy_reference.gelu_tanh(dense(attention, "intermediate/dense"))
    x = numpy_reference.layer_norm(dense(inner, "output/dense") + attention,
                    v[p + "output/LayerNorm/gamma"],
                    v[p + "output/LayerNorm/beta"])
  pooled = np.tanh(x[:, 0] @ v["bert/pooler/dense/kernel"]
                   + v["bert/pooler/dense/bias"])
  return x, pooled


def numpy_mlm_logits(values, sequence, positions):
  """TF1 `get_masked_lm_output` logits, [batch, num_positions, vocab]."""
  v = {k: np.asarray(a, np.float64) for k, a in values.items()}
  gathered = np.take_along_axis(sequence, positions[:, :, None], axis=1)
  t = numpy_reference.gelu_tanh(gathered @ v["cls/predictions/transform/dense/kernel"]
            + v["cls/predictions/transform/dense/bias"])
  t = numpy_reference.layer_norm(t, v["cls/predictions/transform/LayerNorm/gamma"],
                  v["cls/predictions/transform/LayerNorm/beta"])
  return (t @ v["bert/embeddings/word_embeddings"].T
          + v["cls/predictions/output_bias"])


def numpy_nsp_logits(values, pooled):
  """TF1 `get_next_sentence_output` logits, [batch, 2]."""
  v = {k: np.asarray(a, np.float64) for k, a in values.items()}
  return (pooled @ v["cls/seq_relationship/output_weights"].T
          + v["cls/seq_relationship/output_bias"])


def example_inputs(config, batch=3, seq=12, seed=1):
  """Word ids / mask / type ids with right padding of different lengths."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, config["vocab_size"], size=(batch, seq)).astype(
      np.int32)
  lengths = np.array([seq, seq - 5, 4][:batch] + [seq] * max(0, batch - 3))
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  ids = ids * mask
  types = ((np.arange(seq)[None] >= (lengths // 2)[:, None]) * mask).astype(
      np.int32)
  return ids, mask, types
