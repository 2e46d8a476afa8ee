"""Fine-tuning from a run of ours: its encoder config, checked before writing.

`task.init_checkpoint` may name a model dir of train.py's (or a checkpoint in
one). Model Garden would restore it into the fine-tuning experiment's own
encoder config (BERT-Base sized), failing only after `params.yaml` and
`train/` are written, with a "Shape mismatch" naming neither config. So the
run's encoder config is taken, and checkpoint and records are checked against
it before anything is written.
"""

import json
import os
from typing import Any, Dict, Optional, Tuple

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf.data import output_sets
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import registry
from realformer_tf.data import squad as squad_data
from realformer_tf.data import tokenization
from realformer_tf.training import modes
from realformer_tf.training import preflight
from realformer_tf.training import lr_schedule

# Encoder fields that define the checkpoint's variables or the function it
# computes; the others (dropout, initializer, outputs) are the fine-tuning
# run's own.
ARCHITECTURE_FIELDS = (
    "vocab_size", "hidden_size", "num_layers", "num_attention_heads",
    "hidden_activation", "intermediate_size", "max_position_embeddings",
    "type_vocab_size", "embedding_size", "residual_attention", "norm_first",
    "final_layer_norm", "norm_epsilon")


def _run_of(params: cfg.ExperimentConfig):
  """(model dir, config) of the train.py run `task.init_checkpoint` is or lies
  in, else (None, None)."""
  init_checkpoint = getattr(params.task, "init_checkpoint", "") or ""
  for directory in ([init_checkpoint] if tf.io.gfile.isdir(init_checkpoint)
                    else []) + [os.path.dirname(init_checkpoint.rstrip("/"))]:
    if directory and tf.io.gfile.exists(os.path.join(directory,
                                                     "params.yaml")):
      return directory, registry.load_experiment_config(directory)
  return None, None


def _encoder_of(config: cfg.ExperimentConfig):
  found = registry.task_encoder(config)[1]
  return found if isinstance(found, encoders.RealFormerEncoderConfig) else None


def inherit_encoder(params: cfg.ExperimentConfig,
                    explicit: lr_schedule.ExplicitKeys
                   ) -> Optional[cfg.ExperimentConfig]:
  """Copies into `params` the encoder architecture (`ARCHITECTURE_FIELDS`) of
  the run `task.init_checkpoint` names (a value the user set otherwise is an
  error naming both); returns the run's config, or None if it is not a model
  dir of ours (then nothing changes). `explicit`: keys the user set.
  """
  run_dir, run_config = _run_of(params)
  ours = _encoder_of(params)
  theirs = run_config and _encoder_of(run_config)
  if ours is None or theirs is None:
    return None
  init_checkpoint = params.task.init_checkpoint
  conflicts, taken = [], []
  for field in ARCHITECTURE_FIELDS:
    key = f"task.model.encoder.any.{field}"
    value, run_value = getattr(ours, field), getattr(theirs, field)
    if value == run_value:
      continue
    if key in explicit:
      conflicts.append(f"{key}={value!r} (set by {explicit[key][1]}) but the "
                       f"run has {field}={run_value!r}")
    else:
      setattr(ours, field, run_value)
      taken.append(f"{field}={run_value!r}")
  if conflicts:
    raise ValueError(
        f"task.init_checkpoint={init_checkpoint!r} is a run of "
        f"{run_config.task.name} whose encoder differs from the one "
        f"configured here (see {os.path.join(run_dir, 'params.yaml')}):\n  "
        + "\n  ".join(conflicts) +
        "\nDrop these settings (the run's are used) or start from another "
        "checkpoint.")
  logging.info(
      "task.init_checkpoint=%s is a %s run: its encoder config (%s) is "
      "used%s.", init_checkpoint, run_config.task.name,
      os.path.join(run_dir, "params.yaml"),
      f", changing {', '.join(taken)}" if taken else " (no change)")

  # GLUE's pooler is `hidden_size` wide: the run's NSP pooler restores into
  # it only when that head was as wide.
  heads = getattr(run_config.task.model, "cls_heads", [])
  nsp = {h.name: h.inner_dim for h in heads}.get("next_sentence")
  if getattr(params.task, "init_cls_pooler", False) and nsp != ours.hidden_size:
    why = ("was trained without a next-sentence head" if nsp is None else
           f"has a next-sentence pooler of width {nsp}, not the encoder's "
           f"hidden_size={ours.hidden_size}")
    if "task.init_cls_pooler" in explicit:
      raise ValueError(
          f"task.init_cls_pooler=true (set by "
          f"{explicit['task.init_cls_pooler'][1]}), but the run "
          f"task.init_checkpoint={init_checkpoint!r} {why}, so there is no "
          "pooler to restore.")
    params.task.init_cls_pooler = False
    logging.info("The run %s %s: task.init_cls_pooler is off (the "
                 "classifier's pooler starts fresh).", run_dir, why)
  run_vocab = getattr(run_config.task, "vocab_file", "")
  eval_data = getattr(params.task, "validation_data", None)
  # Empty, or a placeholder path (the SQuAD YAMLs' /path/to/...): the run's.
  if (run_vocab and hasattr(eval_data, "vocab_file") and
      (not eval_data.vocab_file or
       not tf.io.gfile.exists(eval_data.vocab_file))):
    logging.info("task.validation_data.vocab_file=%r: using the run's "
                 "vocabulary %s.", eval_data.vocab_file, run_vocab)
    eval_data.vocab_file = run_vocab
  return run_config


