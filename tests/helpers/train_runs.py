"""Tiny pre-training data, configs, and in-process / subprocess train.py runs
for the trainer tests; plain-text corpora and quickstart configs for the
quickstart's data tests."""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import yaml

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.configs import encoders
from realformer_tf.configs import experiments
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import record_facts
from realformer_tf.data import shards
from realformer_tf.training import train_lib
from tests.helpers import watchdog

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TRAIN_PY = os.path.join(REPO_ROOT, "train.py")

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# A RealFormer small enough to train a few steps in seconds on one core.
TINY_SEQ_LENGTH = 16
TINY_MAX_PREDICTIONS = 3
TINY_VOCAB_SIZE = 64


def write_vocab(path: str, size: int = TINY_VOCAB_SIZE) -> str:
  """A valid WordPiece vocabulary of `size` tokens ([PAD] first)."""
  tokens = SPECIAL_TOKENS + [
      f"tok{i}" for i in range(size - len(SPECIAL_TOKENS))]
  with open(path, "w") as f:
    f.write("\n".join(tokens) + "\n")
  return path


def write_corpus(path, documents: int = 6, sentences: int = 6,
                 sentence=lambda d, s: f"Document {d} sentence {s} has words "
                 "in it.") -> str:
  """A plain-text corpus as the quickstart reads it (a sentence a line, a
  blank line after each document): `documents` documents of `sentences`
  lines `sentence(d, s)`.

  Args:
    path: A `pathlib.Path` to write.
    documents: Number of documents.
    sentences: Sentences per document.
    sentence: `sentence(document index, sentence index)` -> the line.

  Returns:
    `str(path)`.
  """
  lines = []
  for d in range(documents):
    lines += [sentence(d, s) for s in range(sentences)]
    lines.append("")
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def quickstart_params(seq_length: int, max_predictions_per_seq: int,
                      **encoder):
  """`realformer/quickstart`'s config with both data sets' lengths and the
  `any` encoder's `encoder` arguments (e.g. `vocab_size=100`) overridden."""
  params = exp_factory.get_exp_config(experiments.QUICKSTART)
  data = {"seq_length": seq_length,
          "max_predictions_per_seq": max_predictions_per_seq}
  params.override({"task": {
      "model": {"encoder": {"any": encoder}},
      "train_data": data, "validation_data": dict(data)}})
  return params


def write_quickstart_yaml(path: str, *, vocab_size: int, width: int,
                          seq_length: int, max_predictions: int, batch: int,
                          trainer: Dict) -> str:
  """A YAML of `realformer/quickstart` overrides for a tiny run: a 1-layer
  `any` encoder `width` wide (FFN 2x, 2 heads, `seq_length` positions), its
  NSP head, both data sets' lengths and batch, and `trainer` as given."""
  data = {"seq_length": seq_length, "max_predictions_per_seq": max_predictions,
          "global_batch_size": batch}
  return write_yaml(path, {
      "task": {
          "model": {
              "encoder": {"type": "any", "any": {
                  "vocab_size": vocab_size, "hidden_size": width,
                  "num_layers": 1, "num_attention_heads": 2,
                  "intermediate_size": 2 * width,
                  "max_position_embeddings": seq_length}},
              "cls_heads": [{"inner_dim": width, "num_classes": 2,
                             "dropout_rate": 0.1, "name": "next_sentence"}]},
          "train_data": data, "validation_data": dict(data)},
      "trainer": trainer})


def save_encoder_checkpoint(run_dir: str, number: int, **encoder) -> str:
  """Saves a RealFormer encoder of `encoder` (config fields) in `run_dir` as
  a fine-tuning run's init checkpoint `ckpt-<number>`; returns its prefix."""
  model = encoders.build_realformer_encoder(
      encoders.RealFormerEncoderConfig(**encoder))
  ids = tf.zeros([1, 4], tf.int32)
  model(dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
             input_type_ids=ids))
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(encoder=model),
                                       run_dir, max_to_keep=1)
  return manager.save(checkpoint_number=number)


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _float_feature(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))


