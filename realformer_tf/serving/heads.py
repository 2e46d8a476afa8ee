"""Export modules, one per head, subclassing Model Garden's `serving_modules`.

Only what Model Garden lacks changes: `serve` checks its inputs and returns
every head's outputs (optionally attention), `serve_examples` parses our
records at any length, and `serve_text` takes raw strings, tokenized in the
graph. Serving functions use `autograph=False`: nothing branches on tensors.
"""

import os
import sys
import time
from typing import Any, Dict, Mapping, Optional, Text, Tuple

import tensorflow as tf
import tf_keras

from official.core import config_definitions as cfg
from official.nlp.modeling import models
from official.nlp.serving import serving_modules
from official.nlp.tasks import masked_lm
from official.nlp.tasks import question_answering
from official.nlp.tasks import sentence_prediction
from realformer_tf.data import glue as glue_data
from realformer_tf.data import glue_tasks
from realformer_tf.serving import inputs as serving_inputs
from realformer_tf.serving import options as options_lib
from realformer_tf.serving import squad_answers
from realformer_tf.serving import text_processing


def progress(message: str) -> None:
  """An export progress line, on stderr (stdout carries the result)."""
  print(f"[export] {message}", file=sys.stderr, flush=True)


class _RealFormerServingMixin:
  """One head: its config, options, input checks, model call and signatures.
  Subclasses set the constants below, `recorded_vocab(task)` ((vocabulary,
  lower_case, where a run records it)) and `_head_outputs(outputs)`."""

  HEAD = ""  # The head's name in `ExportResult.head`.
  TASK_CONFIG = cfg.TaskConfig  # The Model Garden task config it serves.
  OPTIONS = options_lib.ServingOptions  # The head's options class.
  # Text signature key -> (tf.function, its string inputs).
  TEXT_SIGNATURES: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
  EXAMPLE_FIELDS: Tuple[str, ...] = ()  # serve_examples' extra features.
  # Model Garden's `Params`: this project's record feature names (v1).
  PARAMS: Dict[str, Any] = dict(use_v2_feature_names=False)

  def __init__(self, model: tf_keras.Model,
               options: options_lib.ServingOptions,
               vocab_file: Optional[str] = None, lower_case: bool = True):
    """`vocab_file` (a validated vocabulary): the text signatures' packer."""
    super().__init__(self.Params(**self.PARAMS), model)
    self.options = options
    self.packer = text_processing.BertTextPacker(
        vocab_file, lower_case, options.max_seq_length) if vocab_file else None
    self.attention_key = options_lib.ATTENTION_KEYS.get(
        options.return_attention)
    self.serving_model = self._build_serving_model()

  def _unknown_word_counts(self, text, text_a, text_b,
                           split_masks: bool = False) -> Dict[str, tf.Tensor]:
    """`BertTextPacker.unknown_word_counts`, summed over a pair's texts."""
    counts = [self.packer.unknown_word_counts(t, split_masks)
              for t in ((text,) if text_b is None else (text_a, text_b))]
    return {k: tf.add_n([c[k] for c in counts]) for k in counts[0]}

  def _build_serving_model(self) -> tf_keras.Model:
    """The model, plus the encoder's attention output when requested (a
    second functional model over the same graph: `BertClassifier` and
    `BertSpanLabeler` drop it)."""
    if self.attention_key is None or isinstance(self.model,
                                                models.BertPretrainerV2):
      return self.model
    encoder_outputs = self.model.checkpoint_items["encoder"].get_output_at(0)
    if self.attention_key not in encoder_outputs:
      raise ValueError(
          f"The encoder has no '{self.attention_key}' output: build it with "
          "return_attention_scores=True (the exporter does) to export "
          "attention.")
    return tf_keras.Model(
        self.model.inputs, {"outputs": self.model.outputs,
                            self.attention_key: encoder_outputs[
                                self.attention_key]})

  def _outputs(self, features: Mapping[str, tf.Tensor],
               where: str) -> Dict[str, tf.Tensor]:
    """The head's outputs (and attention) for checked token-id features."""
    features = serving_inputs.check_ids(features, self.options, where)
    raw = self.serving_model(features, training=False)
    result = self._head_outputs(
        raw if self.serving_model is self.model else raw["outputs"])
    if self.attention_key is not None:
      result[self.attention_key] = tf.cast(
          tf.stack(raw[self.attention_key], axis=1), tf.float32)
    return result

  @tf.function(autograph=False)
  def serve(self, input_word_ids, input_mask=None, input_type_ids=None,
            masked_lm_positions=None) -> Dict[str, tf.Tensor]:
    """The head's outputs for token ids (signature `serving_default`); MLM
    logits at `masked_lm_positions` (pre-training head only)."""
    features = dict(input_word_ids=input_word_ids, input_mask=input_mask,
                    input_type_ids=input_type_ids)
    if masked_lm_positions is not None:
      features["masked_lm_positions"] = masked_lm_positions
    return self._outputs(features, "serving_default")

  @tf.function(autograph=False)
  def serve_examples(self, inputs) -> Dict[str, tf.Tensor]:
    """`serve` on serialized `tf.Example`s of our records, of any length
    (`segment_ids` are the type ids)."""
    names = {"input_word_ids": self.input_word_ids_field,
             "input_mask": "input_mask",
             "input_type_ids": self.input_type_ids_field,
             **{f: f for f in self.EXAMPLE_FIELDS}}
    return self._outputs(serving_inputs.parse_examples(inputs, names),
                         "serve_examples")

  def get_inference_signatures(self, function_keys: Dict[Text, Text]):
    """Model Garden's `serve` / `serve_examples` signatures plus text ones,
    each traced with a progress line (most of an export's time)."""
    start = time.monotonic()
    plain = {k: v for k, v in function_keys.items()
             if k not in self.TEXT_SIGNATURES}  # Model Garden rejects bad keys.
    progress(f"tracing the signatures {', '.join(sorted(plain.values()))} "
              "(Model Garden's)")
    signatures = dict(super().get_inference_signatures(plain))
    for key in sorted(function_keys.keys() & self.TEXT_SIGNATURES.keys()):
      progress(f"tracing the signature {function_keys[key]} "
                f"({time.monotonic() - start:.0f} s so far)")
      function, inputs = self.TEXT_SIGNATURES[key]
      signatures[function_keys[key]] = getattr(
          self, function).get_concrete_function(
              **{name: tf.TensorSpec([None], tf.string, name=name)
                 for name in inputs})
    progress(f"{len(signatures)} signatures traced in "
              f"{time.monotonic() - start:.0f} s; writing the SavedModel "
              "(tf.saved_model.save traces them again: about as long)")
    return signatures


