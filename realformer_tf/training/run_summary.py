"""What train.py prints at the end of a run, and its console progress.

`summary_lines`: what was reached against its baselines, the speed, and where
the checkpoint, `params.yaml` and summaries are; `drop_duplicate_progress`
drops Orbit's absl copy of each progress block; `console`: our own lines.
"""

import os
from typing import Any, List, Mapping, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import input_reader
from official.nlp.data import pretrain_dataloader
from realformer_tf.checkpoints import run_directory
from realformer_tf.data import tokenization
from realformer_tf.training import cpu_numerics


def console(message: str) -> None:
  """Prints `message` to stdout beside Orbit's progress (absl: debug)."""
  logging.debug(message)
  print(message, flush=True)


def _not_orbit_progress(record) -> bool:
  """False for the absl copy of a progress line Orbit also prints."""
  return not (
      str(record.pathname).endswith(os.path.join("orbit", "controller.py"))
      and str(record.msg).startswith(("train |", " eval |", "eval |")))


def drop_duplicate_progress() -> None:
  """Installs `_not_orbit_progress` on absl's handler (once)."""
  handler = logging.get_absl_handler()
  if _not_orbit_progress not in handler.filters:
    handler.addFilter(_not_orbit_progress)


def _read_eval_records(files: List[str]) -> tuple:
  """(masked ids, their weights, next-sentence labels) of the first 10,000
  records of `files` (v1 and v2 records name them alike)."""
  spec = {"masked_lm_ids": tf.io.VarLenFeature(tf.int64),
          "masked_lm_weights": tf.io.VarLenFeature(tf.float32),
          "next_sentence_labels": tf.io.VarLenFeature(tf.int64)}
  ids, weights, labels = ([np.zeros([0], np.int64)], [np.zeros([0])],
                          [np.zeros([0], np.int64)])
  dataset = tf.data.TFRecordDataset(files).take(10000)
  for batch in dataset.batch(512):
    parsed = tf.io.parse_example(batch, spec)
    ids.append(parsed["masked_lm_ids"].values.numpy())
    weights.append(parsed["masked_lm_weights"].values.numpy())
    labels.append(parsed["next_sentence_labels"].values.numpy())
  return (np.concatenate(ids), np.concatenate(weights),
          np.concatenate(labels))


def most_frequent_masked_token(files: List[str]) -> Optional[tuple]:
  """(token id, fraction of masked positions holding it) in MLM records
  (their first 10,000); None if there is none."""
  ids, weights, _ = _read_eval_records(files)
  counts = np.bincount(ids, weights)
  if not counts.sum():
    return None
  token = int(np.argmax(counts))
  return token, counts[token] / counts.sum()


def majority_next_sentence_label(files: List[str]) -> Optional[tuple]:
  """(label, fraction, pairs) of the most frequent next-sentence label in the
  first 10,000 records; None without labels."""
  _, _, labels = _read_eval_records(files)
  if not labels.size:
    return None
  counts = np.bincount(labels, minlength=2)
  label = int(np.argmax(counts))
  return label, float(counts[label] / labels.size), int(labels.size)


def _eval_files(params: cfg.ExperimentConfig) -> List[str]:
  """The eval set's record files, or [] (not records, or unreadable)."""
  data = params.task.validation_data
  if not (isinstance(data, pretrain_dataloader.BertPretrainDataConfig) and
          data.file_type == "tfrecord"):
    return []
  try:
    return input_reader.match_files(data.input_path)
  except (tf.errors.OpError, ValueError) as e:
    logging.warning("No eval-set baselines: %s", e)
    return []


def _baseline(function, files: List[str]) -> Optional[tuple]:
  """`function(files)`, None (and a warning) if the records are unreadable."""
  try:
    return function(files) if files else None
  except (tf.errors.OpError, ValueError) as e:
    logging.warning("No eval-set baseline: %s", e)
    return None


def _mlm_lines(params: cfg.ExperimentConfig,
               metrics: Mapping[str, float]) -> List[str]:
  accuracy = metrics.get("masked_lm_accuracy")
  if accuracy is None:
    return []
  files = _eval_files(params)
  vocab_size = params.task.model.encoder.get().vocab_size
  line = (f"Held-out masked-LM accuracy: {accuracy:.4f}. Chance (uniform over "
          f"the {vocab_size}-token vocabulary): {1.0 / vocab_size:.4f}")
  found = _baseline(most_frequent_masked_token, files)
  if found:
    vocab_file = getattr(params.task, "vocab_file", "")
    tokens = (tokenization.load_vocab(vocab_file) if vocab_file and
              tf.io.gfile.exists(vocab_file) else [])
    token = (repr(tokens[found[0]]) if found[0] < len(tokens) else
             f"id {found[0]}")
    line += (f"; always predicting the most frequent masked token "
             f"({token}): {found[1]:.4f}")
  lines = [line + "."]
  if "next_sentence_accuracy" in metrics:
    nsp = metrics["next_sentence_accuracy"]
    line = f"Held-out next-sentence accuracy: {nsp:.4f}"
    majority = _baseline(majority_next_sentence_label, files)
    if majority:
      label, fraction, pairs = majority
      line += (". Always answering the majority label (" +
               ("random next sentence" if label else "true next sentence") +
               f", {round(fraction * pairs)} of the {pairs} eval pairs): "
               f"{fraction:.4f}" + ("; the model does not beat it"
                                    # A float32 tie can read a hair above.
                                    if nsp < fraction + 0.5 / pairs else ""))
    else:
      line += " (no labels read from the eval records; balanced ones: 0.5)"
    lines.append(line + ".")
  return lines


def summary_lines(params: cfg.ExperimentConfig, model_dir: str,
                  metrics: Mapping[str, Any], step: int,
                  steps_run: int, seconds: float) -> List[str]:
  """The closing lines of a train.py run from the final `metrics` (may be
  empty) and this invocation's `steps_run` in `seconds`."""
  lines = list(_mlm_lines(params, metrics))
  if any(k.startswith("majority_class_") for k in metrics):
    lines.append("GLUE metrics are fractions; majority_class_* is what "
                 "predicting the most frequent label everywhere scores.")
  if getattr(params.task, "name", "") == "realformer/squad" and metrics:
    lines.append("SQuAD metrics are on the official 0-100 scale "
                 "(exact_match 80 = 80% of the questions).")
  if getattr(params.task, "name", "") == cpu_numerics.QUICKSTART:
    lines.append(cpu_numerics.summary_line())
  if steps_run > 0 and seconds > 0:
    batch = params.task.train_data.global_batch_size
    lines.append(
        f"Speed: {steps_run} training steps in {seconds:.0f} s, "
        f"{steps_run / seconds:.1f} steps/s, "
        f"{steps_run * batch / seconds:.0f} examples/s (including "
        "evaluation and checkpointing).")
  latest = run_directory.newest_checkpoint(model_dir)
  lines.append(f"Step {step}. Checkpoint: {latest or 'none'}; config: "
               f"{os.path.join(model_dir, 'params.yaml')}; TensorBoard: "
               f"tensorboard --logdir {model_dir}")
  return lines