def check_init_checkpoint(params: cfg.ExperimentConfig) -> Optional[str]:
  """Checks that `task.init_checkpoint` restores into the configured encoder
  (a `CheckpointMismatchError` names each variable and both shapes); returns
  the checkpoint prefix, or None without `task.init_checkpoint`."""
  init_checkpoint = getattr(params.task, "init_checkpoint", "")
  encoder_config = _encoder_of(params)
  if not init_checkpoint:
    return None
  path = utils.resolve_checkpoint(init_checkpoint, "task.init_checkpoint")
  if encoder_config is None:
    return path
  # A throwaway graph: only the variables' shapes are needed, and the real
  # model's layer names stay unsuffixed.
  with tf.Graph().as_default():
    encoder = encoders.build_realformer_encoder(encoder_config)
    encoder(utils.dummy_inputs())
    try:
      # "encoder": where the fine-tuning tasks' `initialize` finds it.
      reader, pairs, _ = tf2_checkpoint.check_encoder_checkpoint(
          path, encoder, "encoder")
      # Reads the encoder's weights once: a truncated file fails here, named,
      # instead of inside the restore after params.yaml is written.
      for _, key in pairs:
        reader.get_tensor(key)
    except errors.CheckpointMismatchError as e:
      raise errors.CheckpointMismatchError(
          f"task.init_checkpoint={init_checkpoint!r} does not fit "
          f"task.model.encoder:\n{e}") from None
    except (tf.errors.OpError, IndexError, ValueError) as e:
      raise ValueError(
          f"task.init_checkpoint={init_checkpoint!r}: cannot read the "
          f"encoder of {path!r} ({type(e).__name__}: {e}).") from None
  return path


def meta_data_of(record_path: str) -> Optional[Tuple[str, Dict[str, Any]]]:
  """(path, contents) of the converter meta data listing `record_path`: GLUE's
  `<task>_meta_data.json` under `splits`, SQuAD's next to its records, any
  set manifest's under `files` (`output_sets`)."""
  directory, name = os.path.split(record_path)
  squad_files = {squad_data.TRAIN_META: squad_data.TRAIN_RECORD,
                 squad_data.EVAL_META: squad_data.EVAL_RECORD}
  for meta_path in sorted(tf.io.gfile.glob(
      os.path.join(directory, "*meta_data.json"))):
    try:
      with tf.io.gfile.GFile(meta_path, "r") as f:
        meta = json.load(f)
      listed = {split["file"] for split in (meta.get("splits") or {}).values()}
      listed |= set(meta.get(output_sets.FILES_KEY) or {})
    except (ValueError, OSError, AttributeError, KeyError, TypeError):
      continue  # Not a converter's meta data.
    if name in listed | {squad_files.get(os.path.basename(meta_path))}:
      return meta_path, meta
  return None


def _describe(path: str, size: Any, sha: str) -> str:
  return f"{path} ({size} tokens, sha256 {sha[:12]})"


def check_records_vocabulary(params: cfg.ExperimentConfig, mode: str
                            ) -> None:
  """Records `mode` reads that were converted with another vocabulary than
  the run `task.init_checkpoint` names are an error naming both and the fix.
  """
  _, run_config = _run_of(params)
  run_vocab = getattr(getattr(run_config, "task", None), "vocab_file", "")
  if not run_vocab or not tf.io.gfile.exists(run_vocab):
    return
  run_sha = output_sets.file_sha256(run_vocab)
  run_size = len(tokenization.load_vocab(run_vocab))
  for key, data in modes.data_configs(params, mode):
    input_path = getattr(data, "input_path", "")
    if not input_path or input_path == "dummy":
      continue
    vocab_file = getattr(data, "vocab_file", "")
    if (vocab_file and tf.io.gfile.exists(vocab_file) and
        output_sets.file_sha256(vocab_file) != run_sha):
      raise ValueError(
          f"{key}.vocab_file={vocab_file!r} is not the vocabulary of the run "
          f"{params.task.init_checkpoint!r}, "
          f"{_describe(run_vocab, run_size, run_sha)}: use "
          f"--params_override={key}.vocab_file={run_vocab}.")
    for path in preflight.match_input_files(key, input_path):
      meta_path, meta = meta_data_of(path) or (None, {})
      sha = meta.get("vocab_sha256")
      if sha and sha != run_sha:
        raise ValueError(
            f"{key}.input_path: {path!r} was converted with vocabulary "
            f"{_describe(meta.get('vocab_file'), meta.get('vocab_size'), sha)}"
            f" (see {meta_path}), but task.init_checkpoint="
            f"{params.task.init_checkpoint!r} was trained with "
            f"{_describe(run_vocab, run_size, run_sha)}: convert the data "
            f"again with --vocab_file={run_vocab}.")


def check_records_manifest(params: cfg.ExperimentConfig, mode: str) -> None:
  """Records `mode` reads must be those their converter's meta data lists
  (`output_sets.check_set`: a killed conversion leaves new records beside
  old meta data); else a ValueError names the data key, the file, what
  differs and the command to run again. Each set is checked once; records
  without meta data (not ours) are not checked."""
  checked = set()
  for key, data in modes.data_configs(params, mode):
    input_path = getattr(data, "input_path", "")
    if not input_path or input_path == "dummy":
      continue
    for path in preflight.match_input_files(key, input_path):
      meta_path, meta = meta_data_of(path) or (None, None)
      if meta_path is None or meta_path in checked:
        continue
      checked.add(meta_path)
      try:
        output_sets.check_set(meta_path, meta)
      except ValueError as e:
        raise ValueError(f"{key}.input_path={input_path!r}: {e}") from None
