"""Restores encoders from model dirs and streams attention statistics over data.

Pipeline (`run_analysis`):

1. `load_model(model_dir)`: rebuild the run's `ExperimentConfig` from
   `model_dir/params.yaml`, build the task's model, restore the latest
   checkpoint the way Model Garden's trainer wrote it
   (`tf.train.Checkpoint(model=...)`, key `model`); the encoder is built
   with `return_attention_scores=True`.
2. `build_dataset(...)`: held-out examples, batched: by default the
   `task.validation_data` recorded in the primary model's params.yaml;
   `input_data` overrides its `input_path` (TFRecords in the same format);
   `input_text` reads a plain-text file instead (one example per non-empty
   line, single segment, tokenized with tensorflow-text's `BertTokenizer` and
   `vocab_file`, packed as `[CLS] tokens [SEP]` and padded to `seq_length`).
   All models see the same examples, in one pass over the data.
3. Per batch and model, a `tf.function` runs the encoder (inference mode) and
   computes, for every unpadded query token, layer and head, the attention
   entropy and the JSD to the same head one layer below (`metrics.py`), plus
   the magnitude of each layer's residual score sum `S_l`.
4. `AttentionStats` folds these into bounded-memory `StreamStats` (exact
   count/mean, seeded reservoir sample for quantiles and violins), so memory
   is bounded by the batch size and the reservoir size, not by the number of
   examples.
5. `write_outputs`: `entropy.png`, `jsd.png`, `summary.json` and a per-layer
   table on stdout.
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence

from absl import logging
import numpy as np
import tensorflow as tf

from official.core import task_factory
from realformer_tf import utils
from realformer_tf.analysis import metrics
from realformer_tf.analysis import plots
from realformer_tf.analysis import stats
from realformer_tf.configs import registry
from realformer_tf.data import tokenization
from realformer_tf.networks import realformer_encoder

_LOG_EVERY_BATCHES = 50


@dataclasses.dataclass
class LoadedModel:
  """An encoder restored from a model dir, ready for attention analysis."""
  name: str
  model_dir: str
  checkpoint: str
  config: Any  # official.core.config_definitions.ExperimentConfig
  task: Any  # official.core.base_task.Task
  encoder: realformer_encoder.RealFormerEncoder  # returns attention outputs
  num_layers: int
  num_heads: int
  max_sequence_length: int
  vocab_size: int
  residual_attention: str


def _find_encoder(model, model_dir: str):
  """The encoder of a Model Garden model (pretrainer or fine-tuning model)."""
  encoder = getattr(model, "encoder_network", None)
  if encoder is None:
    encoder = getattr(model, "checkpoint_items", {}).get("encoder")
  if encoder is None:
    raise ValueError(
        f"{model_dir}: cannot find the encoder of {type(model).__name__} "
        "(neither model.encoder_network nor model.checkpoint_items['encoder']).")
  if not isinstance(encoder, realformer_encoder.RealFormerEncoder):
    raise ValueError(
        f"{model_dir}: the encoder is a {type(encoder).__name__}; attention "
        "analysis needs a RealFormerEncoder (task.model.encoder.type=any).")
  return encoder


def load_model(model_dir: str, name: Optional[str] = None) -> LoadedModel:
  """Restores a model dir's encoder with attention outputs switched on.

  Args:
    model_dir: Directory written by train.py: `params.yaml` plus checkpoints.
    name: Display name; defaults to the directory's base name.

  Returns:
    A `LoadedModel` whose `encoder` outputs `attention_scores` (probabilities)
    and `residual_scores`.

  Raises:
    FileNotFoundError: No such dir, or no params.yaml.
    ValueError: No readable checkpoint, the checkpoint does not match the
      model, or the encoder is not a RealFormerEncoder.
  """
  if not model_dir or not tf.io.gfile.isdir(model_dir):
    raise FileNotFoundError(f"model dir {model_dir!r} does not exist.")
  config = registry.load_experiment_config(model_dir)
  # The run's own encoder, with the attention outputs switched on (they add
  # outputs, not weights), as the SavedModel exporter does.
  config.task.model.encoder.get().return_attention_scores = True
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  model = task.build_model()
  checkpoint = utils.resolve_checkpoint(model_dir, "--model_dir")
  # Model Garden's trainer saves tf.train.Checkpoint(global_step=...,
  # model=model, optimizer=..., **model.checkpoint_items); only `model` is
  # needed here.
  status = tf.train.Checkpoint(model=model).read(checkpoint)
  status.expect_partial()
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(
        f"checkpoint {checkpoint} does not match the model described by "
        f"{os.path.join(model_dir, 'params.yaml')}: {e}") from e
  encoder = _find_encoder(model, model_dir)
  encoder_config = encoder.get_config()
  return LoadedModel(
      name=name or os.path.basename(os.path.normpath(model_dir)),
      model_dir=model_dir,
      checkpoint=checkpoint,
      config=config,
      task=task,
      encoder=encoder,
      num_layers=int(encoder_config["num_layers"]),
      num_heads=int(encoder_config["num_attention_heads"]),
      max_sequence_length=int(encoder_config["max_sequence_length"]),
      vocab_size=int(encoder_config["vocab_size"]),
      residual_attention=str(encoder_config["residual_attention"]))


def text_dataset(input_text: str, vocab_file: str, seq_length: int,
                 batch_size: int, lower_case: bool = True) -> tf.data.Dataset:
  """Batches of encoder inputs from a plain-text file, one example per line.

  Each non-empty line is tokenized and packed as one segment, `[CLS] ...
  [SEP]` cut to `seq_length`, as the GLUE records and serving pack text
  (`tokenization.make_tokenizer`, `tokenization.pack_inputs`).
  """
  if seq_length < 3:
    raise ValueError(f"--seq_length must be >= 3, got {seq_length}.")
  vocab = tokenization.load_vocab(vocab_file)
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=lower_case)
  cls_id, sep_id = vocab.index(tokenization.CLS), vocab.index(tokenization.SEP)

  def pack(lines):
    tokens = tokenizer.tokenize(lines).merge_dims(-2, -1)
    return tokenization.pack_inputs([tokens], seq_length, cls_id, sep_id)

  dataset = tf.data.TextLineDataset(input_text)
  dataset = dataset.filter(lambda line: tf.strings.length(
      tf.strings.strip(line)) > 0)
  return dataset.batch(batch_size).map(pack)


def _only_features(element):
  """Keeps the encoder inputs of a (features[, labels]) dataset element."""
  if isinstance(element, (tuple, list)):
    element = element[0]
  return {k: tf.cast(element[k], tf.int32)
          for k in ("input_word_ids", "input_mask", "input_type_ids")}


def build_dataset(model: LoadedModel,
                  batch_size: int,
                  input_data: Optional[str] = None,
                  input_text: Optional[str] = None,
                  vocab_file: Optional[str] = None,
                  seq_length: Optional[int] = None,
                  lower_case: bool = True) -> tf.data.Dataset:
  """Held-out batches of `input_word_ids`, `input_mask`, `input_type_ids`.

  Args:
    model: The primary model; its params.yaml supplies the validation data.
    batch_size: Examples per batch (the last batch may be smaller).
    input_data: Optional TFRecord glob replacing `task.validation_data`'s
      `input_path` (same record format).
    input_text: Optional plain-text file (one example per line) instead.
    vocab_file: WordPiece vocab for `input_text`.
    seq_length: Sequence length for `input_text`; defaults to the validation
      data's `seq_length` or the encoder's maximum.
    lower_case: Lower-case `input_text` before tokenizing.

  Returns:
    A finite `tf.data.Dataset` of dicts of int32 `[batch, seq]` tensors.
  """
  data_config = model.config.task.validation_data
  if input_text:
    if seq_length is None:
      seq_length = getattr(data_config, "seq_length", None)
      seq_length = min(seq_length or model.max_sequence_length,
                       model.max_sequence_length)
    if seq_length > model.max_sequence_length:
      raise ValueError(
          f"--seq_length={seq_length} exceeds the encoder's "
          f"max_position_embeddings={model.max_sequence_length}.")
    vocab_size = len(tokenization.load_vocab(vocab_file))
    if vocab_size > model.vocab_size:
      raise ValueError(
          f"--vocab_file={vocab_file} has {vocab_size} tokens but the encoder "
          f"of {model.model_dir} has vocab_size={model.vocab_size}.")
    return text_dataset(input_text, vocab_file, seq_length, batch_size,
                        lower_case)

  params_path = os.path.join(model.model_dir, "params.yaml")
  input_path = input_data or data_config.input_path
  if not input_path:
    raise ValueError(
        f"{params_path} has no task.validation_data.input_path: pass "
        "--input_data (TFRecord glob) or --input_text with --vocab_file.")
  source = "--input_data" if input_data else (
      f"task.validation_data.input_path in {params_path}")
  patterns = [p for p in str(input_path).split(",") if p.strip()]
  if not any(tf.io.gfile.glob(p.strip()) for p in patterns):
    raise FileNotFoundError(f"{source}={input_path} matches no files.")
  data_config = data_config.replace(
      input_path=input_path, global_batch_size=batch_size, is_training=False,
      drop_remainder=False)
  dataset = model.task.build_inputs(data_config)
  return dataset.map(_only_features)


class AttentionStats:
  """Streaming per-(layer, head) statistics of one model.

  Attributes:
    entropy: `StreamStats` of shape `[layers, heads]`: stream `(l, h)` holds
      the per-token entropies of head h in layer l (0-based; layer l is
      `transformer/layer_l`).
    jsd: `StreamStats` of shape `[layers - 1, heads]`: stream `(l - 1, h)`
      holds the per-token JSD between head h of layers l-1 and l.
    num_examples, num_tokens: examples and unpadded tokens seen.
  """

  def __init__(self, num_layers: int, num_heads: int,
               capacity: int = stats.DEFAULT_CAPACITY, seed: int = 0):
    self.num_layers, self.num_heads = num_layers, num_heads
    self.entropy = stats.StreamStats(capacity, seed=[seed, 0],
                                     shape=(num_layers, num_heads))
    self.jsd = stats.StreamStats(capacity, seed=[seed, 1],
                                 shape=(num_layers - 1, num_heads))
    self._score_sum = np.zeros([num_layers], np.float64)
    self._score_count = np.zeros([num_layers], np.float64)
    self._score_max = np.zeros([num_layers], np.float64)
    self.num_examples = 0
    self.num_tokens = 0

  def update(self, entropy: np.ndarray, jsd: np.ndarray,
             score_magnitude: np.ndarray, num_examples: int) -> None:
    """Adds one batch.

    Args:
      entropy: `[tokens, layers, heads]` entropies of the unpadded tokens.
      jsd: `[tokens, layers - 1, heads]` adjacent-head JSDs.
      score_magnitude: `[layers, 3]`: sum |S_l|, count, max |S_l| over
        unpadded (query, key) pairs and heads.
      num_examples: Examples in the batch.
    """
    self.entropy.update(entropy)
    self.jsd.update(jsd)
    self._score_sum += score_magnitude[:, 0]
    self._score_count += score_magnitude[:, 1]
    self._score_max = np.maximum(self._score_max, score_magnitude[:, 2])
    self.num_examples += int(num_examples)
    self.num_tokens += int(entropy.shape[0])

  def entropy_samples(self, layer: int) -> List[np.ndarray]:
    """Per-head reservoir samples of the entropies of `layer`."""
    return [self.entropy.sample((layer, h)) for h in range(self.num_heads)]

  def jsd_samples(self, layer: int) -> List[np.ndarray]:
    """Per-head samples of the JSD between `layer - 1` and `layer`."""
    return [self.jsd.sample((layer - 1, h)) for h in range(self.num_heads)]

  def score_magnitude(self) -> List[Dict[str, Any]]:
    """Per layer: mean and max |S_l| over unpadded positions and heads."""
    return [dict(layer=l,
                 mean_abs=(float(self._score_sum[l] / self._score_count[l])
                           if self._score_count[l] else None),
                 max_abs=float(self._score_max[l]),
                 count=int(self._score_count[l]))
            for l in range(self.num_layers)]

  def to_json(self) -> Dict[str, Any]:
    def heads(streams, row):
      return [dict(head=h, **streams.summary((row, h)))
              for h in range(self.num_heads)]
    return dict(
        num_examples=self.num_examples,
        num_tokens=self.num_tokens,
        entropy=[dict(layer=l, heads=heads(self.entropy, l))
                 for l in range(self.num_layers)],
        jsd=[dict(layer=l, previous_layer=l - 1, heads=heads(self.jsd, l - 1))
             for l in range(1, self.num_layers)],
        score_magnitude=self.score_magnitude())


def make_batch_fn(encoder: realformer_encoder.RealFormerEncoder):
  """A `tf.function` mapping a batch to per-token entropy, JSD, |S| stats.

  Returns a function of a dict of int32 `[batch, seq]` tensors giving
  `(entropy [tokens, L, H], jsd [tokens, L-1, H], magnitude [L, 3])`, where
  `tokens` runs over the unpadded tokens of the batch.
  """
  spec = tf.TensorSpec([None, None], tf.int32)

  @tf.function(input_signature=[dict(input_word_ids=spec, input_mask=spec,
                                     input_type_ids=spec)])
  def batch_fn(inputs):
    outputs = encoder(inputs, training=False)
    mask = inputs["input_mask"]
    probs, scores = outputs["attention_scores"], outputs["residual_scores"]
    entropy, jsd = metrics.per_token_entropy_and_jsd(probs, mask, mask)
    magnitude = tf.stack([tf.stack(metrics.score_magnitude(s, mask))
                          for s in scores])
    return entropy, jsd, magnitude

  return batch_fn


def stream(models: Sequence[LoadedModel], dataset: tf.data.Dataset,
           num_examples: int, reservoir_size: int = stats.DEFAULT_CAPACITY,
           seed: int = 0) -> List[AttentionStats]:
  """Runs every model over the first `num_examples` examples of `dataset`."""
  results = [AttentionStats(m.num_layers, m.num_heads, reservoir_size, seed)
             for m in models]
  batch_fns = [make_batch_fn(m.encoder) for m in models]
  try:
    from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
    progress = tqdm.tqdm(total=num_examples, unit="ex", disable=None,
                         desc="attention analysis")
  except ImportError:
    progress = None
  seen = 0
  for step, batch in enumerate(dataset):
    n = int(tf.shape(batch["input_mask"])[0])
    if seen + n > num_examples:
      n = num_examples - seen
      batch = {k: v[:n] for k, v in batch.items()}
    for model, fn, result in zip(models, batch_fns, results):
      seq = int(tf.shape(batch["input_mask"])[1])
      if seq > model.max_sequence_length:
        raise ValueError(
            f"the data has sequence length {seq} but the encoder of "
            f"{model.model_dir} allows at most {model.max_sequence_length}.")
      entropy, jsd, magnitude = fn(batch)
      result.update(entropy.numpy(), jsd.numpy(), magnitude.numpy(), n)
    seen += n
    if progress is not None:
      progress.update(n)
    if (step + 1) % _LOG_EVERY_BATCHES == 0:
      logging.info("attention analysis: %d / %d examples", seen, num_examples)
      if progress is None or progress.disable:
        # tqdm draws nothing when stderr is not a terminal (a log file, CI):
        # a plain line instead.
        print(f"attention analysis: {seen} / {num_examples} examples",
              flush=True)
    if seen >= num_examples:
      break
  if progress is not None:
    progress.close()
  logging.info("attention analysis: %d examples done", seen)
  if progress is None or progress.disable:
    print(f"attention analysis: {seen} examples done", flush=True)
  return results


def _unique_names(models: Sequence[LoadedModel]) -> None:
  names = [m.name for m in models]
  if len(set(names)) < len(names):
    for i, m in enumerate(models):
      m.name = f"{'AB'[i] if i < 2 else i}: {m.name}"


def model_summary(model: LoadedModel, result: AttentionStats) -> Dict[str, Any]:
  return dict(name=model.name, model_dir=model.model_dir,
              checkpoint=model.checkpoint,
              residual_attention=model.residual_attention,
              num_layers=model.num_layers, num_heads=model.num_heads,
              **result.to_json())


def format_table(summary: Dict[str, Any]) -> str:
  """A per-layer text table of one model's summary."""

  def medians(row):
    values = [h["median"] for h in row["heads"] if h["median"] is not None]
    if not values:
      return "-"
    return f"{np.median(values):.3f} [{min(values):.3f}..{max(values):.3f}]"

  jsd = {row["layer"]: row for row in summary["jsd"]}
  lines = [
      f"{summary['name']} (residual_attention={summary['residual_attention']}"
      f"): {summary['num_examples']} examples, {summary['num_tokens']} tokens",
      f"{'layer':>5}  {'entropy: median of head medians [min..max]':<44}"
      f"{'JSD vs layer below':<30}{'mean|S|':>10}{'max|S|':>10}",
  ]
  for row, mag in zip(summary["entropy"], summary["score_magnitude"]):
    layer = row["layer"]
    mean_abs = ("-" if mag["mean_abs"] is None else f"{mag['mean_abs']:.3f}")
    lines.append(
        f"{layer:>5}  {medians(row):<44}"
        f"{medians(jsd[layer]) if layer in jsd else '-':<30}"
        f"{mean_abs:>10}{mag['max_abs']:>10.3f}")
  return "\n".join(lines)


