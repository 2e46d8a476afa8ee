r"""Exports a trained RealFormer run (any head) as a SavedModel for serving.

  python -m realformer_tf.serving.export --model_dir=/runs/mrpc \
      --export_dir=/serving/mrpc/1 [--checkpoint_path=/runs/mrpc/ckpt-345] \
      [--vocab_file=vocab.txt] [--max_seq_length=128] \
      [--return_attention=none|scores|probs]

The model is rebuilt from `model_dir/params.yaml` through the registered
experiment named in `task.name` (`realformer_tf.configs.experiments.
load_experiment_config`; Model Garden's `export_savedmodel.py` rebuilds configs
from YAML alone and loses the `type: any` encoder builder), the task's own
`build_model()` makes the Keras model, and the latest checkpoint of
`model_dir` (or `--checkpoint_path`) is restored from the object graph Model
Garden's trainer writes (`model=`, `optimizer=`, `global_step=`, ...): every
model variable must be in it; optimizer slots and the rest are skipped.
Everything (config, checkpoint, vocabulary, lengths) is checked before
anything is written; the SavedModel is written next to `--export_dir` and
renamed into place.

Heads (from the task that was trained) and their signatures:

  realformer/pretraining, realformer/quickstart (MaskedLMTask):
    serving_default  ids + masked_lm_positions -> mlm_logits, next_sentence_logits
    serve_examples   serialized tf.Examples of the pre-training records
    serve_text       text with [MASK]s -> top-k tokens per [MASK] (+ logits)
    serve_text_pair  text_a, text_b -> the same, NSP on the pair
    preprocess_text  text -> the packed model inputs
  realformer/glue (SentencePredictionTask):
    serving_default  ids -> logits, probabilities, class_ids, labels
                     (STS-B: score)
    serve_examples   serialized tf.Examples of the GLUE records
    serve_text       text (single-sentence tasks) or text_a, text_b (pairs)
    preprocess_text  the same inputs -> the packed model inputs
  realformer/squad (QuestionAnsweringTask):
    serving_default  ids -> start_logits, end_logits
    serve_examples   serialized tf.Examples of the SQuAD records
    serve_text       question, context -> answer_text, token and byte offsets,
                     span_score (v2.0: null_score, null_score_diff, "" when
                     null_score - span_score > --null_score_diff_threshold)
    preprocess_text  question, context -> one row per doc-stride window

The text signatures use tensorflow-text ops and the run's vocabulary (a
SavedModel asset). `--noserve_text` exports only the id signatures, which
need no tensorflow-text ops.
"""

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import task_factory
from official.nlp.serving import export_savedmodel_util
from official.nlp.serving import serving_modules as mg_serving_modules
from official.nlp.tasks import masked_lm
from official.nlp.tasks import question_answering
from official.nlp.tasks import sentence_prediction
from realformer_tf.configs import experiments
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import glue as glue_data
from realformer_tf.data import squad as squad_data
from realformer_tf.data import tokenization
from realformer_tf.serving import serving_modules
from realformer_tf.serving import text_processing

PRETRAINING = "pretraining"
GLUE = "glue"
SQUAD = "squad"

# Model Garden function key -> signature key (the text functions of each
# module are exported under their own names).
_ID_FUNCTIONS = {"serve": "serving_default", "serve_examples": "serve_examples"}
# The vocabulary's file name inside `export_dir/assets/`.
VOCAB_ASSET_NAME = "vocab.txt"


@dataclasses.dataclass
class ExportResult:
  """What `export_model` wrote.

  Attributes:
    export_dir: The SavedModel directory.
    head: "pretraining", "glue" or "squad".
    experiment: `task.name` of the run.
    checkpoint: The restored checkpoint.
    signatures: Signature keys.
    vocab_file: The vocabulary the text signatures use (None without them).
    lower_case: Their lower-casing.
    max_seq_length: Length the text signatures pack to.
    custom_ops: Ops in the SavedModel that core TensorFlow does not define
      (tensorflow-text's); a server must have them registered.
  """
  export_dir: str
  head: str
  experiment: str
  checkpoint: str
  signatures: List[str]
  vocab_file: Optional[str]
  lower_case: Optional[bool]
  max_seq_length: int
  custom_ops: List[str]


