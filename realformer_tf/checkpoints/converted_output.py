"""What convert and `save_run` write, and what they may write over.

A converted checkpoint is `ckpt-1`, its state file and YAML (`write`), swapped
in whole; a directory is replaced only when it holds one (`encoder.yaml`, the
state file, `ckpt-1`), never a train.py run.
"""

import os
from typing import Any, Dict, List, Mapping, Sequence

import tensorflow as tf
import yaml

from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.core import ownership
from realformer_tf.core import writes

CHECKPOINT_PREFIX = run_directory.CHECKPOINT_PREFIX
ENCODER_YAML = run_directory.ENCODER_YAML
PRETRAINER_YAML = run_directory.PRETRAINER_YAML


def encoder_items(encoder) -> Dict[str, Any]:
  """A converted encoder's checkpoint items: itself, and its pooler where
  GLUE's `init_cls_pooler` finds it."""
  pooler = encoder.pooler_layer
  return {"encoder": encoder,
          f"{tf1_checkpoint.NSP_HEAD_NAME}.pooler_dense": tf.train.Checkpoint(
              kernel=tf.Variable(pooler.kernel),
              bias=tf.Variable(pooler.bias))}


def write(output_dir: str, items: Mapping[str, Any],
          yaml_files: Mapping[str, Any], kept: Sequence[str] = ()) -> str:
  """Writes `items` as `ckpt-1`, `yaml_files` ({name: task.model values}) and
  the old `kept` entries into `output_dir`, swapped in whole; returns the
  prefix."""
  with writes.staged(output_dir, utils.GFILE_OPS, folder=True) as staging:
    # The state file records the prefix relatively: right after the rename.
    name = os.path.basename(tf.train.Checkpoint(**items).save(
        os.path.join(staging, CHECKPOINT_PREFIX)))
    for yaml_name, model_params in yaml_files.items():
      with tf.io.gfile.GFile(os.path.join(staging, yaml_name), "w") as f:
        f.write(yaml.safe_dump(dict(task=dict(model=model_params)),
                               sort_keys=False))
    for entry in kept:
      utils.link_or_copy(os.path.join(output_dir, entry),
                         os.path.join(staging, entry))
  return os.path.join(output_dir, name)


def is_converted_output(name: str) -> bool:
  """Whether directory entry `name` is one convert / `save_run` write."""
  return name in ("checkpoint", ENCODER_YAML, PRETRAINER_YAML) or (
      name.startswith(f"{CHECKPOINT_PREFIX}-1."))


def check_converted_output_dir(output_dir: str, overwrite: bool,
                               keep_others: bool = False) -> List[str]:
  """Checks that convert / `save_run` may write `output_dir`; returns its
  entries. A FileExistsError, naming what it found, refuses a file, a
  non-empty directory without `overwrite`, and even with it a train.py run
  directory (or a folder of them) or, unless `keep_others`, other entries.
  """
  try:
    utils.check_directory_path(output_dir, "output_dir",
                               "name a directory for the checkpoint; "
                               "nothing was replaced")
  except ValueError as e:
    raise FileExistsError(str(e)) from None
  if not tf.io.gfile.exists(output_dir):
    return []
  entries = sorted(entry.rstrip("/")
                   for entry in tf.io.gfile.listdir(output_dir))
  if entries and not overwrite:
    raise FileExistsError(
        f"output_dir {output_dir!r} is not empty ({entries[:5]}); pass "
        "--overwrite (overwrite=True) to replace the converted checkpoint "
        "there.")

  def holds_run(entry):
    path = os.path.join(output_dir, entry)
    return tf.io.gfile.isdir(path) and any(
        tf.io.gfile.exists(os.path.join(path, name))
        for name in ownership.RUN_FILES)

  def is_kept(entry):
    if is_converted_output(entry):
      return True
    if not keep_others or entry in ownership.RUN_FILES or holds_run(entry):
      return False
    return not entry.startswith(f"{CHECKPOINT_PREFIX}-")

  ownership.check_replaceable(
      output_dir, entries, is_kept, "converted checkpoint",
      "write to a new or empty directory (a converted checkpoint holds "
      "encoder.yaml, the 'checkpoint' state file and ckpt-1)")
  return entries
