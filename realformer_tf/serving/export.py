r"""Exports a trained RealFormer run (any head) as a SavedModel for serving.

  python -m realformer_tf.serving.export --model_dir=/runs/mrpc \
      --export_dir=/serving/mrpc/1 [--checkpoint_path=/runs/mrpc/ckpt-345]

The config is the run's `params.yaml`; everything is checked before any
write, and the export is swapped into place whole.
"""

import dataclasses
import os
import tempfile
from typing import List, Optional, Tuple, Type

from absl import flags
from absl import logging
import tensorflow as tf
from tensorflow.python.tools import saved_model_utils

from official.core import config_definitions as cfg
from official.core import export_base
from official.core import task_factory
from official.nlp.serving import export_savedmodel_util
from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.serving import options as options_lib
from realformer_tf.serving import heads
from realformer_tf.training import plan_facts
from realformer_tf.training import plan_rules

HEADS = (heads.MaskedLMServing,
         heads.SentencePredictionServing,
         heads.QuestionAnsweringServing)
Head = Type[heads.MaskedLMServing]  # Any of `HEADS`.

# Model Garden function key -> signature key (text ones keep their names).
_ID_FUNCTIONS = {"serve": "serving_default", "serve_examples": "serve_examples"}
# The vocabulary's file name inside `export_dir/assets/`.
VOCAB_ASSET_NAME = "vocab.txt"


@dataclasses.dataclass
class ExportResult:
  """What `export_model` wrote: `head` ("pretraining", "glue" or "squad"),
  the text signatures' `vocab_file`, `lower_case` (None without them) and
  length, and `custom_ops` (tensorflow-text's) a server needs."""
  export_dir: str
  head: str
  experiment: str
  checkpoint: str
  signatures: List[str]
  vocab_file: Optional[str]
  lower_case: Optional[bool]
  max_seq_length: int
  custom_ops: List[str]


def head_of(task_config: cfg.TaskConfig) -> Head:
  """The serving class of a task config (one of `HEADS`)."""
  for head in HEADS:
    if isinstance(task_config, head.TASK_CONFIG):
      return head
  raise ValueError(
      f"Cannot export task {task_config.name!r} ({type(task_config).__name__}"
      "): only masked-LM pre-training, GLUE sentence prediction and SQuAD "
      "question answering runs are supported.")


def text_vocab(task: cfg.TaskConfig, head: Head, model_dir: str,
               vocab_size: int, reader: plan_facts.Reader,
               vocab_file: Optional[str] = None,
               lower_case: Optional[bool] = None
              ) -> Tuple[plan_facts.Vocab, bool]:
  """The text signatures' vocabulary and lower-casing: `vocab_file`, else
  what the run records (found under a moved `model_dir`); `lower_case`
  overrides (default: recorded, else True). A ValueError for a vocabulary
  missing, invalid or larger than `vocab_size`."""
  recorded, recorded_lower, source = head.recorded_vocab(task)
  if vocab_file:
    recorded, source = vocab_file, "--vocab_file"
  elif recorded and not tf.io.gfile.exists(recorded):
    found = run_directory.relocated_path(recorded, model_dir)
    if not found:
      raise ValueError(
          f"{source} records the vocabulary {recorded!r}, which does not "
          "exist (was the run directory moved?), and no file of that name is "
          f"under --model_dir={model_dir!r}: pass --vocab_file (the "
          "vocabulary the training data was tokenized with), or "
          "--noserve_text.")
    logging.warning("%s records the vocabulary %s, which does not exist; "
                    "using %s, at the same place in --model_dir (the run was "
                    "moved?). Pass --vocab_file to use another.", source,
                    recorded, found)
    recorded = found
  if not recorded:
    raise ValueError(
        f"The {head.HEAD} run records no vocabulary (looked for {source}): "
        "pass --vocab_file (the vocabulary the training data was tokenized "
        "with), or --noserve_text to export only the token-id signatures.")
  vocab = reader.vocab(source, recorded, "vocab_size", vocab_size)
  if vocab.problem:
    raise ValueError(vocab.problem)
  if lower_case is None:
    lower_case = True if recorded_lower is None else bool(recorded_lower)
  return vocab, lower_case


def run_to_export(model_dir: str, export_dir: str,
                  checkpoint_path: Optional[str], overwrite: bool,
                  reader: Optional[plan_facts.Reader] = None
                 ) -> Tuple[cfg.ExperimentConfig, str]:
  """A run's config and newest readable checkpoint, once `export_dir` is
  known to be usable."""
  if not tf.io.gfile.exists(run_directory.params_path(model_dir)):
    run_directory.load_experiment_config(model_dir)  # Names what is missing.
  config = (reader or plan_facts.Reader()).previous(model_dir)
  checkpoint = run_directory.resolve_checkpoint(
      checkpoint_path or model_dir,
      "--checkpoint_path" if checkpoint_path else "--model_dir")
  if not export_dir:
    raise ValueError("No --export_dir given.")
  utils.check_directory_path(export_dir, "--export_dir",
                             "name a directory for the SavedModel")
  writes.recover(export_dir, utils.GFILE_OPS)
  if tf.io.gfile.exists(export_dir):
    entries = tf.io.gfile.listdir(export_dir)
    if entries and not overwrite:
      raise ValueError(f"--export_dir={export_dir!r} exists and is not "
                       "empty; pass --overwrite to replace it.")
    # --overwrite replaces a SavedModel, never a mistyped run directory.
    try:
      ownership.check_replaceable(export_dir, entries,
                               ownership.is_saved_model_entry, "SavedModel",
                               "pass another --export_dir")
    except FileExistsError as e:
      raise ValueError(f"--export_dir: {e}") from None
  return config, checkpoint