def head_of(task_config: cfg.TaskConfig) -> str:
  """The head of a task config: `PRETRAINING`, `GLUE` or `SQUAD`."""
  if isinstance(task_config, masked_lm.MaskedLMConfig):
    return PRETRAINING
  if isinstance(task_config, sentence_prediction.SentencePredictionConfig):
    return GLUE
  if isinstance(task_config, question_answering.QuestionAnsweringConfig):
    return SQUAD
  raise ValueError(
      f"Cannot export task {task_config.name!r} ({type(task_config).__name__}"
      "): only masked-LM pre-training, GLUE sentence prediction and SQuAD "
      "question answering runs are supported.")


def resolve_checkpoint(model_dir: str,
                       checkpoint_path: Optional[str] = None) -> str:
  """The checkpoint to export: `checkpoint_path` (file or dir) or the latest."""
  source = checkpoint_path or model_dir
  if tf.io.gfile.isdir(source):
    path = tf.train.latest_checkpoint(source)
    if not path:
      raise ValueError(
          f"No checkpoint in {source!r} (no 'checkpoint' index file naming "
          "one): train first, or pass --checkpoint_path.")
    return path
  if not tf.io.gfile.exists(source + ".index"):
    raise ValueError(f"Checkpoint {source!r} not found (no {source}.index).")
  return source


def _glue_meta(task_config) -> Optional[Tuple[str, Dict[str, Any]]]:
  """The `<task>_meta_data.json` next to the run's GLUE records, if any."""
  spec = glue_data.get_task(task_config.glue_task)
  paths = []
  for data in (task_config.train_data, task_config.validation_data):
    if data is not None and data.input_path:
      paths += [p.strip() for p in str(data.input_path).split(",")
                if p.strip()]
  for path in paths:
    meta_path = glue_data.meta_data_path(os.path.dirname(path), spec.name)
    if tf.io.gfile.exists(meta_path):
      with tf.io.gfile.GFile(meta_path, "r") as f:
        return meta_path, json.load(f)
  return None


def resolve_vocab(config: cfg.ExperimentConfig, head: str,
                  vocab_file: Optional[str] = None,
                  lower_case: Optional[bool] = None
                  ) -> Tuple[str, bool, str]:
  """The run's vocabulary and lower-casing for the text signatures.

  Order: `vocab_file`; pre-training `task.vocab_file`; SQuAD
  `task.validation_data.vocab_file` (and `do_lower_case`); GLUE: the
  `<task>_meta_data.json` that `realformer_tf.data.glue` wrote next to the
  records (`vocab_file`, `lower_case`). `lower_case` overrides; default True.

  Returns:
    (vocabulary path, lower_case, where they came from).

  Raises:
    ValueError: If no vocabulary is given or recorded.
  """
  task = config.task
  recorded, recorded_lower, source = None, None, ""
  if head == PRETRAINING and getattr(task, "vocab_file", ""):
    recorded, source = task.vocab_file, "task.vocab_file"
  elif head == SQUAD and task.validation_data is not None:
    recorded_lower = task.validation_data.do_lower_case
    if task.validation_data.vocab_file:
      recorded, source = (task.validation_data.vocab_file,
                          "task.validation_data.vocab_file")
  elif head == GLUE and getattr(task, "glue_task", ""):
    found = _glue_meta(task)
    if found:
      meta_path, meta = found
      recorded, source = meta.get("vocab_file"), meta_path
      recorded_lower = meta.get("lower_case")
  if vocab_file:
    path, source = vocab_file, "--vocab_file"
  elif recorded:
    path = recorded
  else:
    raise ValueError(
        f"The {head} run records no vocabulary (looked for "
        + {PRETRAINING: "task.vocab_file",
           SQUAD: "task.validation_data.vocab_file",
           GLUE: "<task>_meta_data.json next to the task's input_path"}[head]
        + "): pass --vocab_file (the vocabulary the training data was "
        "tokenized with), or --noserve_text to export only the token-id "
        "signatures.")
  if lower_case is None:
    lower_case = True if recorded_lower is None else bool(recorded_lower)
  return path, lower_case, source


def default_max_seq_length(config: cfg.ExperimentConfig) -> int:
  """The training sequence length of the run."""
  task = config.task
  for data in (task.validation_data, task.train_data):
    if data is not None and getattr(data, "seq_length", None):
      return int(data.seq_length)
  raise ValueError("The run's config has no data seq_length; pass "
                   "--max_seq_length.")


