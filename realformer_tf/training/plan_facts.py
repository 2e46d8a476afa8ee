"""The facts of a run plan, each read once by a `Reader`, which keeps them.

A split's files, first record, token ids and manifest; each vocabulary; a
run's params.yaml; a checkpoint's embedding and whether the encoder restores
from it. A problem found is a fact for `plan_rules`; a sweep shares a `Reader`.
"""

import dataclasses
import os
import re
from typing import Any, Callable, Dict, Optional, Set, Tuple

import tensorflow as tf

from official.core import config_definitions as cfg
from realformer_tf import utils
from realformer_tf.checkpoints import errors
from realformer_tf.checkpoints import run_directory
from realformer_tf.checkpoints import tf2_checkpoint
from realformer_tf.configs import encoders
from realformer_tf.configs import registry
from realformer_tf.data import output_sets
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import record_facts
from realformer_tf.data import squad as squad_data
from realformer_tf.data import tokenization
from realformer_tf.training import input_checks

INIT_KEY = "task.init_checkpoint"
# Checkpoint keys of a word-embedding table, best first: Model Garden, the
# MLM head's tied table, TF1 BERT.
_WORD_EMBEDDING_KEYS = (
    re.compile(r"(^|/)_embedding_layer/embeddings/\.ATTRIBUTES/"
               r"VARIABLE_VALUE$"),
    re.compile(r"(^|/)embedding_table/\.ATTRIBUTES/VARIABLE_VALUE$"),
    re.compile(r"(^|/)word_embeddings(/embeddings)?(:0)?$"),
)


def check_model_dir_path(model_dir: str) -> None:
  """Raises unless `model_dir` is, or can be made, a directory."""
  if not model_dir:
    raise ValueError("--model_dir is required.")
  utils.check_directory_path(model_dir, "--model_dir",
                             "name a directory for the run's checkpoints "
                             "and summaries")


def encoder_of(config: cfg.ExperimentConfig):
  """The task's RealFormer encoder config, or None."""
  found = registry.task_encoder(config)[1]
  return found if isinstance(found, encoders.RealFormerEncoderConfig) else None