def build_model(task_config: cfg.TaskConfig, checkpoint: str, dummy_inputs):
  """The task's Keras model, built on `dummy_inputs` and restored."""
  model = task_factory.get_task(task_config).build_model()
  model(dummy_inputs, training=False)  # Creates every variable.
  run_directory.restore_model(model, checkpoint)
  return model


def write_saved_model(module: export_base.ExportModule, function_keys,
                      export_dir: str) -> None:
  """Model Garden's export, staged and swapped into place whole."""
  with writes.staged(export_dir, utils.GFILE_OPS) as tmp_dir:
    # Restored already: no checkpoint_path here.
    export_savedmodel_util.export(
        module, function_keys=function_keys, export_savedmodel_dir=tmp_dir,
        checkpoint_path=None, timestamped=False)


def list_custom_ops(export_dir: str) -> List[str]:
  """Ops of a SavedModel that core TensorFlow does not define."""
  used = {op.name for graph in saved_model_utils.read_saved_model(
      export_dir).meta_graphs for op in graph.meta_info_def.stripped_op_list.op}
  return sorted(used - set(dir(tf.raw_ops)))


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
  """Builds, restores and exports the model of a training run (arguments:
  the flags of the same names), every input checked before a write."""
  reader = plan_facts.Reader()
  config, checkpoint = run_to_export(model_dir, export_dir, checkpoint_path,
                                     overwrite, reader)
  task = config.task
  head = head_of(task)
  encoder = task.model.encoder.get()
  if max_seq_length is None:  # The training length.
    max_seq_length = task.validation_data.seq_length
  # Each head's options take the flags of their own fields only.
  fields = {f.name for f in dataclasses.fields(head.OPTIONS)}
  head_flags = {k: v for k, v in dict(
      top_k=top_k, null_score_diff_threshold=null_score_diff_threshold).items()
                if k in fields}
  options = head.OPTIONS.from_task(
      task, dict(max_seq_length=int(max_seq_length),
                 max_position_embeddings=int(encoder.max_position_embeddings),
                 vocab_size=int(encoder.vocab_size),
                 type_vocab_size=int(encoder.type_vocab_size),
                 return_attention=return_attention), **head_flags)
  vocab = None
  if serve_text:
    used, lower_case = text_vocab(task, head, model_dir, options.vocab_size,
                                  reader, vocab_file, lower_case)
    vocab = used.tokens
    # Training's rule: one token per word-embedding row.
    problem = plan_rules.vocab_fit_problem(
        used, checkpoint,
        "--checkpoint_path" if checkpoint_path else "--model_dir",
        reader.embedding(checkpoint), reader.trained_vocab_sha256(config))
    if problem:
      raise ValueError(problem)

  if return_attention != "none":
    encoder.return_attention_scores = True
  # Else Model Garden's QA task rebuilds the eval features when created.
  task.validation_data.input_path = ""
  heads.progress(f"building the {head.HEAD} model and restoring {checkpoint}")
  model = build_model(task, checkpoint, utils.dummy_inputs(
      masked_positions=int("masked_lm_positions" in head.EXAMPLE_FIELDS)))

  function_keys = dict(_ID_FUNCTIONS)
  with tempfile.TemporaryDirectory(prefix="realformer_export_") as staging:
    asset_path = None
    if vocab:
      asset_path = os.path.join(staging, VOCAB_ASSET_NAME)
      writes.replace_lines(asset_path, vocab, utils.GFILE_OPS)
    module = head(model, options, asset_path, lower_case)
    if vocab:
      function_keys.update({k: k for k in module.TEXT_SIGNATURES})
    write_saved_model(module, function_keys, export_dir)
  return ExportResult(
      export_dir=export_dir, head=head.HEAD, experiment=task.name,
      checkpoint=checkpoint, signatures=sorted(function_keys.values()),
      vocab_file=os.path.join(export_dir, "assets", VOCAB_ASSET_NAME)
      if vocab else None,
      lower_case=lower_case if vocab else None,
      max_seq_length=options.max_seq_length,
      custom_ops=list_custom_ops(export_dir))


def define_run_flags():
  """Flags every exporter takes: the run, the checkpoint, the output."""
  flags.DEFINE_string("model_dir", None,
                      "Model directory of the training run (params.yaml and "
                      "checkpoints).")
  flags.DEFINE_string("export_dir", None, "Where to write the SavedModel.")
  flags.DEFINE_string("checkpoint_path", None,
                      "Checkpoint (prefix or directory); default: the latest "
                      "in --model_dir.")
  flags.DEFINE_bool("overwrite", False, "Replace a non-empty --export_dir.")
  flags.mark_flags_as_required(["model_dir", "export_dir"])


def define_flags():
  """Flags of `python -m realformer_tf.serving.export`."""
  define_run_flags()
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
                    list(options_lib.ATTENTION_CHOICES),
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


main = utils.flags_main(export_model, dataclasses.asdict)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
