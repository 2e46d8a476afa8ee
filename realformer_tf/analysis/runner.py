"""Restores encoders from model dirs and streams attention statistics over data.

`run_analysis`: `load_model` (the run's config, attention scores returned,
latest checkpoint), `build_dataset` (held-out batches, one pass for all
models), `make_batch_fn` (per-token entropy, JSD to the layer below, |S_l|:
`metrics`), `stats.AttentionStats` (bounded memory) and `write_outputs`.
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tqdm import auto as tqdm

from official.core import task_factory
from realformer_tf.analysis import metrics
from realformer_tf.analysis import output_files
from realformer_tf.analysis import plots
from realformer_tf.analysis import stats
from realformer_tf.checkpoints import run_directory
from realformer_tf.data import tokenization
from realformer_tf.layers import residual_attention as ra
from realformer_tf.networks import encoder as encoder_lib

_LOG_EVERY_BATCHES = 50


@dataclasses.dataclass
class LoadedModel:
  """An encoder restored from a model dir, ready for attention analysis."""
  name: str
  model_dir: str
  checkpoint: str
  config: Any  # official.core.config_definitions.ExperimentConfig
  task: Any  # official.core.base_task.Task
  encoder: encoder_lib.RealFormerEncoder  # returns attention outputs
  num_layers: int
  num_heads: int
  max_sequence_length: int
  vocab_size: int
  residual_attention: str
  norm_first: bool = False  # Pre-LN; with residual_attention, names the arch


def load_model(model_dir: str) -> LoadedModel:
  """Restores a train.py run's encoder with attention outputs switched on
  (`attention_scores`, the probabilities, and `residual_scores`); an error
  names a missing dir or checkpoint, or an encoder of another class."""
  if not model_dir or not tf.io.gfile.isdir(model_dir):
    raise FileNotFoundError(f"model dir {model_dir!r} does not exist.")
  config = run_directory.load_experiment_config(model_dir)
  # The attention outputs add outputs, not weights (as the exporter does).
  config.task.model.encoder.get().return_attention_scores = True
  task = task_factory.get_task(config.task, logging_dir=model_dir)
  model = task.build_model()
  checkpoint = run_directory.resolve_checkpoint(model_dir, "--model_dir")
  run_directory.restore_model(model, checkpoint)
  encoder = model.checkpoint_items.get("encoder")
  if not isinstance(encoder, encoder_lib.RealFormerEncoder):
    raise ValueError(
        f"{model_dir}: the encoder is a {type(encoder).__name__}; attention "
        "analysis needs a RealFormerEncoder (task.model.encoder.type=any).")
  encoder_config = encoder.get_config()
  return LoadedModel(
      name=os.path.basename(os.path.normpath(model_dir)),
      model_dir=model_dir, checkpoint=checkpoint, config=config, task=task,
      encoder=encoder, num_layers=encoder_config["num_layers"],
      num_heads=encoder_config["num_attention_heads"],
      max_sequence_length=encoder_config["max_sequence_length"],
      vocab_size=encoder_config["vocab_size"],
      residual_attention=encoder_config["residual_attention"],
      norm_first=bool(encoder_config.get("norm_first", False)))


def text_dataset(input_text: str, vocab_file: str, seq_length: int,
                 batch_size: int, lower_case: bool = True) -> tf.data.Dataset:
  """Batches of encoder inputs from a plain-text file: each non-empty line is
  one `[CLS] ... [SEP]` segment cut to `seq_length`, packed as serving does."""
  if seq_length < 3:
    raise ValueError(f"--seq_length must be >= 3, got {seq_length}.")
  vocab = tokenization.load_vocab(vocab_file)
  tokenizer = tokenization.make_tokenizer(vocab_file, lower_case=lower_case)
  cls_id, sep_id = vocab.index(tokenization.CLS), vocab.index(tokenization.SEP)

  def pack(lines):
    tokens = tokenizer.tokenize(lines).merge_dims(-2, -1)
    return tokenization.pack_inputs([tokens], seq_length, cls_id, sep_id)

  dataset = tf.data.TextLineDataset(input_text).filter(
      lambda line: tf.strings.length(tf.strings.strip(line)) > 0)
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

  `model`'s validation data, or `input_data` (a TFRecord glob of the same
  format) or `input_text` (one example per line, with `vocab_file`; default
  `seq_length`: the validation data's, at most the encoder's). A finite
  dataset of int32 `[batch, seq]` dicts.
  """
  data_config = model.config.task.validation_data
  max_length = model.max_sequence_length
  if input_text:
    if seq_length is None:
      seq_length = min(getattr(data_config, "seq_length", None) or max_length,
                       max_length)
    if seq_length > max_length:
      raise ValueError(f"--seq_length={seq_length} exceeds the encoder's "
                       f"max_position_embeddings={max_length}.")
    tokenization.load_vocab(vocab_file, model.vocab_size)
    return text_dataset(input_text, vocab_file, seq_length, batch_size,
                        lower_case)
  input_path = input_data or data_config.input_path
  source = "--input_data" if input_data else (
      "task.validation_data.input_path in "
      f"{run_directory.params_path(model.model_dir)}")
  if not input_path:
    raise ValueError(f"{source} is empty: pass --input_data (TFRecord glob) "
                     "or --input_text with --vocab_file.")
  if not any(tf.io.gfile.glob(p.strip())
             for p in str(input_path).split(",") if p.strip()):
    raise FileNotFoundError(f"{source}={input_path} matches no files.")
  data_config = data_config.replace(
      input_path=input_path, global_batch_size=batch_size, is_training=False,
      drop_remainder=False)
  return model.task.build_inputs(data_config).map(_only_features)


