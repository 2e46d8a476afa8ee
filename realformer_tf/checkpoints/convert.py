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

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.checkpoints import converted_output
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.core import writes
from realformer_tf.layers import residual_attention as ra

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


def convert_tf1_checkpoint(tf1_checkpoint_path: str,
                           bert_config_file: str,
                           output_dir: str,
                           residual_attention: Optional[str] = None,
                           with_pretraining_heads: bool = False,
                           overwrite: bool = False) -> str:
  """Converts a TF1 checkpoint, checked before any write; returns its prefix.

  `overwrite` replaces this tool's earlier outputs in `output_dir`, keeping
  other files; a train.py run directory is refused.
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
    items = converted_output.encoder_items(
        tf1_checkpoint.encoder_from_tf1_checkpoint(
            tf1_checkpoint_path, bert_config_file, residual_attention))

  encoder_params = getattr(model_config, "encoder", model_config).as_dict()
  yaml_files = {run_directory.ENCODER_YAML: dict(encoder=encoder_params)}
  if with_pretraining_heads:
    yaml_files[run_directory.PRETRAINER_YAML] = model_config.as_dict()
  # Others' files are kept; our earlier outputs not.
  path = converted_output.write(output_dir, items, yaml_files, [
      entry for entry in entries
      if not converted_output.is_converted_output(entry)])
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
