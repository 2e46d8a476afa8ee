"""The data-set checks of a run plan's facts (`plan_facts.Reader`).

Model Garden finds a bad input only once the pipeline runs; here each is an
error naming the config key, the value and the file, before any write.
"""

from typing import Dict, List, Optional, Sequence

from absl import logging
import tensorflow as tf

from official.core import input_reader
from official.modeling import hyperparams
from official.nlp.data import pretrain_dataloader
from official.nlp.data import question_answering_dataloader as qa_dataloader
from official.nlp.data import sentence_prediction_dataloader as sp_dataloader
from realformer_tf.data import record_facts
from realformer_tf.data import shards


def match_input_files(key: str, input_path) -> List[str]:
  """The files `input_reader.match_files` makes of `input_path`, each an
  existing non-empty file, shard sets whole; errors name `key`."""
  paths = (list(input_path.as_dict().values())
           if isinstance(input_path, hyperparams.Config) else [input_path])
  if not any(str(p).replace(",", "").strip() for p in paths):
    raise ValueError(
        f"{key}.input_path is empty: set it to the input files (a path, glob "
        f"or comma-separated list), e.g. --params_override="
        f"{key}.input_path=/data/train-*.tfrecord")
  try:
    files = input_reader.match_files(paths)
  except ValueError as e:
    raise ValueError(f"{key}.input_path matches no file: {e}") from None
  for path in files:
    problem = (
        "does not exist" if not tf.io.gfile.exists(path) else
        f"is a directory; name the files (e.g. {path.rstrip('/')}/*.tfrecord)"
        if tf.io.gfile.isdir(path) else
        "is an empty file" if not tf.io.gfile.stat(path).length else None)
    if problem:
      raise ValueError(f"{key}.input_path: {path!r} {problem}.")
  shards.check_whole(files, f"{key}.input_path")
  return files


def record_spec(data):
  """None, or what the first record of `data` must hold for Model Garden's
  loaders: ({feature: (config field, length)}, token-id features, what the
  records are)."""
  if getattr(data, "file_type", "tfrecord") != "tfrecord":
    return None
  seq = ("seq_length", getattr(data, "seq_length", None))
  if isinstance(data, pretrain_dataloader.BertPretrainDataConfig):
    ids = "input_word_ids" if data.use_v2_feature_names else "input_ids"
    predictions = ("max_predictions_per_seq", data.max_predictions_per_seq)
    expected = {ids: seq, "input_mask": seq, "masked_lm_positions": predictions,
                "masked_lm_ids": predictions,
                "masked_lm_weights": predictions}
    if data.use_next_sentence_label:
      expected["next_sentence_labels"] = ("use_next_sentence_label", 1)
    return (expected, [ids, "masked_lm_ids"], "BERT pre-training records "
            "(python -m realformer_tf.data.create_pretraining_data)")
  expected = {"input_ids": seq, "input_mask": seq, "segment_ids": seq}
  if isinstance(data, sp_dataloader.SentencePredictionDataConfig):
    expected[data.label_field] = ("label_field", 1)
    what = "GLUE sentence-pair records (python -m realformer_tf.data.glue)"
  elif isinstance(data, qa_dataloader.QADataConfig) and data.is_training:
    expected["start_positions"] = ("is_training", 1)
    expected["end_positions"] = ("is_training", 1)
    what = "SQuAD training records (python -m realformer_tf.data.squad)"
  else:
    return None
  return expected, ["input_ids"], what


