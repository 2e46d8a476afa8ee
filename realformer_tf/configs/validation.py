"""Checks an experiment config against its inputs before training starts.

Model Garden finds most bad inputs only once the input pipeline or the model
runs: an input glob that matches nothing fails inside `InputReader`, an empty
file or records of the wrong sequence length fail at the first step (after
`params.yaml` and summaries were written), and a token id or sequence length
beyond the embedding tables fails inside the graph (or, on TPU, silently
reads zeros). `validate_experiment` finds them first, with an error naming
the config key, the value and the file.

It checks, for the data configs the mode reads (`task.train_data` for train
modes, `task.validation_data` for eval modes):
  * `input_path`: each comma-separated pattern matches files, none of them
    empty or a directory (`dummy` and TFDS inputs are left alone);
  * BERT pre-training records (`BertPretrainDataConfig`): the first record of
    the first file parses, with `seq_length` tokens, `max_predictions_per_seq`
    predictions, an NSP label if `use_next_sentence_label`, and token ids
    below the encoder's `vocab_size`;
  * `seq_length` <= the encoder's `max_position_embeddings`, and
    `max_predictions_per_seq` <= `seq_length`;
and also any `vocab_file` in the task or its data configs (a valid WordPiece
vocabulary, no larger than the encoder's `vocab_size`), the train schedule
(`train_steps` > 0, `summary_interval` a multiple of `steps_per_loop`, a
polynomial decay with `decay_steps`), and, once the
strategy exists, that each global batch splits evenly over the replicas.
"""

from typing import Iterator, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from official.core import config_definitions as cfg
from official.nlp.data import pretrain_dataloader

# Modes run by train.py, the same names Model Garden's train_lib accepts.
TRAIN_MODES = ("train", "train_and_eval", "train_and_post_eval")
EVAL_MODES = ("eval", "train_and_eval", "continuous_eval",
              "train_and_post_eval")
MODES = ("train", "eval", "train_and_eval", "continuous_eval",
         "train_and_post_eval")

# Masked-LM `input_path` value that makes Model Garden's task fake its data.
_DUMMY_INPUT = "dummy"


def _data_configs(params: cfg.ExperimentConfig,
                  mode: str) -> List[Tuple[str, cfg.DataConfig]]:
  """The (key, DataConfig) pairs `mode` reads."""
  configs = []
  if mode in TRAIN_MODES:
    configs.append(("task.train_data", params.task.train_data))
  if mode in EVAL_MODES:
    configs.append(("task.validation_data", params.task.validation_data))
  return configs


def _encoder(params: cfg.ExperimentConfig):
  """(key, encoder config) of the task's encoder, or (None, None)."""
  model = getattr(params.task, "model", None)
  encoder = getattr(model, "encoder", None)
  if encoder is None:
    return None, None
  if hasattr(encoder, "get") and getattr(encoder, "type", None):
    return f"task.model.encoder.{encoder.type}", encoder.get()
  return "task.model.encoder", encoder


def _patterns(input_path) -> Iterator[str]:
  """The file patterns of a Model Garden `input_path` (str, list or mixture)."""
  if isinstance(input_path, str):
    values = [input_path]
  elif isinstance(input_path, (list, tuple)):
    values = list(input_path)
  elif hasattr(input_path, "as_dict"):  # A dataset mixture: name -> path.
    values = []
    for value in input_path.as_dict().values():
      values.extend(value if isinstance(value, (list, tuple)) else [value])
  else:
    values = [str(input_path)]
  for value in values:
    for pattern in str(value).split(","):
      if pattern.strip():
        yield pattern.strip()


def match_input_files(key: str, input_path) -> List[str]:
  """Expands an `input_path`; every pattern must match non-empty files.

  Args:
    key: The config key, for error messages (e.g. "task.train_data").
    input_path: A file, glob, comma-separated list of those, or a list.

  Returns:
    The matched files, in pattern order.

  Raises:
    ValueError: If `input_path` is empty, a pattern matches nothing, or a
      matched path is a directory or an empty file.
  """
  patterns = list(_patterns(input_path))
  if not patterns:
    raise ValueError(
        f"{key}.input_path is empty: set it to the input files (a path, glob "
        f"or comma-separated list), e.g. --params_override="
        f"{key}.input_path=/data/train-*.tfrecord")
  files = []
  for pattern in patterns:
    matched = sorted(tf.io.gfile.glob(pattern))
    if not matched:
      what = ("matches no file" if any(c in pattern for c in "*?[")
              else "does not exist")
      raise ValueError(f"{key}.input_path: {pattern!r} {what}.")
    for path in matched:
      if tf.io.gfile.isdir(path):
        raise ValueError(
            f"{key}.input_path: {path!r} is a directory; name the files "
            f"(e.g. {path.rstrip('/')}/*.tfrecord).")
      if tf.io.gfile.stat(path).length == 0:
        raise ValueError(f"{key}.input_path: {path!r} is an empty file.")
    files.extend(matched)
  return files


