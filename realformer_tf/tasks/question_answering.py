"""SQuAD v1.1 / v2.0 fine-tuning: Model Garden's `QuestionAnsweringTask` with
tensorflow-text features and the official scripts' metrics.

Evaluation features come from the training records' tokenizer, padded to
whole batches; predictions are scored on the official scripts' 0-100 scale
and key names (Model Garden rescales and renames them).
"""

import dataclasses
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

from absl import logging
import tensorflow as tf

from official.core import task_factory
from official.nlp.tasks import question_answering
from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from realformer_tf import utils
from realformer_tf.data import output_sets
from realformer_tf.data import squad as squad_data
from realformer_tf.data import squad_json

# The manifest beside the official scripts' files that proves them ours.
EVAL_MANIFEST = "squad_eval.json"
WRITER = "realformer_tf.tasks.question_answering"


def outputs(out_dir: str, v2: bool) -> Tuple[str, List[str]]:
  """(manifest, files) of the predictions set in `out_dir`."""
  names = (squad_data.PREDICTIONS_FILE, squad_data.NULL_ODDS_FILE)
  return os.path.join(out_dir, EVAL_MANIFEST), [
      os.path.join(out_dir, name) for name in names[:2 if v2 else 1]]


@dataclasses.dataclass
class RealFormerQAConfig(question_answering.QuestionAnsweringConfig):
  """`QuestionAnsweringConfig` plus where predictions are written."""
  # Directory for predictions.json / null_odds.json; "" = the model dir.
  predictions_dir: str = ""


def squad_metrics(dataset: List[Mapping[str, Any]],
                  predictions: Mapping[str, str],
                  null_odds: Optional[Mapping[str, float]] = None,
                  version_2_with_negative: bool = False) -> Dict[str, float]:
  """The official SQuAD metrics (0-100) of `predictions` ({id: text}, ""
  for no answer) against a SQuAD JSON's `data` list; `null_odds` (v2.0):
  {id: null score - best non-null score}.

  Returns:
    v1.1: `exact_match`, `f1`; v2.0: the keys and numbers `evaluate-v2.0.py`
    prints (`exact`, `f1`, `total`, `HasAns_*`, `NoAns_*`, with `null_odds`
    `best_*`; totals as ints).
  """
  if not version_2_with_negative:
    result = squad_evaluate_v1_1.evaluate(dataset, predictions)
    # Model Garden's copy returns fractions; the official script prints 100x.
    return {"exact_match": 100.0 * result["exact_match"],
            "f1": 100.0 * result["final_f1"]}
  result = squad_evaluate_v2_0.evaluate(dataset, predictions, null_odds)
  keys = [prefix + k for prefix in ("", "HasAns_", "NoAns_")
          for k in ("exact", "f1", "total")]
  if null_odds is not None:
    keys += ["final_exact", "final_exact_thresh", "final_f1", "final_f1_thresh"]
  # Model Garden names the official best_* results final_*.
  return {k.replace("final_", "best_"):
              int(result[k]) if k.endswith("total") else float(result[k])
          for k in keys if k in result}


@task_factory.register_task_cls(RealFormerQAConfig)
class RealFormerQATask(question_answering.QuestionAnsweringTask):
  """`QuestionAnsweringTask` with tensorflow-text eval features and metrics."""

  def __init__(self, params: RealFormerQAConfig, logging_dir=None, name=None):
    vd = params.validation_data
    if vd is not None and (vd.tokenization != "WordPiece" or vd.xlnet_format):
      raise ValueError(
          "realformer/squad reads tensorflow-text WordPiece features in BERT "
          "order: set validation_data.tokenization=WordPiece and "
          "xlnet_format=false.")
    max_positions = getattr(params.model.encoder.get(),
                            "max_position_embeddings", None)
    for field in ("train_data", "validation_data"):
      data = getattr(params, field)
      if data is not None and max_positions and data.seq_length > max_positions:
        raise ValueError(
            f"task.{field}.seq_length={data.seq_length} exceeds the encoder's "
            f"max_position_embeddings={max_positions}.")
    super().__init__(params, logging_dir=logging_dir, name=name)

  def _preprocess_eval_data(self, params):
    """Model Garden's contract: (record path, examples, unpadded features)."""
    out_dir = params.input_preprocessed_data_path or self.logging_dir
    if not out_dir:
      raise ValueError(
          "Set task.validation_data.input_preprocessed_data_path (or create "
          "the task with a logging_dir) to hold the eval TFRecord.")
    if not params.vocab_file:
      raise ValueError("task.validation_data.vocab_file is required: the "
                       "eval features are built from the raw SQuAD JSON.")
    self._eval_tokenizer = squad_data.SquadTokenizer(
        params.vocab_file, do_lower_case=params.do_lower_case)
    path = os.path.join(out_dir, squad_data.EVAL_RECORD)
    examples, features, _ = squad_data.write_features(
        params.input_path, self._eval_tokenizer, path, params.seq_length,
        params.doc_stride, params.query_length,
        params.version_2_with_negative, is_training=False,
        batch_size=params.global_batch_size)
    self._eval_dataset = squad_json.load_squad_json(params.input_path,
                                                   utils.GFILE_OPS)
    return path, examples, features

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None):
    """Writes predictions (+ null odds) and returns the official metrics."""
    config = self.task_config
    v2 = config.validation_data.version_2_with_negative
    predictions, _, null_odds = squad_data.postprocess_output(
        self._eval_examples, self._eval_features, aggregated_logs,
        self._eval_tokenizer, config.n_best_size, config.max_answer_length,
        v2, config.null_score_diff_threshold)
    out_dir = config.predictions_dir or self.logging_dir
    if not out_dir:
      raise ValueError("Set task.predictions_dir (or create the task with a "
                       "logging_dir) to write the SQuAD predictions.")
    metrics = squad_metrics(self._eval_dataset, predictions,
                            null_odds if v2 else None, v2)
    step = (None if global_step is None else
            int(tf.convert_to_tensor(global_step)))
    manifest, targets = outputs(out_dir, v2)
    with output_sets.output_set(manifest, WRITER, targets) as files:
      for path, values in zip(targets, (predictions, null_odds)):
        utils.GFILE_OPS.write(files.stage(path), json.dumps(
            values, indent=2, sort_keys=True) + "\n")
      files.commit({"step": step, "metrics": metrics})
    logging.info("SQuAD %s eval at step %s (%d questions, predictions in "
                 "%s): %s", "v2.0" if v2 else "v1.1", step, len(predictions),
                 out_dir, metrics)
    return metrics