class MaskedLMServing(_RealFormerServingMixin, serving_modules.MaskedLM):
  """Pre-training (MLM + NSP) head."""

  HEAD = "pretraining"
  TASK_CONFIG = masked_lm.MaskedLMConfig
  TEXT_SIGNATURES = {
      "serve_text": ("serve_text", ("text",)),
      "serve_text_pair": ("serve_text", ("text_a", "text_b")),
      "preprocess_text": ("preprocess_text", ("text",))}
  OPTIONS = options_lib.MaskedLMOptions
  EXAMPLE_FIELDS = ("masked_lm_positions",)

  @classmethod
  def recorded_vocab(cls, task):
    return task.vocab_file or None, None, "task.vocab_file"

  def _head_outputs(self, outputs: Any) -> Dict[str, tf.Tensor]:
    result = {"mlm_logits": tf.cast(outputs["mlm_logits"], tf.float32)}
    for head in self.model.classification_heads:
      result[f"{head.name}_logits"] = tf.cast(outputs[head.name], tf.float32)
    return result

  def _pack_masked(self, text=None, text_a=None, text_b=None
                   ) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """(packed texts and their [MASK] positions, tokens cut per example);
    every [MASK] must fit."""
    features, tokens, names = serving_inputs.pack_texts(
        self.packer, self.packer.tokenize_with_masks, text, text_a, text_b)
    is_mask = tf.equal(features["input_word_ids"], self.packer.mask_id)
    checks = []
    for segment, (segment_tokens, name) in enumerate(zip(tokens, names)):
      sent = tf.reduce_sum(tf.cast(
          tf.equal(segment_tokens, self.packer.mask_id), tf.int32), axis=1)
      kept = tf.reduce_sum(tf.cast(
          is_mask & tf.equal(features["input_type_ids"], segment), tf.int32),
                           axis=1)
      checks.append(tf.debugging.Assert(
          tf.reduce_all(tf.equal(sent, kept)),
          [f"Invalid input: `{name}` has a [MASK] beyond the truncation "
           f"point (max_seq_length={self.packer.max_seq_length} tokens, "
           "[CLS] and [SEP] included) at batch positions",
           tf.where(tf.not_equal(sent, kept))[:, 0],
           "; shorten the text so that every [MASK] is kept."],
          name=f"check_{name}_masks_kept"))
    features = serving_inputs.with_checks(features, checks)
    positions = tf.ragged.boolean_mask(  # Ascending in each row.
        tf.zeros_like(features["input_word_ids"])
        + tf.range(self.packer.max_seq_length), is_mask)
    features["masked_lm_positions"] = positions.to_tensor(default_value=0)
    features["masked_lm_weights"] = tf.ones_like(
        positions, dtype=tf.float32).to_tensor(default_value=0.0)
    return features, self.packer.num_truncated_tokens(tokens, features)

  @tf.function(autograph=False)
  def serve_text(self, text=None, text_a=None, text_b=None
                 ) -> Dict[str, tf.Tensor]:
    """Fill-mask: each "[MASK]" in `text` (or the pair) gets its top-k, per
    masked position (`masked_lm_positions`, zero-padded: `masked_lm_weights`
    0); a [MASK] cut off by truncation is an error."""
    features, num_truncated = self._pack_masked(text, text_a, text_b)
    weights = features.pop("masked_lm_weights")
    result = self._outputs(features, "serve_text")
    log_probs = tf.nn.log_softmax(result["mlm_logits"], axis=-1)
    top = tf.math.top_k(log_probs,
                        k=min(self.options.top_k, self.options.vocab_size))
    result.update(
        masked_lm_positions=features["masked_lm_positions"],
        masked_lm_weights=weights,
        top_k_ids=top.indices,
        top_k_tokens=self.packer.id_to_token(top.indices),
        top_k_log_probs=top.values,
        num_truncated_tokens=num_truncated)
    result.update(self._unknown_word_counts(text, text_a, text_b,
                                            split_masks=True))
    return result

  @tf.function(autograph=False)
  def preprocess_text(self, text) -> Dict[str, tf.Tensor]:
    """The model inputs `serve_text` builds from `text`."""
    return self._pack_masked(text)[0]