def _feature_lengths(example: tf.train.Example) -> dict:
  lengths = {}
  for name, feature in example.features.feature.items():
    kind = feature.WhichOneof("kind")
    lengths[name] = len(getattr(feature, kind).value) if kind else 0
  return lengths


def check_pretraining_records(key: str,
                              data: pretrain_dataloader.BertPretrainDataConfig,
                              path: str,
                              vocab_size: Optional[int] = None,
                              vocab_key: str = "vocab_size") -> None:
  """Parses the first record of `path` as the data config expects.

  Args:
    key: Config key of `data`, for error messages.
    data: The BERT pre-training data config that will read `path`.
    path: A TFRecord file of `tf.train.Example`s.
    vocab_size: If set, token ids must be below it.
    vocab_key: Config key of `vocab_size`, for error messages.

  Raises:
    ValueError: If the file is not readable TFRecords of tf.Examples or the
      first record's features do not match `data`.
  """
  try:
    record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
  except (tf.errors.DataLossError, tf.errors.OpError) as e:
    raise ValueError(
        f"{key}.input_path: {path!r} is not a readable TFRecord file "
        f"({type(e).__name__}: {e.message.splitlines()[0]}).") from None
  if record is None:
    raise ValueError(f"{key}.input_path: {path!r} holds no records.")
  try:
    example = tf.train.Example.FromString(record.numpy())
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(
        f"{key}.input_path: the first record of {path!r} is not a "
        f"tf.train.Example ({e}).") from None
  lengths = _feature_lengths(example)
  ids_name = "input_word_ids" if data.use_v2_feature_names else "input_ids"
  expected = {
      ids_name: ("seq_length", data.seq_length),
      "input_mask": ("seq_length", data.seq_length),
      "masked_lm_positions": ("max_predictions_per_seq",
                              data.max_predictions_per_seq),
      "masked_lm_ids": ("max_predictions_per_seq",
                        data.max_predictions_per_seq),
      "masked_lm_weights": ("max_predictions_per_seq",
                            data.max_predictions_per_seq),
  }
  if data.use_next_sentence_label:
    expected["next_sentence_labels"] = ("use_next_sentence_label", 1)
  for feature, (field, value) in expected.items():
    if feature not in lengths:
      hint = (" (records made without NSP? set "
              f"{key}.use_next_sentence_label=false)"
              if feature == "next_sentence_labels" else "")
      raise ValueError(
          f"{key}.input_path: records in {path!r} have no {feature!r} "
          f"feature{hint}; found {sorted(lengths)}.")
    if lengths[feature] != value:
      raise ValueError(
          f"{key}.{field}={value}, but the records in {path!r} have "
          f"{feature!r} of length {lengths[feature]}: make the data and the "
          "config agree.")
  if vocab_size is not None:
    ids = list(example.features.feature[ids_name].int64_list.value)
    ids += list(example.features.feature["masked_lm_ids"].int64_list.value)
    if ids and (max(ids) >= vocab_size or min(ids) < 0):
      bad = max(ids) if max(ids) >= vocab_size else min(ids)
      raise ValueError(
          f"{vocab_key}={vocab_size}, but the records in {path!r} hold token "
          f"id {bad}: they were made with another vocabulary.")


def check_vocab_file(key: str, path: str, vocab_size: Optional[int],
                     vocab_key: str) -> int:
  """Checks a vocabulary file; returns its size.

  Raises:
    ValueError: If `path` is not a WordPiece vocabulary (message names it),
      or it has more tokens than `vocab_size`.
  """
  # Imported here: tensorflow-text is only needed when a vocabulary is set.
  from realformer_tf.data import tokenization  # pylint: disable=g-import-not-at-top
  try:
    tokens = tokenization.load_vocab(path)
  except ValueError as e:
    raise ValueError(f"{key}={path!r}: {e}") from None
  if vocab_size is not None and len(tokens) > vocab_size:
    raise ValueError(
        f"{key}={path!r} has {len(tokens)} tokens but {vocab_key}="
        f"{vocab_size}: token ids would overflow the embedding table.")
  if vocab_size is not None and len(tokens) < vocab_size:
    logging.warning("%s=%s has %d tokens, fewer than %s=%d (rows left unused).",
                    key, path, len(tokens), vocab_key, vocab_size)
  return len(tokens)


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