def write_outputs(models: Sequence[LoadedModel],
                  results: Sequence[AttentionStats], output_dir: str,
                  settings: Dict[str, Any]) -> Dict[str, Any]:
  """Writes entropy.png, jsd.png and summary.json; prints the tables."""
  tf.io.gfile.makedirs(output_dir)
  summary = dict(
      settings=dict(
          settings,
          units="entropy: nats; jsd: bits",
          entropy_thresholds=list(plots.ENTROPY_THRESHOLDS),
          jsd_thresholds=list(plots.JSD_THRESHOLDS),
          jsd_definition=("0.5 KL(P||M) + 0.5 KL(Q||M), M=(P+Q)/2, log "
                          "base 2 = scipy jensenshannon(p, q, base=2)**2; "
                          "max 1"),
          layers="0-based: layer l is transformer/layer_l; jsd[layer=l] "
                 "compares head h of layer l-1 and layer l",
          quantiles="from a seeded reservoir sample of reservoir_size values "
                    "per (layer, head); exact when count <= reservoir_size"),
      models=[model_summary(m, r) for m, r in zip(models, results)])
  utils.write_json_atomically(os.path.join(output_dir, "summary.json"), summary)

  def panels(kind):
    out = []
    for model, result in zip(models, results):
      if kind == "entropy":
        rows = [(f"layer {l}", result.entropy_samples(l))
                for l in range(model.num_layers)]
      else:
        rows = [(f"layer {l} vs {l - 1}", result.jsd_samples(l))
                for l in range(1, model.num_layers)]
      out.append(plots.Panel(
          title=f"{model.name} (residual_attention="
                f"{model.residual_attention})", rows=rows))
    return out

  observed = [float(np.max(r.entropy.sample())) for r in results
              if r.entropy.count]
  plots.violin_figure(
      panels("entropy"), os.path.join(output_dir, "entropy.png"),
      metric="entropy", y_max=max(observed + [plots.ENTROPY_THRESHOLDS[1]]))
  observed = [float(np.max(r.jsd.sample())) for r in results if r.jsd.count]
  plots.violin_figure(panels("jsd"), os.path.join(output_dir, "jsd.png"),
                      metric="jsd",
                      y_max=max(observed + [plots.JSD_THRESHOLDS[1]]))
  for model_summary_ in summary["models"]:
    print(format_table(model_summary_))
    print()
  print(f"Wrote entropy.png, jsd.png and summary.json to {output_dir}",
        flush=True)
  return summary