def _dummy_inputs(head: str) -> Dict[str, tf.Tensor]:
  ids = tf.zeros([1, 2], tf.int32)
  inputs = dict(input_word_ids=ids, input_mask=tf.ones_like(ids),
                input_type_ids=ids)
  if head == PRETRAINING:
    inputs["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
  return inputs


def restore_checkpoint(model: tf.Module, checkpoint: str) -> None:
  """Restores `model` from a Model Garden trainer checkpoint.

  The trainer saves `tf.train.Checkpoint(global_step=..., model=model,
  optimizer=..., **model.checkpoint_items)`; only `model` is read. Every
  variable of the (built) model must be matched; the optimizer and the rest
  are expected to be left over.

  Raises:
    ValueError: If the checkpoint is unreadable or lacks model variables.
  """
  try:
    status = tf.train.Checkpoint(model=model).read(checkpoint)
    status.assert_existing_objects_matched()
  except (AssertionError, tf.errors.OpError, ValueError) as e:
    raise ValueError(
        f"Checkpoint {checkpoint!r} does not hold the variables of the model "
        "built from params.yaml (was it written by another run or "
        f"experiment?): {e}") from e
  status.expect_partial()


def list_custom_ops(export_dir: str) -> List[str]:
  """Ops of a SavedModel that core TensorFlow does not define."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  proto = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(os.path.join(export_dir, "saved_model.pb"),
                         "rb") as f:
    proto.ParseFromString(f.read())
  ops, functions = set(), set()
  for meta_graph in proto.meta_graphs:
    ops.update(node.op for node in meta_graph.graph_def.node)
    for function in meta_graph.graph_def.library.function:
      functions.add(function.signature.name)
      ops.update(node.op for node in function.node_def)
  core = set(dir(tf.raw_ops))
  return sorted(op for op in ops - functions if op not in core)


def _build_options(config: cfg.ExperimentConfig, head: str,
                   max_seq_length: int, return_attention: str, top_k: int,
                   null_score_diff_threshold: Optional[float]
                   ) -> serving_modules.ServingOptions:
  task = config.task
  encoder = task.model.encoder.get()
  options = serving_modules.ServingOptions(
      max_seq_length=max_seq_length,
      max_position_embeddings=int(encoder.max_position_embeddings),
      vocab_size=int(encoder.vocab_size),
      type_vocab_size=int(encoder.type_vocab_size),
      return_attention=return_attention)
  if head == PRETRAINING:
    if top_k < 1:
      raise ValueError(f"top_k={top_k} must be >= 1.")
    options.top_k = top_k
  elif head == GLUE:
    if not getattr(task, "glue_task", ""):
      raise ValueError("The run's config has no task.glue_task, so whether it "
                       "takes one text or a pair is unknown.")
    spec = glue_data.get_task(task.glue_task)
    if task.model.num_classes != spec.num_classes:
      raise ValueError(f"task.model.num_classes={task.model.num_classes}, but "
                       f"{spec.name} has {spec.num_classes}.")
    options.labels = spec.labels
    options.text_pair = spec.text_b is not None
  else:
    data = task.validation_data
    squad_data.validate_lengths(max_seq_length, data.doc_stride,
                                data.query_length)
    options.max_query_length = int(data.query_length)
    options.doc_stride = int(data.doc_stride)
    options.n_best_size = int(task.n_best_size)
    options.max_answer_length = int(task.max_answer_length)
    options.version_2_with_negative = bool(data.version_2_with_negative)
    options.null_score_diff_threshold = float(
        task.null_score_diff_threshold if null_score_diff_threshold is None
        else null_score_diff_threshold)
  options.validate()
  return options


def _build_module(head: str, model, options, packer):
  if head == PRETRAINING:
    head_names = [h.name for h in model.classification_heads]
    params = mg_serving_modules.MaskedLM.Params(
        cls_head_name=head_names[0] if head_names else "next_sentence",
        use_v2_feature_names=False)
    return serving_modules.MaskedLMServing(params, model, options, packer)
  if head == GLUE:
    params = mg_serving_modules.SentencePrediction.Params(
        inputs_only=False, use_v2_feature_names=False)
    return serving_modules.SentencePredictionServing(
        params, model, options, packer)
  params = mg_serving_modules.QuestionAnswering.Params(
      use_v2_feature_names=False)
  return serving_modules.QuestionAnsweringServing(
      params, model, options, packer)


def _check_export_dir(export_dir: str, overwrite: bool) -> None:
  if not export_dir:
    raise ValueError("No --export_dir given.")
  if tf.io.gfile.exists(export_dir):
    if not tf.io.gfile.isdir(export_dir):
      raise ValueError(f"--export_dir={export_dir!r} is a file.")
    if tf.io.gfile.listdir(export_dir) and not overwrite:
      raise ValueError(f"--export_dir={export_dir!r} exists and is not "
                       "empty; pass --overwrite to replace it.")


def export_model(model_dir: str,
                 export_dir: str,
                 checkpoint_path: Optional[str] = None,
                 vocab_file: Optional[str] = None,
                 lower_case: Optional[bool] = None,
                 max_seq_length: Optional[int] = None,
                 return_attention: str = "none",
                 null_score_diff_threshold: Optional[float] = None,
                 top_k: int = 5,
                 serve_text: bool = True,
                 overwrite: bool = False) -> ExportResult:
  """Builds, restores and exports the model of a training run.

  Args:
    model_dir: The run's model directory (params.yaml and checkpoints).
    export_dir: Where to write the SavedModel (must not exist, or be empty,
      unless `overwrite`).
    checkpoint_path: A checkpoint (prefix) or directory; default: the latest
      checkpoint of `model_dir`.
    vocab_file: Vocabulary for the text signatures; default: the one the run
      records (see `resolve_vocab`).
    lower_case: Lower-casing of the text signatures; default: recorded, else
      True.
    max_seq_length: Length the text signatures pack to; default: the run's
      data `seq_length`. At most `max_position_embeddings`.
    return_attention: "none", "scores" (each layer's pre-softmax residual
      scores) or "probs" (softmax probabilities), as extra outputs
      `[batch, layers, heads, seq, seq]`.
    null_score_diff_threshold: SQuAD v2.0; default: the run's
      `task.null_score_diff_threshold` (0.0 unless changed).
    top_k: Pre-training text signatures: predictions per [MASK].
    serve_text: Whether to add the text signatures.
    overwrite: Replace a non-empty `export_dir`.

  Returns:
    An `ExportResult`.

  Raises:
    FileNotFoundError: If `model_dir/params.yaml` is missing.
    ValueError: On a missing or mismatched checkpoint, vocabulary or length,
      before anything is written.
  """
  if return_attention not in serving_modules.ATTENTION_CHOICES:
    raise ValueError(f"return_attention={return_attention!r}; expected one of "
                     f"{serving_modules.ATTENTION_CHOICES}.")
  config = experiments.load_experiment_config(model_dir)
  head = head_of(config.task)
  checkpoint = resolve_checkpoint(model_dir, checkpoint_path)
  _check_export_dir(export_dir, overwrite)
  if max_seq_length is None:
    max_seq_length = default_max_seq_length(config)
  options = _build_options(config, head, int(max_seq_length), return_attention,
                           top_k, null_score_diff_threshold)
  vocab = None
  if serve_text:
    vocab_path, lower_case, vocab_source = resolve_vocab(
        config, head, vocab_file, lower_case)
    try:
      vocab = tokenization.load_vocab(vocab_path)
    except ValueError as e:
      raise ValueError(f"Vocabulary from {vocab_source}: {e}") from e
    if len(vocab) > options.vocab_size:
      raise ValueError(
          f"Vocabulary {vocab_path!r} ({vocab_source}) has {len(vocab)} "
          f"tokens, more than the model's vocab_size={options.vocab_size}: "
          "it is not the vocabulary this model was trained with.")
    if len(vocab) != options.vocab_size:
      logging.warning("Vocabulary %s has %d tokens; the model's vocab_size is "
                      "%d.", vocab_path, len(vocab), options.vocab_size)

  if return_attention != "none":
    config.task.model.encoder.get().return_attention_scores = True
  if head == SQUAD:
    # Model Garden's QA task rebuilds the eval features from the dev JSON as
    # soon as it is created (and needs somewhere to write them); exporting
    # needs only the model.
    config.task.validation_data.input_path = ""
  task = task_factory.get_task(config.task)
  model = task.build_model()
  model(_dummy_inputs(head), training=False)  # Creates every variable.
  restore_checkpoint(model, checkpoint)

  staging = tempfile.mkdtemp(prefix="realformer_export_")
  tmp_dir = export_dir.rstrip("/") + f".tmp-{os.getpid()}"
  try:
    packer = None
    if vocab is not None:
      # The validated tokens, one per line (no "\r"), become the asset.
      asset_path = os.path.join(staging, VOCAB_ASSET_NAME)
      tokenization.write_lines_atomically(asset_path, vocab)
      packer = text_processing.BertTextPacker(
          asset_path, lower_case=lower_case, max_seq_length=max_seq_length)
    module = _build_module(head, model, options, packer)
    function_keys = dict(_ID_FUNCTIONS)
    if packer is not None:
      function_keys.update({k: k for k in module.TEXT_FUNCTIONS})
    if tf.io.gfile.exists(tmp_dir):
      tf.io.gfile.rmtree(tmp_dir)
    # Restored above: no checkpoint_path here.
    export_savedmodel_util.export(
        module, function_keys=function_keys, export_savedmodel_dir=tmp_dir,
        checkpoint_path=None, timestamped=False)
  except BaseException:
    if tf.io.gfile.exists(tmp_dir):
      tf.io.gfile.rmtree(tmp_dir)
    raise
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  if tf.io.gfile.exists(export_dir):
    tf.io.gfile.rmtree(export_dir)
  tf.io.gfile.rename(tmp_dir, export_dir)
  result = ExportResult(
      export_dir=export_dir, head=head, experiment=config.task.name,
      checkpoint=checkpoint, signatures=sorted(function_keys.values()),
      vocab_file=os.path.join(export_dir, "assets", VOCAB_ASSET_NAME)
      if packer is not None else None,
      lower_case=lower_case if packer is not None else None,
      max_seq_length=int(max_seq_length),
      custom_ops=list_custom_ops(export_dir))
  logging.info("Exported %s (%s, %s) to %s: signatures %s; custom ops %s.",
               head, config.task.name, checkpoint, export_dir,
               result.signatures, result.custom_ops or "none")
  return result


def define_flags():
  """Flags of `python -m realformer_tf.serving.export`."""
  flags.DEFINE_string("model_dir", None,
                      "Model directory of the training run (params.yaml and "
                      "checkpoints).")
  flags.DEFINE_string("export_dir", None, "Where to write the SavedModel.")
  flags.DEFINE_string("checkpoint_path", None,
                      "Checkpoint (prefix or directory); default: the latest "
                      "in --model_dir.")
  flags.DEFINE_string("vocab_file", None,
                      "WordPiece vocabulary for the text signatures; default: "
                      "the one the run records.")
  flags.DEFINE_bool("lower_case", None,
                    "Lower-case text in the text signatures; default: as "
                    "recorded for the run's data, else true.")
  flags.DEFINE_integer("max_seq_length", None,
                       "Sequence length of the text signatures; default: "
                       "the run's data seq_length.")
  flags.DEFINE_enum("return_attention", "none",
                    list(serving_modules.ATTENTION_CHOICES),
                    "Also output each layer's attention: pre-softmax "
                    "residual scores or softmax probabilities.")
  flags.DEFINE_float("null_score_diff_threshold", None,
                     "SQuAD v2.0: answer '' when null score - best span score "
                     "exceeds this; default: the run's "
                     "task.null_score_diff_threshold (0.0).")
  flags.DEFINE_integer("top_k", 5,
                       "Pre-training text signatures: predictions per [MASK].")
  flags.DEFINE_bool("serve_text", True,
                    "Add the raw-text signatures (need tensorflow-text ops "
                    "in the server).")
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir.")
  flags.mark_flags_as_required(["model_dir", "export_dir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  result = export_model(
      model_dir=f.model_dir, export_dir=f.export_dir,
      checkpoint_path=f.checkpoint_path, vocab_file=f.vocab_file,
      lower_case=f.lower_case, max_seq_length=f.max_seq_length,
      return_attention=f.return_attention,
      null_score_diff_threshold=f.null_score_diff_threshold, top_k=f.top_k,
      serve_text=f.serve_text, overwrite=f.overwrite)
  print(json.dumps(dataclasses.asdict(result), indent=2))


if __name__ == "__main__":
  define_flags()
  app.run(main)