def write_pretraining_records(path: str,
                              num_examples: int,
                              seq_length: int = TINY_SEQ_LENGTH,
                              max_predictions: int = TINY_MAX_PREDICTIONS,
                              vocab_size: int = TINY_VOCAB_SIZE,
                              seed: int = 0,
                              poison_index: Optional[int] = None) -> str:
  """BERT MLM/NSP records as Model Garden's `BertPretrainDataLoader` reads.

  Every example has exactly `max_predictions` masked positions (weight 1), so
  a per-replica mean loss averaged over equal replica batches equals the
  global mean. Example `poison_index`, if set, gets NaN masked-LM weights.
  """
  rng = np.random.RandomState(seed)
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(num_examples):
      length = rng.randint(seq_length // 2, seq_length + 1)
      ids = rng.randint(5, vocab_size, size=length)
      ids[0] = 2  # [CLS]
      ids[length - 1] = 3  # [SEP]
      split = length // 2
      ids[split] = 3
      input_ids = list(ids) + [0] * (seq_length - length)
      mask = [1] * length + [0] * (seq_length - length)
      segments = [0] * (split + 1) + [1] * (length - split - 1) + [0] * (
          seq_length - length)
      positions = sorted(rng.choice(
          [p for p in range(1, length - 1) if p != split], max_predictions,
          replace=False))
      masked_ids = [input_ids[p] for p in positions]
      for p in positions:
        input_ids[p] = 4  # [MASK]
      weights = [1.0] * max_predictions
      if poison_index == i:
        weights = [float("nan")] * max_predictions
      example = tf.train.Example(features=tf.train.Features(feature={
          "input_ids": _int_feature(input_ids),
          "input_mask": _int_feature(mask),
          "segment_ids": _int_feature(segments),
          "masked_lm_positions": _int_feature(positions),
          "masked_lm_ids": _int_feature(masked_ids),
          "masked_lm_weights": _float_feature(weights),
          "next_sentence_labels": _int_feature([int(rng.randint(2))]),
      }))
      writer.write(example.SerializeToString())
  return path


def write_pretraining_shards(stem: str, count: int, per_shard: int,
                             seed: int = 0) -> str:
  """A set of `count` shards (`data.shards` names) of `per_shard` records
  each, all different, committed as one output set with its manifest
  `<stem>_pretraining_meta_data.json`; returns the set's glob."""
  paths = shards.shard_paths(stem, count, ".tfrecord")
  with output_sets.output_set(f"{stem}_pretraining_meta_data.json",
                              pretraining_data.WRITER) as outputs:
    for i, path in enumerate(paths):
      write_pretraining_records(outputs.stage(path), per_shard,
                                seed=seed * 1000 + i)
    outputs.commit({"task": "pretraining", "num_examples": count * per_shard,
                    "records": record_facts.listing(outputs.staged)})
  return shards.pattern(stem, count, ".tfrecord")


def tiny_overrides(train_file: str,
                   eval_file: str,
                   vocab_file: str = "",
                   train_steps: int = 6,
                   batch_size: int = 8,
                   num_layers: int = 2,
                   dropout: float = 0.1,
                   steps_per_loop: int = 2,
                   checkpoint_interval: int = 2,
                   learning_rate: float = 1e-3,
                   scale_loss: bool = False,
                   sgd: bool = False) -> Dict:
  """Overrides turning `realformer/pretraining` into a seconds-long run.

  `sgd`: SGD with momentum at a constant rate instead of the paper's AdamW.
  """
  data = dict(seq_length=TINY_SEQ_LENGTH,
              max_predictions_per_seq=TINY_MAX_PREDICTIONS,
              global_batch_size=batch_size)
  overrides = {
      "task": {
          "vocab_file": vocab_file,
          "scale_loss": scale_loss,
          "model": {
              "encoder": {
                  "type": "any",
                  "any": {
                      "vocab_size": TINY_VOCAB_SIZE,
                      "hidden_size": 16,
                      "num_layers": num_layers,
                      "num_attention_heads": 2,
                      "intermediate_size": 32,
                      "max_position_embeddings": 32,
                      "dropout_rate": dropout,
                      "attention_dropout_rate": dropout,
                  },
              },
              "cls_heads": [{"inner_dim": 16, "num_classes": 2,
                             "dropout_rate": dropout,
                             "name": "next_sentence"}],
          },
          "train_data": dict(data, input_path=train_file,
                             shuffle_buffer_size=1),
          "validation_data": dict(data, input_path=eval_file,
                                  drop_remainder=False),
      },
      "trainer": {
          "train_steps": train_steps,
          "steps_per_loop": steps_per_loop,
          "summary_interval": steps_per_loop,
          "checkpoint_interval": checkpoint_interval,
          "validation_interval": train_steps,
          "validation_steps": -1,
          "max_to_keep": 3,
          "optimizer_config": {
              "learning_rate": {"polynomial": {
                  "initial_learning_rate": learning_rate,
                  "decay_steps": train_steps}},
              "warmup": {"polynomial": {"warmup_steps": 2}},
          },
      },
  }
  if sgd:
    optimizer = overrides["trainer"]["optimizer_config"]
    optimizer["optimizer"] = {"type": "sgd", "sgd": {"momentum": 0.9}}
    optimizer["learning_rate"] = {"type": "constant",
                                  "constant": {"learning_rate": learning_rate}}
    optimizer["warmup"] = {"type": None}
  return overrides


def write_yaml(path: str, content: Dict) -> str:
  with open(path, "w") as f:
    yaml.safe_dump(content, f)
  return path


def make_tiny_run(tmp_path, num_train: int = 64, num_eval: int = 16,
                  poison_index: Optional[int] = None, **overrides) -> Dict:
  """Writes data, vocab and a tiny-config YAML under `tmp_path`."""
  data_dir = tmp_path / "data"
  data_dir.mkdir(exist_ok=True)
  train_file = write_pretraining_records(
      str(data_dir / "train.tfrecord"), num_train, poison_index=poison_index)
  eval_file = write_pretraining_records(
      str(data_dir / "eval.tfrecord"), num_eval, seed=1)
  vocab_file = write_vocab(str(data_dir / "vocab.txt"))
  config = write_yaml(
      str(tmp_path / "tiny.yaml"),
      tiny_overrides(train_file, eval_file, vocab_file, **overrides))
  return dict(train_file=train_file, eval_file=eval_file,
              vocab_file=vocab_file, config_file=config)


@dataclasses.dataclass
class Flags(train_utils.ParseConfigOptions):
  """The flags train.py passes to `train_lib.run`."""
  mode: str = "train"
  model_dir: str = ""
  quickstart_input_files: Optional[List[str]] = None
  enable_async_checkpointing: bool = False


def run_in_process(model_dir, config_files, mode="train", params_override="",
                   experiment="realformer/pretraining"):
  """`train_lib.run` with the flags train.py would pass."""
  return train_lib.run(Flags(
      experiment=experiment, config_file=list(config_files),
      params_override=params_override, tpu=None, mode=mode,
      model_dir=str(model_dir)))


def subprocess_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
  env = dict(os.environ)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  env["CUDA_VISIBLE_DEVICES"] = ""
  env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
  # One intra-op thread per process keeps parallel test processes from
  # oversubscribing the cores.
  env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
  env.setdefault("TF_NUM_INTEROP_THREADS", "2")
  if extra:
    env.update(extra)
  return env


def local_cluster(n: int) -> List[str]:
  """`n` free `127.0.0.1:PORT` addresses for a local TF_CONFIG cluster."""
  sockets = []
  for _ in range(n):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    sockets.append(s)
  addresses = [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
  for s in sockets:
    s.close()
  return addresses


def tf_config(workers: Sequence[str], index: int) -> str:
  """TF_CONFIG of worker `index` of the cluster `workers`."""
  return json.dumps({"cluster": {"worker": list(workers)},
                     "task": {"type": "worker", "index": index}})


def train_command(model_dir: str, config_files: Sequence[str] = (),
                  experiment: str = "realformer/pretraining",
                  mode: str = "train", extra: Sequence[str] = ()) -> List[str]:
  return ([sys.executable, TRAIN_PY, f"--experiment={experiment}",
           f"--mode={mode}", f"--model_dir={model_dir}"] +
          [f"--config_file={c}" for c in config_files] + list(extra))


def run_train(model_dir: str, config_files: Sequence[str] = (),
              **kwargs) -> subprocess.CompletedProcess:
  """Runs train.py to completion (stopped only when hung: `watchdog`);
  returns the finished process."""
  return watchdog.run(
      train_command(model_dir, config_files, **kwargs), cwd=REPO_ROOT,
      env=subprocess_env())


def run_train_timing_exit(model_dir: str, config_files: Sequence[str] = (),
                          timeout: int = 240, **kwargs
                         ) -> Tuple[subprocess.CompletedProcess, float]:
  """`run_train`, and the seconds from train.py's last line on stdout (its
  closing summary) to its exit."""
  command = train_command(model_dir, config_files, **kwargs)
  with tempfile.TemporaryFile("w+") as stderr:
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    kill_timer = threading.Timer(timeout, proc.kill)
    kill_timer.start()
    lines, last_line_at = [], time.monotonic()
    try:
      for line in proc.stdout:
        lines.append(line)
        last_line_at = time.monotonic()
      proc.wait()
      exit_delay = time.monotonic() - last_line_at
    finally:
      kill_timer.cancel()
    stderr.seek(0)
    return subprocess.CompletedProcess(command, proc.returncode, "".join(lines),
                                       stderr.read()), exit_delay


def list_checkpoints(model_dir: str) -> List[str]:
  """The checkpoints `model_dir/checkpoint` lists, oldest first."""
  state = tf.train.get_checkpoint_state(model_dir)
  if not state:
    return []
  return [p if os.path.isabs(p) else os.path.join(model_dir, p)
          for p in state.all_model_checkpoint_paths]
