"""The data sets a run reads, their manifests and vocabularies, checked.

Model Garden finds a bad input only once the pipeline or the model runs: a
glob matching nothing inside `InputReader`, an empty file or records of
another sequence length at the first step (after `params.yaml` and summaries
were written), a token id beyond the embedding table inside the graph (or, on
TPU, silently as zeros). Here each is an error naming the config key, the
value and the file; so are records that are not the set their converter's
meta data lists (a killed conversion), and records or vocabularies of
another vocabulary than the run `task.init_checkpoint` names. What takes a
read of every record is read once (`data.record_facts`: from the records'
manifest, else one read kept in `cache_path`, e.g. `<model_dir>/
data_scan.json`). Writes only that cache.
"""

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import input_reader
from official.modeling import hyperparams
from official.nlp.data import pretrain_dataloader
from official.nlp.data import question_answering_dataloader as qa_dataloader
from official.nlp.data import sentence_prediction_dataloader as sp_dataloader
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import registry
from realformer_tf.data import output_sets
from realformer_tf.data import record_facts
from realformer_tf.data import shards
from realformer_tf.data import squad as squad_data
from realformer_tf.data import tokenization
from realformer_tf.data import translation as translation_data
from realformer_tf.training import modes


def match_input_files(key: str, input_path) -> List[str]:
  """The files `input_reader.match_files` makes of `input_path` (each of a
  mixture config's paths), each an existing non-empty file, shard sets
  (`-SSSSS-of-NNNNN` names) whole (`shards.check_whole`); errors name `key`.
  """
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


def _record_spec(data):
  """None, or what the first record of `data` must hold as Model Garden's
  `BertPretrainDataLoader`, `SentencePredictionDataLoader` and (training)
  `QuestionAnsweringDataLoader` parse it: ({feature: (config field giving its
  length, the length)}, token-id features, what the records are)."""
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


def _check_first_record(key: str, path: str, expected, record_format: str,
                        lengths: Optional[Dict[str, int]] = None) -> None:
  """The first record of `path` has each expected feature, of its length.
  `lengths`: its features' lengths, when known (`record_facts`): not read."""
  if lengths is None:
    try:
      lengths = record_facts.lengths_of(record_facts.first_example(path))
    except record_facts.UnreadableRecords as e:
      raise ValueError(
          f"{key}.input_path: {path!r} is not a readable TFRecord file "
          f"({e.reason})." if isinstance(e.error, tf.errors.OpError) else
          f"{key}.input_path: the first record of {path!r} is not a "
          f"tf.train.Example ({e.error}).") from None
  # Missing features first: records of another kind are named as such
  # rather than as records of another length.
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


def _record_facts(key: str, files: Sequence[str],
                  cache_path: Optional[str] = None
                 ) -> Dict[str, record_facts.RecordFacts]:
  """`record_facts.facts` of `files`; an unreadable one is a ValueError."""
  try:
    return record_facts.facts(files, meta_data_of, cache_path)
  except record_facts.UnreadableRecords as e:
    raise ValueError(
        f"{key}.input_path: {e.path!r} cannot be read to the end (records "
        f"{e.first}-{e.first + record_facts.BATCH - 1}: {e.reason}): a "
        "truncated or corrupt file; write it again.") from None


def _check_token_ids(key: str, files: Sequence[str],
                     id_features: Sequence[str], vocab_size: int,
                     vocab_key: str, *, cache_path: Optional[str] = None
                    ) -> None:
  """Every token id in every record of `files` is in [0, vocab_size), as
  their manifest records it, or one read of each file (`record_facts`;
  kept in `cache_path`), which also names a truncated or corrupt file.
  """
  for path, found in _record_facts(key, files, cache_path).items():
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


def check_records_manifest(params: cfg.ExperimentConfig, mode: str, *,
                           cache_path: Optional[str] = None) -> None:
  """Records `mode` reads must be those their converter's meta data lists
  (`output_sets.check_set`: a killed conversion leaves new records beside
  old meta data); else a ValueError names the data key, the file, what
  differs and the command to run again. Each set is checked once; records
  without meta data (not ours) are not checked; `cache_path`
  (`record_facts`) remembers copied files checked. Records of a smaller
  vocabulary than the encoder's `vocab_size` are allowed, with a warning
  (`tokenization.warn_padded_vocabulary`)."""
  checked = set()
  for key, data in modes.data_configs(params, mode):
    input_path = getattr(data, "input_path", "")
    if not input_path or input_path == "dummy":
      continue
    for path in match_input_files(key, input_path):
      meta_path, meta = meta_data_of(path) or (None, None)
      if meta_path is None or meta_path in checked:
        continue
      checked.add(meta_path)
      _, vocab_size = _vocab_key(params)
      tokens = meta.get("vocab_size")
      if (isinstance(tokens, int) and isinstance(vocab_size, int) and
          tokens < vocab_size):
        tokenization.warn_padded_vocabulary(
            f"{meta.get('vocab_file')} (the records' vocabulary, "
            f"{meta_path})", tokens, vocab_size)
      try:
        record_facts.check_set(meta_path, meta, cache_path)
      except ValueError as e:
        raise ValueError(f"{key}.input_path={input_path!r}: {e}") from None