class SentencePredictionServing(_RealFormerServingMixin,
                                serving_modules.SentencePrediction):
  """GLUE head: class probabilities, or the STS-B score."""

  HEAD = "glue"
  TASK_CONFIG = sentence_prediction.SentencePredictionConfig
  OPTIONS = options_lib.SentencePredictionOptions
  PARAMS = dict(inputs_only=False, use_v2_feature_names=False)

  @classmethod
  def recorded_vocab(cls, task):
    for data in (task.train_data, task.validation_data):
      paths = str(data.input_path or "").split(",") if data else []
      for path in filter(None, map(str.strip, paths)):
        meta_path = glue_data.meta_data_path(
            os.path.dirname(path), glue_tasks.get_task(task.glue_task).name)
        if tf.io.gfile.exists(meta_path):
          meta = glue_data.read_meta_data(meta_path)
          return meta.get("vocab_file"), meta.get("lower_case"), meta_path
    return None, None, "<task>_meta_data.json next to the task's input_path"

  def _head_outputs(self, outputs: Any) -> Dict[str, tf.Tensor]:
    logits = tf.cast(tf.nest.flatten(outputs)[0], tf.float32)
    if self.options.labels is None:
      return {"score": logits[:, 0]}
    class_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {
        "logits": logits,
        "probabilities": tf.nn.softmax(logits, axis=-1),
        "class_ids": class_ids,
        "labels": tf.gather(tf.constant(list(self.options.labels)),
                            class_ids),
    }

  @property
  def TEXT_SIGNATURES(self):  # pylint: disable=invalid-name
    inputs = ("text_a", "text_b") if self.options.text_pair else ("text",)
    return {key: (key, inputs) for key in ("serve_text", "preprocess_text")}

  @tf.function(autograph=False)
  def serve_text(self, text=None, text_a=None, text_b=None
                 ) -> Dict[str, tf.Tensor]:
    """`serve` on `text` or the pair, packed as the training records were;
    `num_truncated_tokens` counts what was cut."""
    features, tokens, _ = serving_inputs.pack_texts(
        self.packer, self.packer.tokenize, text, text_a, text_b)
    result = self._outputs(features, "serve_text")
    result["num_truncated_tokens"] = self.packer.num_truncated_tokens(
        tokens, features)
    result.update(self._unknown_word_counts(text, text_a, text_b))
    return result

  @tf.function(autograph=False)
  def preprocess_text(self, text=None, text_a=None, text_b=None
                      ) -> Dict[str, tf.Tensor]:
    """The model inputs `serve_text` builds."""
    return serving_inputs.pack_texts(self.packer, self.packer.tokenize, text,
                                     text_a, text_b)[0]


