r"""Converts a TF1 RealFormer / Google BERT checkpoint for Model Garden tasks.

Writes to `--output_dir`:
  ckpt-1.{index,data-*}, checkpoint   TF2 object-based checkpoint with
      `encoder`                     the RealFormerEncoder: what fine-tuning
                                    tasks (SentencePrediction,
                                    QuestionAnswering, ...) restore from
                                    `task.init_checkpoint`;
      `next_sentence.pooler_dense`  TF1's pooler (`bert/pooler/dense`, the
                                    layer TF1's NSP head and `run_classifier`
                                    use), as in a Model Garden pre-training
                                    checkpoint: SentencePrediction with
                                    `init_cls_pooler=true` (realformer/glue's
                                    default) restores its classifier pooler
                                    from it, and requires it;
    with --with_pretraining_heads also
      `masked_lm`                   the MLM head (MaskedLMTask restores
                                    `BertPretrainerV2.checkpoint_items`:
                                    encoder, masked_lm,
                                    next_sentence.pooler_dense), and
      `model`                       the whole pretrainer, including the NSP
                                    logits layer, which no Model Garden task
                                    restores by itself (restore it with
                                    `tf.train.Checkpoint(model=pretrainer)`).
  encoder.yaml     `task.model.encoder` (type: any, RealFormer fields), for
                   `--config_file`.
  pretrainer.yaml  with --with_pretraining_heads: `task.model` of a
                   pre-training experiment (encoder, NSP head, MLM activation).

Example:

  python -m realformer_tf.checkpoints.convert \
    --tf1_checkpoint=/path/realformer_base/model.ckpt-1000000 \
    --bert_config_file=/path/realformer_base/bert_config.json \
    --output_dir=/path/realformer_base_tf2

  then fine-tune with `--config_file=/path/realformer_base_tf2/encoder.yaml
  --params_override=task.init_checkpoint=/path/realformer_base_tf2`.
"""

import os
from typing import Any, Dict, Optional

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf
import tf_keras
import yaml

from realformer_tf import utils
from realformer_tf.checkpoints import tf1_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.layers import residual_attention as ra

ENCODER_YAML = "encoder.yaml"
PRETRAINER_YAML = "pretrainer.yaml"
CHECKPOINT_PREFIX = "ckpt"

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


def _is_own_output(name: str) -> bool:
  return (name in ("checkpoint", ENCODER_YAML, PRETRAINER_YAML) or
          name.startswith(CHECKPOINT_PREFIX + "-"))


def _check_output_dir(output_dir: str, overwrite: bool) -> None:
  if not output_dir:
    raise ValueError("output_dir is empty.")
  if tf.io.gfile.exists(output_dir) and not tf.io.gfile.isdir(output_dir):
    raise ValueError(f"output_dir {output_dir!r} exists and is not a "
                     "directory.")
  if tf.io.gfile.isdir(output_dir):
    entries = sorted(tf.io.gfile.listdir(output_dir))
    if entries and not overwrite:
      raise FileExistsError(
          f"output_dir {output_dir!r} is not empty ({entries[:5]}"
          f"{' ...' if len(entries) > 5 else ''}); pass --overwrite to "
          "replace the converter's outputs there.")


def _write_yaml(path: str, params: Dict[str, Any]) -> None:
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(yaml.safe_dump(params, default_flow_style=False, sort_keys=False))