def check_first_record(key: str, path: str, expected, record_format: str,
                       lengths: Optional[Dict[str, int]] = None) -> None:
  """The first record of `path` (unread if `lengths` are known) has each
  expected feature, of its length."""
  if lengths is None:
    try:
      lengths = record_facts.lengths_of(record_facts.first_example(path))
    except record_facts.UnreadableRecords as e:
      raise ValueError(
          f"{key}.input_path: {path!r} is not a readable TFRecord file "
          f"({e.reason})." if isinstance(e.error, tf.errors.OpError) else
          f"{key}.input_path: the first record of {path!r} is not a "
          f"tf.train.Example ({e.error}).") from None
  # Missing features first: records of another kind are named as such.
  for feature in expected:
    if feature not in lengths:
      hint = (f" (records made without NSP? set {key}.use_next_sentence_label"
              "=false)" if feature == "next_sentence_labels" else "")
      raise ValueError(
          f"{key}.input_path: records in {path!r} have no {feature!r} "
          f"feature{hint}; found {sorted(lengths)}. Expected {record_format}.")
  for feature, (field, value) in expected.items():
    if lengths[feature] != value:
      raise ValueError(
          f"{key}.{field}={value}, but the records in {path!r} have "
          f"{feature!r} of length {lengths[feature]}: make the data and the "
          "config agree.")


def check_token_ids(key: str, files: Sequence[str],
                    id_features: Sequence[str], vocab_size: int,
                    vocab_key: str, *, manifest_of,
                    cache_path: Optional[str] = None) -> None:
  """Every token id in `files` is in [0, vocab_size), by their manifest or
  one read of each file (kept in `cache_path`)."""
  try:
    found_facts = record_facts.facts(files, manifest_of, cache_path)
  except record_facts.UnreadableRecords as e:
    raise ValueError(
        f"{key}.input_path: {e.path!r} cannot be read to the end (records "
        f"{e.first}-{e.first + record_facts.BATCH - 1}: {e.reason}): a "
        "truncated or corrupt file; write it again.") from None
  for path, found in found_facts.items():
    for name in id_features:
      if name not in found.max:
        continue
      bad = (found.max[name] if found.max[name] >= vocab_size else
             found.min[name] if found.min[name] < 0 else None)
      if bad is not None:
        raise ValueError(
            f"{vocab_key}={vocab_size}, but the records in {path!r} hold "
            f"token id {bad} in feature {name!r}: made with "
            "another vocabulary (convert the data with the model's "
            "vocabulary, or use a model whose vocab_size covers it).")


def check_unlisted_records(key: str, files: Sequence[str], data,
                           run_vocab: str, run_size: int,
                           init_checkpoint: str, *, manifest_of,
                           cache_path: Optional[str] = None) -> None:
  """Records no meta data lists: a ValueError if an id is past the run's
  vocabulary, else a warning that their vocabulary is unverified."""
  spec = record_spec(data)
  if not files or not spec:
    return
  largest = {}
  for path in files:  # An unreadable file: named by `check_token_ids`.
    try:
      found = record_facts.facts([path], manifest_of, cache_path)[path]
    except record_facts.UnreadableRecords:
      found = None
    ids = [found.max[name] for name in spec[1] if found and name in found.max]
    largest[path] = max(ids) if ids else None
  for path, found in largest.items():
    if found is not None and found >= run_size:
      raise ValueError(
          f"{key}.input_path: {path!r} holds token id {found} (the largest "
          f"in its records), but task.init_checkpoint="
          f"{init_checkpoint!r} was trained with {run_vocab} ({run_size} "
          "tokens, one embedding row each): the records were made with "
          "another vocabulary. Convert them again with "
          f"--vocab_file={run_vocab}.")
  read = [found for found in largest.values() if found is not None]
  logging.warning(
      "%s.input_path: %s %s no converter meta data (no *meta_data.json "
      "beside them lists them), so their vocabulary could not be verified "
      "against %s (%d tokens), the vocabulary of task.init_checkpoint=%s. "
      "Their largest token id is %s, which "
      "fits the embedding table; records of another vocabulary would still "
      "train silently on wrong tokens. Convert them with --vocab_file=%s "
      "(python -m realformer_tf.data.glue, ...) to have this checked.", key,
      ", ".join(files), "has" if len(files) == 1 else "have", run_vocab,
      run_size, init_checkpoint, max(read) if read else "unknown", run_vocab)