def make_batch_fn(encoder: encoder_lib.RealFormerEncoder):
  """A `tf.function` of a batch giving its `metrics.batch_statistics`."""
  spec = tf.TensorSpec([None, None], tf.int32)

  @tf.function(input_signature=[dict(input_word_ids=spec, input_mask=spec,
                                     input_type_ids=spec)])
  def batch_fn(inputs):
    outputs = encoder(inputs, training=False)
    return metrics.batch_statistics(
        ra.TF_OPS, outputs["attention_scores"], outputs["residual_scores"],
        inputs["input_mask"])

  return batch_fn


def stream(models: Sequence[LoadedModel], dataset: tf.data.Dataset,
           num_examples: int, reservoir_size: int = stats.DEFAULT_CAPACITY,
           seed: int = 0) -> List[stats.AttentionStats]:
  """Runs every model over the first `num_examples` examples of `dataset`."""
  results = [stats.AttentionStats(m.num_layers, m.num_heads, reservoir_size, seed)
             for m in models]
  batch_fns = [make_batch_fn(m.encoder) for m in models]
  # Without a terminal tqdm draws nothing: plain lines on stdout instead.
  progress = tqdm.tqdm(total=num_examples, unit="ex", disable=None,
                       desc="attention analysis")
  seen = 0
  for step, batch in enumerate(dataset):
    n = min(int(tf.shape(batch["input_mask"])[0]), num_examples - seen)
    batch = {k: v[:n] for k, v in batch.items()}
    for model, fn, result in zip(models, batch_fns, results):
      seq = int(tf.shape(batch["input_mask"])[1])
      if seq > model.max_sequence_length:
        raise ValueError(
            f"the data has sequence length {seq} but the encoder of "
            f"{model.model_dir} allows at most {model.max_sequence_length}.")
      result.update(*metrics.per_token(fn(batch), batch["input_mask"]), n)
    seen += n
    progress.update(n)
    if progress.disable and (step + 1) % _LOG_EVERY_BATCHES == 0:
      print(f"attention analysis: {seen} / {num_examples} examples",
            flush=True)
    if seen >= num_examples:
      break
  progress.close()
  if progress.disable:
    print(f"attention analysis: {seen} examples done", flush=True)
  return results


def _unique_names(models: Sequence[LoadedModel]) -> None:
  names = [m.name for m in models]
  if len(set(names)) < len(names):
    for i, m in enumerate(models):
      m.name = f"{'AB'[i] if i < 2 else i}: {m.name}"


def format_table(summary: Dict[str, Any]) -> str:
  """A per-layer text table of one model's summary."""

  def medians(row):
    values = [h["median"] for h in row["heads"] if h["median"] is not None]
    return (f"{np.median(values):.3f} [{min(values):.3f}..{max(values):.3f}]"
            if values else "-")

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
                  results: Sequence[stats.AttentionStats], output_dir: str,
                  settings: Dict[str, Any]) -> Dict[str, Any]:
  """Writes entropy.png, jsd.png and summary.json as one set and prints the
  tables; returns the summary written."""
  summary = dict(
      settings=dict(
          settings, **metrics.DEFINITIONS,
          entropy_thresholds=list(plots.ENTROPY_THRESHOLDS),
          jsd_thresholds=list(plots.JSD_THRESHOLDS)),
      models=[dict(name=m.name, model_dir=m.model_dir,
                   checkpoint=m.checkpoint,
                   residual_attention=m.residual_attention,
                   num_layers=m.num_layers, num_heads=m.num_heads,
                   **r.to_json()) for m, r in zip(models, results)])

  def figure(metric, first):  # jsd: layers l-1, l
    panels = []
    for m, r in zip(models, results):
      streams = getattr(r, metric)
      rows = [(f"layer {l}" + (f" vs {l - 1}" if first else ""),
               [streams.sample((l - first, h)) for h in range(m.num_heads)])
              for l in range(first, m.num_layers)]
      panels.append(plots.Panel(
          f"{m.name}: " + plots.architecture_name(m.residual_attention,
                                                  m.norm_first), rows))
    return lambda path: plots.violin_figure(panels, path, metric)

  summary = output_files.write_set(output_dir, summary, {
      f"{metric}.png": figure(metric, first)
      for metric, first in (("entropy", 0), ("jsd", 1))})
  for model_summary in summary["models"]:
    print(format_table(model_summary))
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
  """The whole analysis (`python -m realformer_tf.analysis`), its arguments
  and `output_dir` checked first; the summary written to its summary.json."""
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
  output_files.check_output_dir(output_dir)

  models = [load_model(model_dir)]
  if compare_model_dir:
    models.append(load_model(compare_model_dir))
  _unique_names(models)
  dataset = build_dataset(models[0], batch_size, input_data=input_data,
                          input_text=input_text, vocab_file=vocab_file,
                          seq_length=seq_length, lower_case=lower_case)
  results = stream(models, dataset, num_examples, reservoir_size, seed)
  source = input_text or input_data or (
      f"task.validation_data of {run_directory.params_path(model_dir)}")
  if results[0].num_examples == 0:
    raise ValueError(f"no examples read from {source}.")
  settings = dict(num_examples_requested=num_examples,
                  num_examples=results[0].num_examples,
                  batch_size=batch_size, data=source,
                  reservoir_size=reservoir_size, seed=seed)
  return write_outputs(models, results, output_dir, settings)