def convert_tf1_checkpoint(tf1_checkpoint_path: str,
                           bert_config_file: str,
                           output_dir: str,
                           residual_attention: Optional[str] = None,
                           with_pretraining_heads: bool = False,
                           overwrite: bool = False) -> str:
  """Converts a TF1 checkpoint; see the module docstring.

  Every input is checked, and the whole checkpoint loaded and matched, before
  anything is written.

  Args:
    tf1_checkpoint_path: TF1 checkpoint prefix or directory.
    bert_config_file: Its bert_config.json.
    output_dir: Output directory (created if needed).
    residual_attention: None (from `use_running_mean`), "sum", "mean" or
      "none".
    with_pretraining_heads: Also convert the MLM and NSP heads.
    overwrite: Allow a non-empty `output_dir`; this tool's earlier outputs
      there are deleted first, other files are kept.

  Returns:
    The prefix of the written TF2 checkpoint.
  """
  if residual_attention is not None:
    ra.validate_residual_attention(residual_attention)
  utils.resolve_checkpoint(tf1_checkpoint_path, "tf1_checkpoint")
  bert_config = tf1_checkpoint.read_bert_config(bert_config_file)
  _check_output_dir(output_dir, overwrite)

  if with_pretraining_heads:
    pretrainer_config = tf1_checkpoint.pretrainer_config_from_bert_config(
        bert_config, residual_attention)
    pretrainer = tf1_checkpoint.pretrainer_from_tf1_checkpoint(
        tf1_checkpoint_path, bert_config_file, residual_attention)
    items = dict(pretrainer.checkpoint_items, model=pretrainer)
    encoder_config = pretrainer_config.encoder
  else:
    encoder = tf1_checkpoint.encoder_from_tf1_checkpoint(
        tf1_checkpoint_path, bert_config_file, residual_attention)
    # TF1 has one pooler; Model Garden checkpoints carry the NSP head's copy.
    pooler = tf_keras.layers.Dense(
        encoder.get_config()["hidden_size"], activation="tanh",
        name="pooler_dense")
    pooler.build([None, encoder.get_config()["hidden_size"]])
    pooler.set_weights(encoder.pooler_layer.get_weights())
    items = {"encoder": encoder,
             f"{tf1_checkpoint.NSP_HEAD_NAME}.pooler_dense": pooler}
    encoder_config = encoders.encoder_config(
        **tf1_checkpoint.encoder_config_from_bert_config(
            bert_config, residual_attention).as_dict())

  if tf.io.gfile.isdir(output_dir):
    for name in tf.io.gfile.listdir(output_dir):
      if _is_own_output(name):
        tf.io.gfile.remove(os.path.join(output_dir, name))
  tf.io.gfile.makedirs(output_dir)
  path = tf.train.Checkpoint(**items).save(
      os.path.join(output_dir, CHECKPOINT_PREFIX))

  encoder_params = dict(type="any", any=encoder_config.any.as_dict())
  _write_yaml(os.path.join(output_dir, ENCODER_YAML),
              dict(task=dict(model=dict(encoder=encoder_params))))
  if with_pretraining_heads:
    _write_yaml(os.path.join(output_dir, PRETRAINER_YAML), dict(task=dict(
        model=dict(
            encoder=encoder_params,
            cls_heads=[c.as_dict() for c in pretrainer_config.cls_heads],
            mlm_activation=pretrainer_config.mlm_activation,
            mlm_initializer_range=pretrainer_config.mlm_initializer_range))))
  logging.info(
      "Wrote %s (residual_attention=%s). Use --config_file=%s "
      "--params_override=task.init_checkpoint=%s", path,
      encoder_params["any"]["residual_attention"],
      os.path.join(output_dir,
                   PRETRAINER_YAML if with_pretraining_heads else ENCODER_YAML),
      path)
  return path


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Too many command-line arguments: {argv[1:]}.")
  convert_tf1_checkpoint(
      tf1_checkpoint_path=FLAGS.tf1_checkpoint,
      bert_config_file=FLAGS.bert_config_file,
      output_dir=FLAGS.output_dir,
      residual_attention=FLAGS.residual_attention,
      with_pretraining_heads=FLAGS.with_pretraining_heads,
      overwrite=FLAGS.overwrite)


if __name__ == "__main__":
  flags.mark_flags_as_required(["tf1_checkpoint", "bert_config_file",
                                "output_dir"])
  app.run(main)