def largest_token_id(path: str, id_features: Sequence[str], *,
                     cache_path: Optional[str] = None) -> Optional[int]:
  """The largest id in `id_features` of the records of `path`
  (`record_facts`); None if it holds none or cannot be read
  (`check_data_sets` names unreadable files)."""
  try:
    found = record_facts.facts([path], meta_data_of, cache_path)[path]
  except record_facts.UnreadableRecords:
    return None
  ids = [found.max[name] for name in id_features if name in found.max]
  return max(ids) if ids else None


def _check_unlisted_records(key: str, files: Sequence[str], data,
                            run_vocab: str, run_size: int,
                            init_checkpoint: str, *,
                            cache_path: Optional[str] = None) -> None:
  """Records no converter meta data lists (copied without it): their
  vocabulary cannot be compared with the run's. What can be checked is:
  the largest id of each file must be below the run's vocabulary size (its
  embedding rows), else a ValueError; otherwise a warning says the
  vocabulary could not be verified."""
  spec = _record_spec(data)
  if not files or not spec:
    return
  largest = {path: largest_token_id(path, spec[1], cache_path=cache_path)
             for path in files}
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


def check_records_vocabulary(params: cfg.ExperimentConfig, mode: str, *,
                             cache_path: Optional[str] = None) -> None:
  """Records `mode` reads that were converted with another vocabulary than
  the run `task.init_checkpoint` names are an error naming both and the fix.
  Records without meta data: `_check_unlisted_records`.
  """
  run = run_directory.find_run(getattr(params.task, "init_checkpoint", ""))
  run_vocab = run.vocab_file if run else ""
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
    unlisted = []
    for path in match_input_files(key, input_path):
      meta_path, meta = meta_data_of(path) or (None, {})
      if meta_path is None:
        unlisted.append(path)
      sha = meta.get("vocab_sha256")
      if sha and sha != run_sha:
        raise ValueError(
            f"{key}.input_path: {path!r} was converted with vocabulary "
            f"{_describe(meta.get('vocab_file'), meta.get('vocab_size'), sha)}"
            f" (see {meta_path}), but task.init_checkpoint="
            f"{params.task.init_checkpoint!r} was trained with "
            f"{_describe(run_vocab, run_size, run_sha)}: convert the data "
            f"again with --vocab_file={run_vocab}.")
    _check_unlisted_records(key, unlisted, data, run_vocab, run_size,
                            params.task.init_checkpoint,
                            cache_path=cache_path)


def _vocab_key(params: cfg.ExperimentConfig):
  encoder_key, encoder = registry.task_encoder(params)
  return f"{encoder_key}.vocab_size", getattr(encoder, "vocab_size", None)


def check_data_sets(params: cfg.ExperimentConfig, mode: str, *,
                    cache_path: Optional[str] = None) -> None:
  """Checks the records `params` names for running `mode` (of
  `modes.MODES`): files, first record, token ids within the vocabulary;
  from the records' manifest, else read once and kept in `cache_path`
  (`record_facts`)."""
  vocab_key, vocab_size = _vocab_key(params)
  for key, data in modes.data_configs(params, mode):
    input_path = getattr(data, "input_path", None)
    if input_path == "dummy" or (
        not input_path and getattr(data, "tfds_name", "")):
      continue  # Faked by the masked-LM task, or TFDS input (Model Garden's).
    files = match_input_files(key, input_path)
    spec = _record_spec(data)
    if spec:
      expected, id_features, record_format = spec
      known = record_facts.facts(files[:1], meta_data_of, cache_path,
                                 read=False).get(files[0])
      _check_first_record(key, files[0], expected, record_format,
                          known.lengths if known else None)
      if vocab_size is not None:
        _check_token_ids(key, files, id_features, vocab_size, vocab_key,
                         cache_path=cache_path)


def vocab_files(params: cfg.ExperimentConfig,
                mode: str) -> List[Tuple[str, str]]:
  """(config key, path) of each vocabulary `mode` uses that is set."""
  found = [("task.vocab_file", getattr(params.task, "vocab_file", ""))]
  found += [(f"{key}.vocab_file", getattr(data, "vocab_file", ""))
            for key, data in modes.data_configs(params, mode)]
  return [(key, path) for key, path in found if path]


def check_vocabularies(params: cfg.ExperimentConfig, mode: str, *,
                       cache_path: Optional[str] = None) -> None:
  """Each vocabulary `mode` uses is valid and fits the encoder; records are
  of the vocabulary of the run `task.init_checkpoint` names."""
  vocab_key, vocab_size = _vocab_key(params)
  for key, path in vocab_files(params, mode):
    try:
      tokenization.load_vocab(path, vocab_size)
    except ValueError as e:
      raise ValueError(f"{key}={path!r} ({vocab_key}={vocab_size}): {e}"
                       ) from None
  if hasattr(params.task, "sentencepiece_model_path"):  # Translation.
    translation_data.check_sentencepiece_model(
        params.task.sentencepiece_model_path)
  check_records_vocabulary(params, mode, cache_path=cache_path)