def _check_schedule(params: cfg.ExperimentConfig) -> None:
  trainer = params.trainer
  if trainer.train_steps <= 0:
    raise ValueError(
        f"trainer.train_steps={trainer.train_steps} must be positive "
        "to train.")
  if trainer.steps_per_loop <= 0:
    raise ValueError(
        f"trainer.steps_per_loop={trainer.steps_per_loop} must be positive.")
  # Orbit's controller checks this too, but only after params.yaml is written.
  if trainer.summary_interval and (
      trainer.summary_interval % trainer.steps_per_loop):
    raise ValueError(
        f"trainer.summary_interval={trainer.summary_interval} must be a "
        f"multiple of trainer.steps_per_loop={trainer.steps_per_loop}.")
  lr = params.trainer.optimizer_config.learning_rate
  if lr.type == "polynomial" and lr.polynomial.decay_steps is None:
    raise ValueError(
        "trainer.optimizer_config.learning_rate.polynomial.decay_steps is not "
        f"set (usually = trainer.train_steps={params.trainer.train_steps}).")
  if (lr.type == "polynomial" and
      lr.polynomial.decay_steps != params.trainer.train_steps):
    logging.warning(
        "The learning rate decays over %d steps but trainer.train_steps=%d.",
        lr.polynomial.decay_steps, params.trainer.train_steps)


def validate_model(params: cfg.ExperimentConfig) -> None:
  """Runs the encoder config's own `validate` (Model Garden only checks
  `restrictions` when parsing; the encoder's checks would run at build time).

  Raises:
    ValueError: Naming the encoder's config key.
  """
  encoder_key, encoder = _encoder(params)
  if encoder is None:
    return
  try:
    encoder.validate()
  except ValueError as e:
    raise ValueError(f"{encoder_key}: {e}") from None


def validate_experiment(params: cfg.ExperimentConfig, mode: str) -> None:
  """Checks `params` and the files it names for running `mode`.

  Args:
    params: A parsed experiment config (inputs already resolved).
    mode: One of `MODES`.

  Raises:
    ValueError: On the first problem found; the message names the config key,
      its value and, for files, the path.
  """
  if mode not in MODES:
    raise ValueError(f"--mode={mode!r} is not supported; use one of "
                     f"{', '.join(MODES)}.")
  if mode in TRAIN_MODES:
    _check_schedule(params)
  encoder_key, encoder = _encoder(params)
  vocab_size = getattr(encoder, "vocab_size", None)
  vocab_key = f"{encoder_key}.vocab_size"

  vocab_files = []
  if getattr(params.task, "vocab_file", ""):
    vocab_files.append(("task.vocab_file", params.task.vocab_file))
  for key, data in _data_configs(params, mode):
    _check_lengths(key, data, encoder_key, encoder)
    if getattr(data, "vocab_file", ""):
      vocab_files.append((f"{key}.vocab_file", data.vocab_file))
    input_path = getattr(data, "input_path", None)
    if input_path == _DUMMY_INPUT:
      continue
    if not input_path and getattr(data, "tfds_name", ""):
      continue  # TFDS input: Model Garden resolves it.
    files = match_input_files(key, input_path)
    if (isinstance(data, pretrain_dataloader.BertPretrainDataConfig) and
        data.file_type == "tfrecord"):
      check_pretraining_records(key, data, files[0], vocab_size, vocab_key)
  for key, path in vocab_files:
    check_vocab_file(key, path, vocab_size, vocab_key)


def validate_batch_sizes(params: cfg.ExperimentConfig, mode: str,
                         num_replicas: int) -> None:
  """Each global batch must split evenly over the replicas.

  Raises:
    ValueError: Naming the batch size key and the replica count.
  """
  for key, data in _data_configs(params, mode):
    batch = getattr(data, "global_batch_size", None)
    if batch is None:
      continue
    if batch <= 0:
      raise ValueError(f"{key}.global_batch_size={batch} must be positive.")
    if batch % num_replicas:
      raise ValueError(
          f"{key}.global_batch_size={batch} is not divisible by the "
          f"{num_replicas} replicas of runtime.distribution_strategy="
          f"{params.runtime.distribution_strategy!r}.")


def validate_runtime(params: cfg.ExperimentConfig,
                     gpus: Optional[Sequence[object]] = None) -> None:
  """Checks the runtime section against this machine before building a strategy.

  Raises:
    ValueError: If `runtime.num_gpus` asks for more GPUs than are visible.
  """
  runtime = params.runtime
  if runtime.num_gpus and runtime.distribution_strategy in (
      "mirrored", "one_device"):
    gpus = tf.config.list_physical_devices("GPU") if gpus is None else gpus
    if runtime.num_gpus > len(gpus):
      raise ValueError(
          f"runtime.num_gpus={runtime.num_gpus} but {len(gpus)} GPU(s) are "
          "visible to TensorFlow.")
