"""Tiny trained-run model dirs (params.yaml + trainer checkpoint) per head."""

import fcntl
import json
import os
import pickle
import shutil
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from official.core import base_task
from official.core import exp_factory
from official.core import task_factory
from official.core import train_utils
from realformer_tf.configs import experiments  # pylint: disable=unused-import
from realformer_tf.configs import finetuning  # pylint: disable=unused-import
from realformer_tf.configs import squad  # pylint: disable=unused-import
from realformer_tf.data import glue as glue_data
from realformer_tf.data import glue_tasks
from realformer_tf.data import squad as squad_data
from realformer_tf.data import squad_json
from tests.helpers import watchdog

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SEQ_LENGTH = 32
MAX_PREDICTIONS = 5
QUERY_LENGTH = 8
DOC_STRIDE = 8

_WORDS = (
    "the a an is was were who what where when won lost beat played gave "
    "dog cat sat on mat movie film great bad boring fun and of to in at "
    "from their name region century super bowl denver broncos carolina "
    "panthers stadium santa clara normans normandy france norse raiders "
    "descended levi play ##ing ##ed ##er ##ly").split()
_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
         + list(_CHARS + ".,'?!-:;\"()") + [f"##{c}" for c in _CHARS]
         + [w for w in _WORDS if w not in _CHARS])

TINY_ENCODER = dict(hidden_size=32, num_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=32,
                    # Wide weights: well-separated logits, so argmax-type
                    # outputs (best spans, classes) are not near ties.
                    initializer_range=0.3)

HEADS = ("pretraining", "sst2", "stsb", "squad_v1", "squad_v2")

# SQuAD (question, context) pairs: long contexts span several doc-stride
# windows, one context has a double space.
CONTEXT_1 = ("Super Bowl 50 was won by the Denver Broncos, who beat the "
             "Carolina Panthers 24-10 at Levi's Stadium in Santa Clara. The "
             "Normans were descended from Norse raiders and gave their name "
             "to Normandy, a region in France, in the 10th century.")
SQUAD_QAS = (
    ("Who won Super Bowl 50?", CONTEXT_1),
    ("Where was the dog?", "The  dog sat on the mat."),
    ("What region gave the Normans their name in France?", CONTEXT_1),
    ("Who beat the Carolina Panthers?", CONTEXT_1),
    ("Where did the cat sit?", "The cat sat on the mat, the dog at Levi's "
     "Stadium."),
)


def write_vocab(path: str) -> str:
  """The handmade WordPiece vocabulary `VOCAB`, written to `path`."""
  with open(path, "w") as f:
    f.write("\n".join(VOCAB) + "\n")
  return path


