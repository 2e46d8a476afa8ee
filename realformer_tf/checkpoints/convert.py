r"""Converts a TF1 RealFormer / Google BERT checkpoint for Model Garden tasks.

  python -m realformer_tf.checkpoints.convert --tf1_checkpoint=DIR/model.ckpt \
    --bert_config_file=DIR/bert_config.json --output_dir=DIR_TF2

Writes `ckpt-1` (encoder, the pooler `init_cls_pooler` needs) and
`encoder.yaml`; --with_pretraining_heads adds the MLM head, `pretrainer.yaml`.
"""

import os
from typing import Optional

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import yaml

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.checkpoints import converted_output
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.core import writes
from realformer_tf.layers import residual_attention as ra

ENCODER_YAML = run_directory.ENCODER_YAML
PRETRAINER_YAML = run_directory.PRETRAINER_YAML
CHECKPOINT_PREFIX = run_directory.CHECKPOINT_PREFIX

FLAGS = flags.FLAGS

flags.DEFINE_string("tf1_checkpoint", None,
                    "TF1 checkpoint prefix (e.g. .../model.ckpt-1000000) or "
                    "its directory.")
flags.DEFINE_string("bert_config_file", None,
                    "The checkpoint's bert_config.json.")
flags.DEFINE_string("output_dir", None, "Where to write the TF2 checkpoint "
                    "and YAML; must be empty unless --overwrite.")
flags.DEFINE_enum("residual_attention", None, list(ra.RESIDUAL_MODES),
                  "Default: 'mean' if bert_config has use_running_mean=true, "
                  "else 'sum'. 'none' loads a Google BERT checkpoint as BERT.")
flags.DEFINE_bool("with_pretraining_heads", False,
                  "Also convert the MLM and NSP heads (cls/...) into a "
                  "BertPretrainerV2, to continue pre-training.")
flags.DEFINE_bool("overwrite", False,
                  "Allow a non-empty output_dir; replaces this tool's outputs "
                  "there.")


is_converter_output = converted_output.is_converted_output

def convert_tf1_checkpoint(tf1_checkpoint_path: str,
                           bert_config_file: str,
                           output_dir: str,
                           residual_attention: Optional[str] = None,
                           with_pretraining_heads: bool = False,
                           overwrite: bool = False) -> str:
  """Converts a TF1 checkpoint (see the module docstring); returns its prefix.

  Everything is checked before anything is written; the new directory is
  swapped in whole (`core.writes.staged`). `residual_attention`: None (from
  `use_running_mean`), "sum", "mean" or "none". `overwrite`: replace this
  tool's earlier outputs in `output_dir`, keeping other files; a train.py
  run directory is refused.
  """
  output_dir = (output_dir or "").rstrip("/")
  if output_dir:
    writes.recover(output_dir, utils.GFILE_OPS)
  run_directory.resolve_checkpoint(tf1_checkpoint_path, "tf1_checkpoint")
  bert_config = tf1_checkpoint.read_bert_config(bert_config_file)
  if not output_dir:
    raise ValueError("output_dir is empty.")
  # Never over a train.py run (or a folder of runs); others' files are kept.
  entries = converted_output.check_converted_output_dir(output_dir, overwrite,
                                                     keep_others=True)

  if with_pretraining_heads:
    model_config = tf1_checkpoint.pretrainer_config_from_bert_config(
        bert_config, residual_attention)
    pretrainer = tf1_checkpoint.pretrainer_from_tf1_checkpoint(
        tf1_checkpoint_path, bert_config_file, residual_attention)
    items = dict(pretrainer.checkpoint_items, model=pretrainer)
  else:
    model_config = encoders.encoder_config(
        **tf1_checkpoint.encoder_config_from_bert_config(
            bert_config, residual_attention).as_dict())
    encoder = tf1_checkpoint.encoder_from_tf1_checkpoint(
        tf1_checkpoint_path, bert_config_file, residual_attention)
    # TF1 has one pooler; Model Garden checkpoints carry the NSP head's copy
    # (a Dense layer's checkpoint children are `kernel` and `bias`).
    pooler = encoder.pooler_layer
    pooler_copy = tf.train.Checkpoint(kernel=tf.Variable(pooler.kernel),
                                      bias=tf.Variable(pooler.bias))
    items = {"encoder": encoder,
             f"{tf1_checkpoint.NSP_HEAD_NAME}.pooler_dense": pooler_copy}

  encoder_params = getattr(model_config, "encoder", model_config).as_dict()
  yaml_files = {ENCODER_YAML: dict(encoder=encoder_params)}
  if with_pretraining_heads:
    yaml_files[PRETRAINER_YAML] = model_config.as_dict()
  # Written beside output_dir, then swapped in whole (`core.writes.staged`):
  # the previous outputs stay readable until the new ones are complete.
  with writes.staged(output_dir, utils.GFILE_OPS, folder=True) as staging:
    name = os.path.basename(tf.train.Checkpoint(**items).save(
        os.path.join(staging, CHECKPOINT_PREFIX)))
    for yaml_name, model_params in yaml_files.items():
      with tf.io.gfile.GFile(os.path.join(staging, yaml_name), "w") as f:
        f.write(yaml.safe_dump(dict(task=dict(model=model_params)),
                               sort_keys=False))
    for entry in entries:  # Others' files are kept; our earlier outputs not.
      if not is_converter_output(entry):
        utils.link_or_copy(os.path.join(output_dir, entry),
                           os.path.join(staging, entry))
  path = os.path.join(output_dir, name)
  logging.info(
      "Wrote %s (residual_attention=%s). Use --config_file=%s "
      "--params_override=task.init_checkpoint=%s", path,
      encoder_params["any"]["residual_attention"],
      os.path.join(output_dir, list(yaml_files)[-1]), path)
  return path


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Too many command-line arguments: {argv[1:]}.")
  convert_tf1_checkpoint(FLAGS.tf1_checkpoint, FLAGS.bert_config_file,
                         FLAGS.output_dir, FLAGS.residual_attention,
                         FLAGS.with_pretraining_heads, FLAGS.overwrite)


if __name__ == "__main__":
  flags.mark_flags_as_required(["tf1_checkpoint", "bert_config_file",
                                "output_dir"])
  cli.run(main)
