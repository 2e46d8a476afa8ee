"""Checks an experiment config against its inputs before anything is written.

Model Garden finds a bad input only once the pipeline or the model runs: a
glob matching nothing inside `InputReader`, an empty file or records of
another sequence length at the first step (after `params.yaml` and summaries
were written), a token id beyond the embedding table inside the graph (or, on
TPU, silently as zeros). Here each is an error naming the config key, the
value and the file.
"""

import dataclasses
import typing
from typing import Iterator, List, Optional, Sequence

import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import input_reader
from official.modeling import hyperparams
from official.nlp.data import pretrain_dataloader
from official.nlp.data import question_answering_dataloader as qa_dataloader
from official.nlp.data import sentence_prediction_dataloader as sp_dataloader
from realformer_tf.configs import registry
from realformer_tf.data import tokenization
from realformer_tf.data import translation as translation_data
from realformer_tf.training import modes
from realformer_tf.training import value_checks


def match_input_files(key: str, input_path) -> List[str]:
  """The files `input_reader.match_files` makes of `input_path` (each of a
  mixture config's paths), each an existing non-empty file; errors name `key`.
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


def _check_first_record(key: str, path: str, expected,
                        record_format: str) -> None:
  """The first record of `path` has each expected feature, of its length."""
  try:
    record = tf.data.TFRecordDataset(path).take(1).get_single_element()
  except tf.errors.OpError as e:  # Also a file without records.
    raise ValueError(
        f"{key}.input_path: {path!r} is not a readable TFRecord file "
        f"({type(e).__name__}: {e.message.splitlines()[0]}).") from None
  try:
    example = tf.train.Example.FromString(record.numpy())
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(
        f"{key}.input_path: the first record of {path!r} is not a "
        f"tf.train.Example ({e}).") from None
  lengths = {name: sum(len(value.value) for _, value in feature.ListFields())
             for name, feature in example.features.feature.items()}
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


def _check_token_ids(key: str, files: Sequence[str],
                     id_features: Sequence[str], vocab_size: int,
                     vocab_key: str, batch_size: int = 4096) -> None:
  """Every token id in every record of `files` is in [0, vocab_size).

  One pass (a few seconds per million sequences); it also names a truncated
  or corrupt file.
  """
  spec = {name: tf.io.VarLenFeature(tf.int64) for name in id_features}

  def out_of_range(records):
    parsed = tf.io.parse_example(records, spec)
    return {name: tf.boolean_mask(ids.values, (ids.values < 0) |
                                  (ids.values >= vocab_size))[:1]
            for name, ids in parsed.items()}

  for path in files:
    count = 0
    try:
      for batch in tf.data.TFRecordDataset(path).batch(batch_size).map(
          out_of_range):
        count += 1
        for name, bad in batch.items():
          if bad.shape[0]:
            raise ValueError(
                f"{vocab_key}={vocab_size}, but the records in {path!r} hold "
                f"token id {int(bad[0])} in feature {name!r}: made with "
                "another vocabulary (convert the data with the model's "
                "vocabulary, or use a model whose vocab_size covers it).")
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      raise ValueError(
          f"{key}.input_path: {path!r} cannot be read to the end (records "
          f"{count * batch_size}-{(count + 1) * batch_size - 1}: "
          f"{type(e).__name__}: {e.message.splitlines()[0]}): a truncated or "
          "corrupt file; write it again.") from None


def _check_lengths(key: str, data, encoder_key: Optional[str],
                   encoder) -> None:
  seq_length = getattr(data, "seq_length", None)
  if seq_length is None:
    return
  if seq_length < 1:
    raise ValueError(f"{key}.seq_length={seq_length} must be positive.")
  max_positions = getattr(encoder, "max_position_embeddings", None)
  if max_positions is not None and seq_length > max_positions:
    raise ValueError(
        f"{key}.seq_length={seq_length} exceeds "
        f"{encoder_key}.max_position_embeddings={max_positions}: shorten the "
        "sequences or enlarge the position table.")
  max_predictions = getattr(data, "max_predictions_per_seq", None)
  if max_predictions is not None and max_predictions > seq_length:
    raise ValueError(
        f"{key}.max_predictions_per_seq={max_predictions} exceeds "
        f"{key}.seq_length={seq_length}.")


def _type_errors(config: hyperparams.Config, prefix: str) -> Iterator[str]:
  for field in dataclasses.fields(config):
    value, key = getattr(config, field.name, None), prefix + field.name
    expected = field.type
    if typing.get_origin(expected) is typing.Union:  # Optional[int] etc.
      args = [a for a in typing.get_args(expected) if a is not type(None)]
      expected = args[0] if len(args) == 1 else None
    article = "an" if expected is int else "a"
    if isinstance(value, hyperparams.OneOfConfig):  # Its chosen branch only.
      key, value = f"{key}.{value.type}", value.get()
    if isinstance(value, hyperparams.Config):
      if expected in (int, float, bool, str):  # e.g. `train_steps.x=1`
        yield (f"{key} must be {article} {expected.__name__}, not the "
               f"mapping {value.as_dict()}")
      else:
        yield from _type_errors(value, key + ".")
    elif isinstance(value, (list, tuple)):
      for i, item in enumerate(value):
        if isinstance(item, hyperparams.Config):
          yield from _type_errors(item, f"{key}[{i}].")
    elif value is not None and expected in (int, float, bool) and (
        # A bool is an int to isinstance; an int is a fine float.
        isinstance(value, bool) != (expected is bool) or not isinstance(
            value, (int, float) if expected is float else expected)):
      yield (f"{key}={value!r} must be {article} {expected.__name__}, not "
             f"{type(value).__name__}")


def validate_field_types(params: cfg.ExperimentConfig) -> None:
  """Every int, float and bool field of `params` holds a value of that type.

  Model Garden's `Config.override` stores what YAML or `--params_override`
  gives unconverted (`official/modeling/hyperparams/base_config.py:225`):
  `train_steps=1.5` makes Orbit loop at step 1 forever, `train_steps=abc` a
  `TypeError` deep in the trainer. The error names every mistyped key.
  """
  errors = list(_type_errors(params, ""))
  if errors:
    raise ValueError("Config values of the wrong type: " + "; ".join(errors) +
                     ".")


def validate_model(params: cfg.ExperimentConfig) -> None:
  """Runs the encoder config's own `validate` now, not at build time (Model
  Garden's parse checks only `restrictions`); errors name its key."""
  encoder_key, encoder = registry.task_encoder(params)
  if encoder is None:
    return
  try:
    encoder.validate()
  except ValueError as e:
    raise ValueError(f"{encoder_key}: {e}") from None