def squad_features(json_path: str, vocab_file: str, v2: bool):
  """`SQUAD_QAS` as the SQuAD eval pipeline (`data.squad`, squad_lib) reads
  them: (examples, features, tokenizer); the JSON is written to `json_path`.
  """
  qas = [{"id": f"q{i}", "question": q, "is_impossible": False,
          "answers": [{"text": c.split()[1],
                       "answer_start": c.index(c.split()[1])}]}
         for i, (q, c) in enumerate(SQUAD_QAS)]
  with open(json_path, "w") as f:
    json.dump({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": [qa]} for qa, (_, c) in zip(qas, SQUAD_QAS)]}]},
              f)
  examples, _ = squad_json.read_squad_examples(json_path, False, v2)
  tokenizer = squad_data.SquadTokenizer(vocab_file)
  features = []
  squad_data.convert_examples_to_features(
      examples, tokenizer, SEQ_LENGTH, DOC_STRIDE, QUERY_LENGTH,
      is_training=False, output_fn=features.append)
  return examples, features, tokenizer


def make_config(head: str, root: str, vocab_file: str):
  """The experiment config of a tiny run of `head`."""
  if head == "pretraining":
    config = exp_factory.get_exp_config(experiments.PRETRAINING)
    config.task.vocab_file = vocab_file
    config.task.model.cls_heads[0].inner_dim = TINY_ENCODER["hidden_size"]
    for data in (config.task.train_data, config.task.validation_data):
      data.seq_length = SEQ_LENGTH
      data.max_predictions_per_seq = MAX_PREDICTIONS
  elif head in ("sst2", "stsb"):
    config = exp_factory.get_exp_config(finetuning.GLUE)
    spec = glue_tasks.get_task(head)
    config.task.glue_task = spec.name
    config.task.model.num_classes = spec.num_classes
    data_dir = os.path.join(root, "data")
    for split, data in (("train", config.task.train_data),
                        ("dev", config.task.validation_data)):
      data.seq_length = SEQ_LENGTH
      data.label_type = "float" if spec.is_regression else "int"
      data.input_path = glue_data.record_path(data_dir, spec.name, split)
    if head == "sst2":
      # As `python -m realformer_tf.data.glue` writes it: the exporter finds
      # the vocabulary here.
      os.makedirs(data_dir, exist_ok=True)
      with open(glue_data.meta_data_path(data_dir, spec.name), "w") as f:
        json.dump({"task": spec.name, "vocab_file": vocab_file,
                   "lower_case": True, "max_seq_length": SEQ_LENGTH,
                   "train_data_size": 10}, f)
  elif head in ("squad_v1", "squad_v2"):
    config = exp_factory.get_exp_config(squad.SQUAD)
    v2 = head == "squad_v2"
    for data in (config.task.train_data, config.task.validation_data):
      data.seq_length = SEQ_LENGTH
      data.version_2_with_negative = v2
    config.task.validation_data.vocab_file = vocab_file
    config.task.validation_data.query_length = QUERY_LENGTH
    config.task.validation_data.doc_stride = DOC_STRIDE
  else:
    raise ValueError(head)
  encoder = config.task.model.encoder.any
  encoder.override(dict(TINY_ENCODER, vocab_size=len(VOCAB)))
  config.validate()
  return config


def _dummy_batch(head: str, rng: np.random.RandomState
                 ) -> Dict[str, tf.Tensor]:
  ids = rng.randint(5, len(VOCAB), size=(4, SEQ_LENGTH)).astype(np.int32)
  ids[:, 0] = 2
  batch = dict(input_word_ids=tf.constant(ids),
               input_mask=tf.ones_like(ids),
               input_type_ids=tf.constant(
                   (np.arange(SEQ_LENGTH) >= SEQ_LENGTH // 2)[None].repeat(
                       4, 0).astype(np.int32)))
  if head == "pretraining":
    batch["masked_lm_positions"] = tf.constant(
        rng.randint(1, SEQ_LENGTH, size=(4, MAX_PREDICTIONS)), tf.int32)
  return batch


def make_model_dir(root: str, head: str, seed: int = 0):
  """A model dir as train.py leaves it: params.yaml + `ckpt-1`.

  The checkpoint is written like Model Garden's trainer writes it
  (`tf.train.Checkpoint(global_step, model, optimizer,
  **model.checkpoint_items)` through a `CheckpointManager`), after one
  optimizer step so it also holds optimizer slots.

  Returns:
    (model_dir, vocab_file, config, model): the in-memory model holds the
    checkpointed weights.
  """
  model_dir = os.path.join(root, head)
  os.makedirs(model_dir, exist_ok=True)
  vocab_file = write_vocab(os.path.join(root, f"{head}_vocab.txt"))
  config = make_config(head, model_dir, vocab_file)
  train_utils.serialize_config(config, model_dir)
  tf_keras.utils.set_random_seed(seed)
  task = task_factory.get_task(config.task)
  model = task.build_model()
  optimizer = base_task.Task.create_optimizer(config.trainer.optimizer_config,
                                              config.runtime)
  batch = _dummy_batch(head, np.random.RandomState(seed))
  with tf.GradientTape() as tape:
    outputs = model(batch, training=True)
    loss = tf.add_n([tf.reduce_mean(tf.square(tf.cast(t, tf.float32)))
                     for t in tf.nest.flatten(outputs)])
  grads = tape.gradient(loss, model.trainable_variables)
  optimizer.apply_gradients(
      [(g, v) for g, v in zip(grads, model.trainable_variables)
       if g is not None])
  global_step = tf.Variable(1, dtype=tf.int64, name="global_step")
  checkpoint = tf.train.Checkpoint(global_step=global_step, model=model,
                                   optimizer=optimizer,
                                   **model.checkpoint_items)
  tf.train.CheckpointManager(checkpoint, model_dir, max_to_keep=2).save(
      checkpoint_number=1)
  return model_dir, vocab_file, config, model


def build_once(tmp_path_factory, name: str, build: Callable[[str], Any]) -> Any:
  """`build(directory)`'s picklable result, built once per test session.

  Under pytest-xdist every worker runs a module's fixtures again; here the
  first worker to ask builds in a directory all workers share (the xdist
  recipe: the parent of each worker's base temp) while the others wait on a
  lock and read the pickled result.
  """
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent
  directory = os.path.join(str(root), name)
  result_path = directory + ".pkl"
  with open(directory + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    if not os.path.exists(result_path):
      shutil.rmtree(directory, ignore_errors=True)  # A failed build's.
      os.makedirs(directory)
      result = build(directory)
      with open(result_path + ".tmp", "wb") as f:
        pickle.dump(result, f)
      os.replace(result_path + ".tmp", result_path)
    with open(result_path, "rb") as f:
      return pickle.load(f)


def subprocess_env() -> Dict[str, str]:
  """Environment of the fresh processes: the repo importable, CPU only."""
  return dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep
              + os.environ.get("PYTHONPATH", ""),
              TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def saved_model_cli(args: Sequence[str], with_text_ops: bool = True
                   ) -> subprocess.CompletedProcess:
  """`saved_model_cli ARGS`; with text ops via our wrapper, else the stock tool."""
  env = subprocess_env()
  command = ([sys.executable, "-m", "realformer_tf.serving.saved_model_cli"]
             if with_text_ops else ["saved_model_cli"])
  return watchdog.run(command + list(args), env=env)


def keras_inputs(features: Dict[str, np.ndarray],
                 keys: Optional[List[str]] = None) -> Dict[str, tf.Tensor]:
  keys = keys or ["input_word_ids", "input_mask", "input_type_ids"]
  return {k: tf.constant(np.asarray(features[k]), tf.int32) for k in keys}