class QuestionAnsweringServing(_RealFormerServingMixin,
                               serving_modules.QuestionAnswering):
  """SQuAD head: span logits, and answers from raw text."""

  HEAD = "squad"
  TASK_CONFIG = question_answering.QuestionAnsweringConfig
  TEXT_SIGNATURES = {key: (key, ("question", "context"))
                     for key in ("serve_text", "preprocess_text")}
  OPTIONS = options_lib.QuestionAnsweringOptions

  @classmethod
  def recorded_vocab(cls, task):
    data = task.validation_data
    return (data.vocab_file or None, data.do_lower_case,
            "task.validation_data.vocab_file")

  def _head_outputs(self, outputs: Any) -> Dict[str, tf.Tensor]:
    start_logits, end_logits = tf.nest.flatten(outputs)
    return {"start_logits": tf.cast(start_logits, tf.float32),
            "end_logits": tf.cast(end_logits, tf.float32)}

  def _windows(self, question, context):
    with tf.control_dependencies([
        text_processing.assert_same_batch(question, context, "question",
                                          "context"),
        text_processing.assert_valid_utf8(question, "question"),
        text_processing.assert_valid_utf8(context, "context")]):
      question_ids = self.packer.tokenize(question)
      context_tokens = self.packer.tokenize_context(context)
    with tf.control_dependencies([
        text_processing.assert_has_tokens(question_ids, "question"),
        text_processing.assert_has_tokens(context_tokens["ids"], "context")]):
      windows = self.packer.squad_windows(
          question_ids, context_tokens["ids"], self.options.max_query_length,
          self.options.doc_stride)
    return windows, context_tokens

  @tf.function(autograph=False)
  def preprocess_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The model inputs (one row per doc-stride window) `serve_text` builds."""
    return serving_modules.features_to_int32(
        self._windows(question, context)[0])

  @tf.function(autograph=False)
  def serve_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The best answer span of each question in its context
    (`squad_answers.best_answers`)."""
    windows, context_tokens = self._windows(question, context)
    logits = self._outputs(
        {k: windows[k] for k in ("input_word_ids", "input_mask",
                                 "input_type_ids")}, "serve_text")
    result = squad_answers.best_answers(self.options, windows,
                                        context_tokens, logits)
    # A context word that became [UNK] can be no answer's text.
    result.update(self.packer.unknown_word_counts(context))
    return result