def validate_config(params: cfg.ExperimentConfig, mode: str) -> None:
  """The checks that need no input file (`value_checks.check_values`, then
  lengths): run before the quickstart builds its data, so a bad value does
  not rebuild the cache."""
  value_checks.check_values(
      params, trains=mode in modes.TRAIN_MODES,
      evaluates=mode in modes.EVAL_MODES,
      data_keys=[key for key, _ in modes.data_configs(params, mode)])
  encoder_key, encoder = registry.task_encoder(params)
  for key, data in modes.data_configs(params, mode):
    _check_lengths(key, data, encoder_key, encoder)


def validate_experiment(params: cfg.ExperimentConfig, mode: str) -> None:
  """Checks the files `params` names for running `mode` (of `modes.MODES`),
  after `validate_config`; raises ValueError on the first problem."""
  encoder_key, encoder = registry.task_encoder(params)
  vocab_size = getattr(encoder, "vocab_size", None)
  vocab_key = f"{encoder_key}.vocab_size"
  vocab_files = [("task.vocab_file", getattr(params.task, "vocab_file", ""))]
  for key, data in modes.data_configs(params, mode):
    vocab_files.append((f"{key}.vocab_file", getattr(data, "vocab_file", "")))
    input_path = getattr(data, "input_path", None)
    if input_path == "dummy" or (
        not input_path and getattr(data, "tfds_name", "")):
      continue  # Faked by the masked-LM task, or TFDS input (Model Garden's).
    files = match_input_files(key, input_path)
    spec = _record_spec(data)
    if spec:
      expected, id_features, record_format = spec
      _check_first_record(key, files[0], expected, record_format)
      if vocab_size is not None:
        _check_token_ids(key, files, id_features, vocab_size, vocab_key)
  for key, path in vocab_files:
    try:
      if path:
        tokenization.load_vocab(path, vocab_size)
    except ValueError as e:
      raise ValueError(f"{key}={path!r} ({vocab_key}={vocab_size}): {e}"
                       ) from None
  if hasattr(params.task, "sentencepiece_model_path"):  # Translation.
    translation_data.check_sentencepiece_model(
        params.task.sentencepiece_model_path)


def validate_batch_sizes(params: cfg.ExperimentConfig, mode: str,
                         num_replicas: int) -> None:
  """Each global batch must split evenly over the replicas (positive:
  `validate_config`)."""
  for key, data in modes.data_configs(params, mode):
    batch = data.global_batch_size
    if batch % num_replicas:
      raise ValueError(
          f"{key}.global_batch_size={batch} is not divisible by the "
          f"{num_replicas} replicas of runtime.distribution_strategy="
          f"{params.runtime.distribution_strategy!r}.")


def validate_runtime(params: cfg.ExperimentConfig) -> None:
  """`runtime.num_gpus` GPUs are visible, before a strategy is built on them."""
  runtime = params.runtime
  if (not runtime.num_gpus or
      runtime.distribution_strategy not in ("mirrored", "one_device")):
    return  # Nothing to check: no device listing at start-up.
  gpus = len(tf.config.list_physical_devices("GPU"))
  if runtime.num_gpus > gpus:
    raise ValueError(f"runtime.num_gpus={runtime.num_gpus} but {gpus} GPU(s) "
                     "are visible to TensorFlow.")