# (path, contents) of a record file's converter meta data.
Meta = Optional[Tuple[str, Dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Split:
  """A data split a run reads (`key`: e.g. "task.train_data"): its files,
  their meta data and the problems found; `unlisted`: the problem of its
  records no meta data lists, against the init run's vocabulary."""
  key: str
  data: Any
  input_path: str
  files: Tuple[str, ...] = ()
  meta: Tuple[Tuple[str, Meta], ...] = ()
  problems: Tuple[str, ...] = ()
  unlisted: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Vocab:
  """A vocabulary set by `key`: tokens and SHA-256, or `problem`."""
  key: str
  path: str
  tokens: Optional[Tuple[str, ...]] = None
  sha256: Optional[str] = None
  problem: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class InitRun:
  """`task.init_checkpoint` (`value`): its run, vocabulary and records'
  vocabulary SHA-256; for a fresh training run, the prefix the encoder
  restores from (or `problem`) and its word embedding (prefix, rows, key)."""
  value: str
  run: Optional[run_directory.Run]
  vocab: Optional[Vocab]
  trained_sha256: Optional[str]
  prefix: Optional[str] = None
  problem: Optional[Exception] = None
  embedding: Optional[Tuple[str, int, str]] = None


class Reader:
  """Reads each fact once, keeping it (or its ValueError); `cache_path`:
  where record scans are kept (None: in this process only)."""

  def __init__(self, cache_path: Optional[str] = None):
    self._memo = {}
    self._metas = {}
    self.cache_path = cache_path

  def _once(self, key, read: Callable[[], Any]) -> Tuple[Any, Any]:
    """(value, None) or (None, the ValueError) of `read()`, read once."""
    if key not in self._memo:
      try:
        self._memo[key] = (read(), None)
      except ValueError as e:
        self._memo[key] = (None, e)
    return self._memo[key]

  def _problem(self, key, check: Callable[[], Any]) -> Optional[str]:
    error = self._once(key, check)[1]
    return str(error) if error else None

  def _value(self, key, read: Callable[[], Any]) -> Any:
    """`read()`, read once; its ValueError raised again at each call."""
    value, error = self._once(key, read)
    if error:
      raise error
    return value

  def run(self, path: str) -> Optional[run_directory.Run]:
    """The train.py run `path` names or lies in (`run_directory.find_run`)."""
    return self._value(("run", path), lambda: run_directory.find_run(path))

  def meta_data(self, record_path: str) -> Meta:
    """(path, contents) of the converter meta data or manifest of ours
    listing `record_path`; each directory's are read once."""
    directory, name = os.path.split(record_path)
    if directory not in self._metas:
      found = []
      for meta_path in sorted(tf.io.gfile.glob(os.path.join(
          directory, "*meta_data.json"))) + tf.io.gfile.glob(os.path.join(
              directory, quickstart_corpus.MANIFEST)):
        meta = output_sets.read_manifest(meta_path)  # None: skipped below.
        try:
          listed = {s["file"] for s in (meta.get("splits") or {}).values()}
          listed |= set(meta.get(output_sets.FILES_KEY) or {})
        except (AttributeError, KeyError, TypeError):
          continue  # Not a converter's meta data.
        if (meta_path.endswith(quickstart_corpus.MANIFEST) and
            meta.get(output_sets.WRITER_KEY) != quickstart_corpus.WRITER):
          continue  # A manifest.json of someone else's.
        squad_file = {squad_data.TRAIN_META: squad_data.TRAIN_RECORD,
                      squad_data.EVAL_META: squad_data.EVAL_RECORD}.get(
                          os.path.basename(meta_path))
        found.append((meta_path, meta, listed | {squad_file}))
      self._metas[directory] = found
    return next(((meta_path, meta) for meta_path, meta, listed
                 in self._metas[directory] if name in listed), None)

  def vocab(self, key: str, path: str, vocab_key: Optional[str] = None,
            vocab_size: Optional[int] = None) -> Vocab:
    """The vocabulary at `path`, checked against `vocab_size` if given."""
    tokens, error = self._once(
        ("vocab", path), lambda: tuple(tokenization.load_vocab(path)))
    error = error or self._once(("size", path, vocab_size), lambda: (
        tokenization.check_vocab_size(path, len(tokens), vocab_size)))[1]
    if error:
      return Vocab(key, path, problem=str(error) if vocab_key is None else
                   f"{key}={path!r} ({vocab_key}={vocab_size}): {error}")
    sha = self._once(("sha", path), lambda: output_sets.file_sha256(path))[0]
    return Vocab(key, path, tokens, sha)

  def embedding(self, checkpoint: str) -> Optional[Tuple[str, int, str]]:
    """(prefix, rows, key) of `checkpoint`'s word embedding, or None; reads
    the shape map only."""
    return self._value(("embedding", checkpoint),
                       lambda: _embedding_rows(checkpoint))

  def split(self, key: str, data, vocab_key: Optional[str],
            vocab_size: Optional[int], init: Optional[InitRun],
            manifests: Set[str]) -> Split:
    """The facts of the data split `key`; a manifest in `manifests` is not
    checked again, and the ones checked here are added."""
    input_path = getattr(data, "input_path", None)
    text = str(input_path)
    if input_path == "dummy" or (
        not input_path and getattr(data, "tfds_name", "")):
      # Faked by the masked-LM task, or TFDS input (Model Garden's).
      return Split(key, data, text)
    files, error = self._once(("files", key, text), lambda: tuple(
        input_checks.match_input_files(key, input_path)))
    if error:
      return Split(key, data, text, problems=(str(error),))
    problems = []
    spec = input_checks.record_spec(data)
    if spec:
      expected, id_features, record_format = spec
      known = record_facts.facts(files[:1], self.meta_data, self.cache_path,
                                 read=False).get(files[0])
      problem = self._problem(
          ("first", key, files[0], repr(expected)),
          lambda: input_checks.check_first_record(
              key, files[0], expected, record_format,
              known.lengths if known else None))
      if not problem and vocab_size is not None:
        problem = self._problem(
            ("tokens", key, files, tuple(id_features), vocab_size, vocab_key),
            lambda: input_checks.check_token_ids(
                key, files, id_features, vocab_size, vocab_key,
                manifest_of=self.meta_data, cache_path=self.cache_path))
      problems += [problem] if problem else []
    meta = tuple((path, self.meta_data(path)) for path in files)
    for meta_path, found in dict(m for _, m in meta if m).items():
      if meta_path in manifests:
        continue
      manifests.add(meta_path)
      self._once(("padded", meta_path, vocab_size), lambda: _warn_padded(
          meta_path, found, vocab_size))
      error = self._once(("manifest", meta_path),
                         lambda: record_facts.check_set(
          meta_path, found, self.cache_path))[1]
      if error:
        problems.append(f"{key}.input_path={input_path!r}: {error}")
    unlisted = None
    if init and init.vocab and init.vocab.tokens:
      unlisted_files = [path for path, m in meta if m is None]
      unlisted = self._problem(
          ("unlisted", key, tuple(unlisted_files), init.vocab.path),
          lambda: input_checks.check_unlisted_records(
              key, unlisted_files, data, init.vocab.path,
              len(init.vocab.tokens), init.value,
              manifest_of=self.meta_data, cache_path=self.cache_path))
    return Split(key, data, text, files, meta, tuple(problems), unlisted)

  def previous(self, model_dir: str) -> Optional[cfg.ExperimentConfig]:
    """The config of `model_dir`'s previous run (its params.yaml), if any."""
    if not tf.io.gfile.exists(run_directory.params_path(model_dir)):
      return None
    return self._value(("previous", model_dir),
                       lambda: run_directory.load_experiment_config(model_dir))

  def trained_vocab_sha256(self, config: cfg.ExperimentConfig
                          ) -> Optional[str]:
    """The SHA-256 of the vocabulary a run's training records used, or None."""
    data = getattr(config.task, "train_data", None)
    input_path = getattr(data, "input_path", "") if data else ""
    if not input_path or input_path == "dummy":
      return None
    files = tf.io.gfile.glob(str(input_path).split(",")[0])
    meta = self.meta_data(files[0]) if files else None
    return meta[1].get("vocab_sha256") if meta else None

  def init_run(self, value: str, run: Optional[run_directory.Run],
               params: cfg.ExperimentConfig, restores: bool) -> InitRun:
    """The facts of `task.init_checkpoint=value`; with `restores` (a fresh
    training run), whether `params`' encoder restores from it."""
    vocab = (self.vocab(f"{INIT_KEY}'s vocabulary", run.vocab_file)
             if run and run.vocab_file and tf.io.gfile.exists(run.vocab_file)
             else None)
    trained = self.trained_vocab_sha256(run.config) if run else None
    if not restores:
      return InitRun(value, run, vocab, trained)
    encoder = encoder_of(params)
    prefix, error = self._once(
        ("init", value, repr(encoder.as_dict()) if encoder else None),
        lambda: _check_init_checkpoint(value, encoder))
    if error:
      return InitRun(value, run, vocab, trained, problem=error)
    return InitRun(value, run, vocab, trained, prefix, None,
                   self.embedding(prefix))


def _warn_padded(meta_path: str, meta, vocab_size: Optional[int]) -> None:
  """Warns of records of a smaller vocabulary than the encoder's."""
  tokens = meta.get("vocab_size")
  if (isinstance(tokens, int) and isinstance(vocab_size, int) and
      tokens < vocab_size):
    tokenization.warn_padded_vocabulary(
        f"{meta.get('vocab_file')} (the records' vocabulary, {meta_path})",
        tokens, vocab_size)


def _embedding_rows(checkpoint: str) -> Optional[Tuple[str, int, str]]:
  path = run_directory.resolve_checkpoint(checkpoint, "checkpoint")
  shapes = tf.train.load_checkpoint(path).get_variable_to_shape_map()
  for pattern in _WORD_EMBEDDING_KEYS:
    found = sorted(key for key, shape in shapes.items()
                   if pattern.search(key) and len(shape) == 2)
    if found:
      # The shortest key: the model's own table, not a copy nested deeper.
      key = min(found, key=len)
      return path, int(shapes[key][0]), key
  return None


def _check_init_checkpoint(init_checkpoint: str, encoder_config) -> str:
  """The newest prefix of `init_checkpoint` an `encoder_config` encoder
  restores from (none given: the newest readable one)."""
  key = INIT_KEY
  if encoder_config is None:
    return run_directory.resolve_checkpoint(init_checkpoint, key)
  # A throwaway graph: the real model's layer names stay unsuffixed.
  with tf2_checkpoint.shapes_only_graph() as built:
    encoder = encoders.build_realformer_encoder(encoder_config)
    built.append(encoder)
    encoder(utils.dummy_inputs())

    def read_encoder(prefix: str) -> None:
      # Read now: a truncated file fails before params.yaml is written.
      reader, pairs, _ = tf2_checkpoint.check_encoder_checkpoint(
          prefix, encoder, "encoder")
      for _, name in pairs:
        reader.get_tensor(name)

    try:
      return run_directory.read_latest(init_checkpoint, key, read_encoder)[0]
    except errors.CheckpointMismatchError as e:
      raise errors.CheckpointMismatchError(
          f"{key}={init_checkpoint!r} does not fit task.model.encoder:\n{e}"
      ) from None
    except (tf.errors.OpError, IndexError, ValueError) as e:
      if str(e).startswith(f"{key}="):  # read_latest's: names it already.
        raise
      raise ValueError(f"{key}={init_checkpoint!r}: cannot read its encoder "
                       f"({type(e).__name__}: {e}).") from None