def run_analysis(model_dir: str,
                 output_dir: str,
                 compare_model_dir: Optional[str] = None,
                 num_examples: int = 8192,
                 batch_size: int = 32,
                 input_data: Optional[str] = None,
                 input_text: Optional[str] = None,
                 vocab_file: Optional[str] = None,
                 seq_length: Optional[int] = None,
                 lower_case: bool = True,
                 reservoir_size: int = stats.DEFAULT_CAPACITY,
                 seed: int = 0) -> Dict[str, Any]:
  """The whole analysis (what `python -m realformer_tf.analysis` runs).

  Returns:
    The summary dict also written to `output_dir/summary.json`.
  """
  for flag, value in (("num_examples", num_examples),
                      ("batch_size", batch_size),
                      ("reservoir_size", reservoir_size)):
    if value < 1:
      raise ValueError(f"--{flag} must be >= 1, got {value}.")
  if input_data and input_text:
    raise ValueError("pass at most one of --input_data and --input_text.")
  if input_text:
    if not vocab_file:
      raise ValueError("--input_text needs --vocab_file (WordPiece vocab).")
    for flag, path in (("input_text", input_text), ("vocab_file", vocab_file)):
      if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"--{flag}={path} does not exist.")
  elif vocab_file:
    raise ValueError("--vocab_file is only used with --input_text.")

  models = [load_model(model_dir)]
  if compare_model_dir:
    models.append(load_model(compare_model_dir))
  _unique_names(models)
  dataset = build_dataset(models[0], batch_size, input_data=input_data,
                          input_text=input_text, vocab_file=vocab_file,
                          seq_length=seq_length, lower_case=lower_case)
  results = stream(models, dataset, num_examples, reservoir_size, seed)
  source = input_text or input_data or (
      f"task.validation_data of {os.path.join(model_dir, 'params.yaml')}")
  if results[0].num_examples == 0:
    raise ValueError(f"no examples read from {source}.")
  settings = dict(num_examples_requested=num_examples,
                  num_examples=results[0].num_examples,
                  batch_size=batch_size, data=source,
                  reservoir_size=reservoir_size, seed=seed)
  return write_outputs(models, results, output_dir, settings)
