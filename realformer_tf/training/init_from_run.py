"""Fine-tuning from a run of ours: its encoder config, checked before writing.

`task.init_checkpoint` may name a model dir of train.py's (or a checkpoint in
one). Model Garden would restore it into the fine-tuning experiment's own
encoder config (BERT-Base sized), failing only after `params.yaml` and
`train/` are written, with a "Shape mismatch" naming neither config. So the
run's encoder config is taken, and checkpoint and records are checked against
it before anything is written; so is the vocabulary's size against the
checkpoint's word-embedding rows (`vocab_fit`). The run and its newest
readable checkpoint are `checkpoints.run_directory`'s: a damaged newest
checkpoint is skipped, and the prefix read is the one the task restores.
"""

from typing import Optional

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import registry
from realformer_tf.training import input_checks
from realformer_tf.training import lr_schedule
from realformer_tf.training import modes
from realformer_tf.training import vocab_fit

# Encoder fields that define the checkpoint's variables or the function it
# computes; the others (dropout, initializer, outputs) are the fine-tuning
# run's own.
ARCHITECTURE_FIELDS = (
    "vocab_size", "hidden_size", "num_layers", "num_attention_heads",
    "hidden_activation", "intermediate_size", "max_position_embeddings",
    "type_vocab_size", "embedding_size", "residual_attention", "norm_first",
    "final_layer_norm", "norm_epsilon")


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
  run = run_directory.find_run(getattr(params.task, "init_checkpoint", ""))
  ours = _encoder_of(params)
  theirs = run and _encoder_of(run.config)
  if ours is None or theirs is None:
    return None
  run_config = run.config
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
        f"configured here (see {run.params_path}):\n  "
        + "\n  ".join(conflicts) +
        "\nDrop these settings (the run's are used) or start from another "
        "checkpoint.")
  logging.info(
      "task.init_checkpoint=%s is a %s run: its encoder config (%s) is "
      "used%s.", init_checkpoint, run_config.task.name,
      run.params_path,
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
                 "classifier's pooler starts fresh).", run.directory, why)
  run_vocab = run.vocab_file
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
  the newest checkpoint prefix whose encoder reads (a run directory's damaged
  newer ones skipped, with a warning), or None without
  `task.init_checkpoint`."""
  init_checkpoint = getattr(params.task, "init_checkpoint", "")
  encoder_config = _encoder_of(params)
  if not init_checkpoint:
    return None
  key = "task.init_checkpoint"
  if encoder_config is None:
    return run_directory.resolve_checkpoint(init_checkpoint, key)
  # A throwaway graph: only the variables' shapes are needed, and the real
  # model's layer names stay unsuffixed.
  with tf2_checkpoint.shapes_only_graph() as built:
    encoder = encoders.build_realformer_encoder(encoder_config)
    built.append(encoder)
    encoder(utils.dummy_inputs())

    def read_encoder(prefix: str) -> None:
      # "encoder": where the fine-tuning tasks' `initialize` finds it. Its
      # weights are read once: a truncated file fails here (and an older
      # checkpoint of the run is tried), not inside the restore after
      # params.yaml is written.
      reader, pairs, _ = tf2_checkpoint.check_encoder_checkpoint(
          prefix, encoder, "encoder")
      for _, name in pairs:
        reader.get_tensor(name)

    try:
      return run_directory.read_latest(init_checkpoint, key, read_encoder)[0]
    except errors.CheckpointMismatchError as e:
      raise errors.CheckpointMismatchError(
          f"{key}={init_checkpoint!r} does not fit task.model.encoder:\n{e}"
      ) from None
    except (tf.errors.OpError, IndexError, ValueError) as e:
      if str(e).startswith(f"{key}="):  # read_latest's: names it already.
        raise
      raise ValueError(f"{key}={init_checkpoint!r}: cannot read its encoder "
                       f"({type(e).__name__}: {e}).") from None


def check_vocab_fits(params: cfg.ExperimentConfig, mode: str) -> None:
  """Each vocabulary `mode` uses (the config's `vocab_file`s, and those the
  records' converter meta data names) has one token per word-embedding row
  of `task.init_checkpoint`; else a ValueError names both files and sizes."""
  init_checkpoint = getattr(params.task, "init_checkpoint", "")
  if not init_checkpoint:
    return
  key = "task.init_checkpoint"
  run = run_directory.find_run(init_checkpoint)
  trained_sha256 = vocab_fit.trained_vocab_sha256(run.config) if run else None
  for vocab_key, path in input_checks.vocab_files(params, mode):
    vocab_fit.check_vocab_fits(path, vocab_key, init_checkpoint, key,
                               trained_sha256)
  found = vocab_fit.embedding_rows(init_checkpoint)
  if found is None:
    return
  checkpoint, rows, variable = found
  for data_key, data in modes.data_configs(params, mode):
    input_path = getattr(data, "input_path", "")
    if not input_path or input_path == "dummy":
      continue
    for path in input_checks.match_input_files(data_key, input_path):
      meta_path, meta = input_checks.meta_data_of(path) or (None, {})
      size = meta.get("vocab_size")
      padded = (isinstance(size, int) and size < rows and trained_sha256
                and meta.get("vocab_sha256") == trained_sha256)  # vocab_fit
      if isinstance(size, int) and size != rows and not padded:
        raise ValueError(
            f"{data_key}.input_path: {path!r} was converted with vocabulary "
            f"{meta.get('vocab_file')!r} of {size} tokens (see {meta_path}), "
            f"but the word embedding of {key}={init_checkpoint!r} "
            f"({checkpoint}: {variable}) has {rows} rows: convert the data "
            "again with the checkpoint's vocabulary.")
