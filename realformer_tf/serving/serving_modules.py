"""Export modules, one per head, subclassing Model Garden's.

`MaskedLMServing`, `SentencePredictionServing` and `QuestionAnsweringServing`
subclass `official.nlp.serving.serving_modules.{MaskedLM, SentencePrediction,
QuestionAnswering}` (so `export_savedmodel_util.export` saves them and Model
Garden's `get_inference_signatures` builds `serve` and `serve_examples`).
They change or add only what Model Garden lacks or gets wrong:
`serve` checks its inputs in the graph and returns all heads' outputs (Model
Garden's MaskedLM returns only the NSP logits) and optionally every layer's
attention; `serve_examples` parses this project's records at any length (see
there); `serve_text` / `preprocess_text` take raw strings, tokenized and
packed in the graph (`text_processing.BertTextPacker`; text that is not
valid UTF-8 is refused, and what truncation cuts is counted in
`num_truncated_tokens`): Model Garden's
`serve_text_examples` only reads text from serialized `tf.Example`s, has no
[MASK] handling and no SQuAD windows or answer extraction.
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Text, Tuple

import tensorflow as tf
import tf_keras

from official.core import config_definitions as cfg
from official.nlp.modeling import models
from official.nlp.serving import serving_modules
from official.nlp.tasks import masked_lm
from official.nlp.tasks import question_answering
from official.nlp.tasks import sentence_prediction
from realformer_tf.data import glue as glue_data
from realformer_tf.data import squad as squad_data
from realformer_tf.serving import text_processing

ATTENTION_CHOICES = ("none", "scores", "probs")
_ATTENTION_KEYS = {"scores": "residual_scores", "probs": "attention_scores"}


@dataclasses.dataclass
class ServingOptions:
  """What every head's signatures need besides the Keras model: the encoder's
  sizes, the length the text signatures pack to (the training length) and
  the attention to return ("none", "scores" or "probs")."""
  max_seq_length: int
  max_position_embeddings: int
  vocab_size: int
  type_vocab_size: int
  return_attention: str = "none"

  def __post_init__(self):
    if self.return_attention not in ATTENTION_CHOICES:
      raise ValueError(f"return_attention={self.return_attention!r}; expected "
                       f"one of {ATTENTION_CHOICES}.")
    if not 3 <= self.max_seq_length <= self.max_position_embeddings:
      raise ValueError(
          f"max_seq_length={self.max_seq_length} must be in [3, "
          f"max_position_embeddings={self.max_position_embeddings}].")


@dataclasses.dataclass
class MaskedLMOptions(ServingOptions):
  """`top_k`: predictions per [MASK] of the text signatures."""
  top_k: int = 5

  def __post_init__(self):
    super().__post_init__()
    if self.top_k < 1:
      raise ValueError(f"top_k={self.top_k} must be >= 1.")


@dataclasses.dataclass
class SentencePredictionOptions(ServingOptions):
  """`labels`: class names in class-id order (None: regression);
  `text_pair`: whether the task takes two texts."""
  labels: Optional[Tuple[str, ...]] = None
  text_pair: bool = False


@dataclasses.dataclass
class QuestionAnsweringOptions(ServingOptions):
  """squad_lib's settings; v2.0: answer "" iff null score - best span score >
  `null_score_diff_threshold`."""
  max_query_length: int = 64
  doc_stride: int = 128
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0

  def __post_init__(self):
    super().__post_init__()
    squad_data.validate_lengths(self.max_seq_length, self.doc_stride,
                                self.max_query_length)


def _with_checks(tensors: Mapping[str, tf.Tensor],
                 checks: Sequence[Any]) -> Dict[str, tf.Tensor]:
  """`tensors`, computed only after `checks` passed."""
  with tf.control_dependencies(list(checks)):
    return {k: tf.identity(v) for k, v in tensors.items()}


class _RealFormerServingMixin:
  """One head: its config, options, input checks, model call and signatures.

  Subclasses set `HEAD`, `TASK_CONFIG`, `TEXT_SIGNATURES` and define the
  classmethods `options_from_config(task, common, top_k,
  null_score_diff_threshold)` (the head's options: `common`, i.e.
  `ServingOptions`' fields, plus the task's) and `recorded_vocab(task)`
  ((vocabulary or None, lower_case or None, where a run records it)), and
  `_head_outputs(outputs)` (the head's named outputs from the model's).
  """

  HEAD = ""  # The head's name in `ExportResult.head`.
  TASK_CONFIG = cfg.TaskConfig  # The Model Garden task config it serves.
  # Text signature key -> (tf.function, its string inputs).
  TEXT_SIGNATURES: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
  EXAMPLE_FIELDS: Tuple[str, ...] = ()  # serve_examples' extra features.
  # Model Garden's `Params`: this project's record feature names (v1).
  PARAMS: Dict[str, Any] = dict(use_v2_feature_names=False)

  def __init__(self, model: tf_keras.Model, options: ServingOptions,
               vocab_file: Optional[str] = None, lower_case: bool = True):
    """`vocab_file` (a validated vocabulary): the text signatures' packer."""
    super().__init__(self.Params(**self.PARAMS), model)
    self.options = options
    self.packer = text_processing.BertTextPacker(
        vocab_file, lower_case, options.max_seq_length) if vocab_file else None
    self.attention_key = _ATTENTION_KEYS.get(options.return_attention)
    self.serving_model = self._build_serving_model()

  def _build_serving_model(self) -> tf_keras.Model:
    """The model, plus the encoder's attention output when requested.

    `BertClassifier` and `BertSpanLabeler` are functional models whose
    outputs drop the encoder's extra outputs, so a second functional model
    over the same graph (same layers and weights, one encoder call) adds the
    attention tensors. `BertPretrainerV2` already returns all encoder outputs.
    """
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

  def _check_features(self, features: Mapping[str, tf.Tensor],
                      where: str) -> Dict[str, tf.Tensor]:
    """Graph asserts on token-id inputs (clear `InvalidArgumentError`s)."""
    o = self.options
    word_ids = features["input_word_ids"]
    prefix = f"Invalid input to {where}: "
    checks = [tf.debugging.assert_equal(
        tf.shape(features[name]), tf.shape(word_ids),
        message=prefix + f"{name} and input_word_ids must have the same "
        "shape [batch, seq_length]") for name in ("input_mask",
                                                  "input_type_ids")]
    # Every other check reads the shape (or reduces over it): they run after
    # the shape checks, so a wrong rank gets the shape message, not whichever
    # op the executor happened to run first. (`control_dependencies` copies
    # the list, so the checks appended below do not depend on themselves.)
    with tf.control_dependencies(checks):
      seq_length = tf.shape(word_ids)[1]
      mask = features["input_mask"]
      checks += [
          tf.debugging.assert_positive(
              seq_length, message=prefix + "the sequence length must be >= 1"),
          tf.debugging.assert_less_equal(
              seq_length, o.max_position_embeddings,
              message=prefix + "the sequence length exceeds the maximum of the "
              f"model, {o.max_position_embeddings} tokens "
              "(max_position_embeddings); truncate the input as in training"),
          tf.debugging.Assert(tf.reduce_all((mask == 0) | (mask == 1)),
                              [prefix + "input_mask values must be 0 or 1"]),
      ]
      bounds = [("input_word_ids", o.vocab_size, f"vocab_size={o.vocab_size}"),
                ("input_type_ids", o.type_vocab_size,
                 f"type_vocab_size={o.type_vocab_size}")]
      if "masked_lm_positions" in features:
        checks.append(tf.debugging.assert_equal(
            tf.shape(features["masked_lm_positions"])[0],
            tf.shape(word_ids)[0],
            message=prefix + "masked_lm_positions and input_word_ids must "
            "have the same batch size"))
        bounds.append(
            ("masked_lm_positions", seq_length, "the sequence length"))
      for name, bound, limit in bounds:
        checks += [
            tf.debugging.assert_non_negative(
                features[name], message=prefix + f"{name} must be >= 0"),
            tf.debugging.assert_less(
                features[name], bound,
                message=prefix + f"{name} must be < {limit}")]
    return _with_checks(features, checks)

  def _outputs(self, features: Mapping[str, tf.Tensor],
               where: str) -> Dict[str, tf.Tensor]:
    """The head's outputs (and attention) for checked token-id features."""
    features = self._check_features(features, where)
    raw = self.serving_model(features, training=False)
    result = self._head_outputs(
        raw if self.serving_model is self.model else raw["outputs"])
    if self.attention_key is not None:
      result[self.attention_key] = tf.cast(
          tf.stack(raw[self.attention_key], axis=1), tf.float32)
    return result

  @tf.function
  def serve(self, input_word_ids, input_mask=None, input_type_ids=None,
            masked_lm_positions=None) -> Dict[str, tf.Tensor]:
    """The head's outputs for token ids (signature `serving_default`); MLM
    logits at `masked_lm_positions` (pre-training head only)."""
    features = dict(input_word_ids=input_word_ids, input_mask=input_mask,
                    input_type_ids=input_type_ids)
    if masked_lm_positions is not None:
      features["masked_lm_positions"] = masked_lm_positions
    return self._outputs(features, "serving_default")

  @tf.function
  def serve_examples(self, inputs) -> Dict[str, tf.Tensor]:
    """`serve` on serialized `tf.Example`s of this project's records.

    `segment_ids` are the type ids (Model Garden's `MaskedLM.serve_examples`,
    serving_modules.py:237, feeds the word ids). Int64 features of any length
    up to the model's maximum (Model Garden needs a fixed
    `parse_sequence_length`), each record parsed once and zero-padded to the
    longest of the batch (mask 0). A string that does not parse, or an example
    whose features differ in length, is an error: `tf.io.parse_example` has
    no per-record status and its own error quotes the raw bytes, which
    TensorFlow's Python client fails to decode (`UnicodeDecodeError`), so each
    record is parsed in a `tf.data` pipeline that drops failures, and the
    missing batch positions are reported.
    """
    names = {"input_word_ids": self.input_word_ids_field,
             "input_mask": "input_mask",
             "input_type_ids": self.input_type_ids_field,
             **{f: f for f in self.EXAMPLE_FIELDS}}
    spec = {f: tf.io.RaggedFeature(tf.int64) for f in names.values()}

    def parse(index, record):
      parsed = tf.io.parse_single_example(record, spec)
      return index, parsed, {f: tf.size(v) for f, v in parsed.items()}

    size = tf.size(inputs, out_type=tf.int64)
    empty = (tf.zeros([0], tf.int64),
             {f: tf.zeros([0, 0], tf.int64) for f in spec},
             {f: tf.zeros([0], tf.int32) for f in spec})
    found, parsed, lengths = tf.data.Dataset.from_tensor_slices(
        inputs).enumerate().map(parse).ignore_errors().padded_batch(
            tf.maximum(size, 1)).reduce(empty, lambda _, batch: batch)
    prefix = "Invalid input to serve_examples: "
    word_lengths = lengths[self.input_word_ids_field]
    checks = [
        tf.debugging.Assert(
            tf.equal(tf.size(found, out_type=tf.int64), size),
            [prefix + "`examples` holds a string that is not a serialized "
             f"tf.Example with int64 features {sorted(spec)} at batch "
             "positions",
             tf.sets.difference(tf.range(size)[None], found[None]).values],
            name="check_examples_parse"),
        tf.debugging.assert_positive(
            word_lengths, message=prefix + "every example needs a non-empty "
            f"`{self.input_word_ids_field}` feature")]
    checks += [tf.debugging.assert_equal(
        lengths[names[key]], word_lengths,
        message=(prefix + f"feature `{names[key]}` must have as many values "
                 f"as `{self.input_word_ids_field}` in every example"))
               for key in ("input_mask", "input_type_ids")]
    return self._outputs(
        _with_checks({k: tf.cast(parsed[f], tf.int32)
                      for k, f in names.items()}, checks), "serve_examples")

  def _pack_texts(self, tokenize, text=None, text_a=None, text_b=None
                  ) -> Tuple[Dict[str, tf.Tensor], Sequence[tf.RaggedTensor],
                             Sequence[str]]:
    """`tokenize`d, packed and checked `text` or pair `text_a`, `text_b`:
    (features, tokens of each text, input name of each text)."""
    if text_b is None:
      texts, names, checks = [text], ["text"], []
    else:
      texts, names = [text_a, text_b], ["text_a", "text_b"]
      checks = [text_processing.assert_same_batch(text_a, text_b, *names)]
    checks += [text_processing.assert_valid_utf8(t, name)
               for t, name in zip(texts, names)]
    with tf.control_dependencies(checks):
      tokens = [tokenize(t) for t in texts]
    features, checks = self.packer.pack(tokens, names)
    return _with_checks(features, checks), tokens, names

  def get_inference_signatures(self, function_keys: Dict[Text, Text]):
    """Model Garden's `serve` / `serve_examples` signatures plus text ones."""
    signatures = dict(super().get_inference_signatures(
        {k: v for k, v in function_keys.items()
         if k not in self.TEXT_SIGNATURES}))  # Model Garden rejects bad keys.
    for key in function_keys.keys() & self.TEXT_SIGNATURES.keys():
      function, inputs = self.TEXT_SIGNATURES[key]
      signatures[function_keys[key]] = getattr(
          self, function).get_concrete_function(
              **{name: tf.TensorSpec([None], tf.string, name=name)
                 for name in inputs})
    return signatures


class MaskedLMServing(_RealFormerServingMixin, serving_modules.MaskedLM):
  """Pre-training (MLM + NSP) head."""

  HEAD = "pretraining"
  TASK_CONFIG = masked_lm.MaskedLMConfig
  TEXT_SIGNATURES = {
      "serve_text": ("serve_text", ("text",)),
      "serve_text_pair": ("serve_text", ("text_a", "text_b")),
      "preprocess_text": ("preprocess_text", ("text",))}
  EXAMPLE_FIELDS = ("masked_lm_positions",)

  @classmethod
  def options_from_config(cls, task, common, top_k, null_score_diff_threshold):
    return MaskedLMOptions(**common, top_k=top_k)

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
    features, tokens, names = self._pack_texts(
        self.packer.tokenize_with_masks, text, text_a, text_b)
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
    features = _with_checks(features, checks)
    positions = tf.ragged.boolean_mask(  # Ascending in each row.
        tf.zeros_like(features["input_word_ids"])
        + tf.range(self.packer.max_seq_length), is_mask)
    features["masked_lm_positions"] = positions.to_tensor(default_value=0)
    features["masked_lm_weights"] = tf.ones_like(
        positions, dtype=tf.float32).to_tensor(default_value=0.0)
    return features, self.packer.num_truncated_tokens(tokens, features)

  @tf.function
  def serve_text(self, text=None, text_a=None, text_b=None
                 ) -> Dict[str, tf.Tensor]:
    """Fill-mask: each "[MASK]" in `text` gets its top-k predictions.

    Outputs are per masked position (`masked_lm_positions`, ascending,
    zero-padded to the most masks in the batch; `masked_lm_weights` is 0 on
    padding). A [MASK] cut off by the truncation to `max_seq_length` is an
    error; `num_truncated_tokens` says how many tokens of each example were
    cut. `text_a` and `text_b` (signature `serve_text_pair`) are packed as
    `[CLS] a [SEP] b [SEP]`, where the NSP logits are meaningful.
    """
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
    return result

  @tf.function
  def preprocess_text(self, text) -> Dict[str, tf.Tensor]:
    """The model inputs `serve_text` builds from `text`."""
    return self._pack_masked(text)[0]


class SentencePredictionServing(_RealFormerServingMixin,
                                serving_modules.SentencePrediction):
  """GLUE head: class probabilities, or the STS-B score."""

  HEAD = "glue"
  TASK_CONFIG = sentence_prediction.SentencePredictionConfig
  PARAMS = dict(inputs_only=False, use_v2_feature_names=False)

  @classmethod
  def options_from_config(cls, task, common, top_k, null_score_diff_threshold):
    if not getattr(task, "glue_task", ""):
      raise ValueError("The run's config has no task.glue_task, so whether it "
                       "takes one text or a pair is unknown.")
    spec = glue_data.get_task(task.glue_task)
    if task.model.num_classes != spec.num_classes:
      raise ValueError(f"task.model.num_classes={task.model.num_classes}, but "
                       f"{spec.name} has {spec.num_classes}.")
    return SentencePredictionOptions(**common, labels=spec.labels,
                                     text_pair=spec.text_b is not None)

  @classmethod
  def recorded_vocab(cls, task):
    for data in (task.train_data, task.validation_data):
      paths = str(data.input_path or "").split(",") if data else []
      for path in filter(None, map(str.strip, paths)):
        meta_path = glue_data.meta_data_path(
            os.path.dirname(path), glue_data.get_task(task.glue_task).name)
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

  @tf.function
  def serve_text(self, text=None, text_a=None, text_b=None
                 ) -> Dict[str, tf.Tensor]:
    """`serve` on `text`, or on the pair `text_a`, `text_b`, packed to
    `max_seq_length` as the training records were (the longer text loses its
    last tokens first); `num_truncated_tokens` counts what was cut."""
    features, tokens, _ = self._pack_texts(self.packer.tokenize, text,
                                           text_a, text_b)
    result = self._outputs(features, "serve_text")
    result["num_truncated_tokens"] = self.packer.num_truncated_tokens(
        tokens, features)
    return result

  @tf.function
  def preprocess_text(self, text=None, text_a=None, text_b=None
                      ) -> Dict[str, tf.Tensor]:
    """The model inputs `serve_text` builds."""
    return self._pack_texts(self.packer.tokenize, text, text_a, text_b)[0]


class QuestionAnsweringServing(_RealFormerServingMixin,
                               serving_modules.QuestionAnswering):
  """SQuAD head: span logits, and answers from raw text."""

  HEAD = "squad"
  TASK_CONFIG = question_answering.QuestionAnsweringConfig
  TEXT_SIGNATURES = {key: (key, ("question", "context"))
                     for key in ("serve_text", "preprocess_text")}

  @classmethod
  def options_from_config(cls, task, common, top_k, null_score_diff_threshold):
    data = task.validation_data
    if null_score_diff_threshold is None:
      null_score_diff_threshold = task.null_score_diff_threshold
    return QuestionAnsweringOptions(
        **common, max_query_length=int(data.query_length),
        doc_stride=int(data.doc_stride), n_best_size=int(task.n_best_size),
        max_answer_length=int(task.max_answer_length),
        version_2_with_negative=bool(data.version_2_with_negative),
        null_score_diff_threshold=float(null_score_diff_threshold))

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

  @tf.function
  def preprocess_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The model inputs (one row per doc-stride window) `serve_text` builds."""
    return serving_modules.features_to_int32(
        self._windows(question, context)[0])

  @tf.function
  def serve_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The best answer span of each question in its context (`best_answers`)."""
    windows, context_tokens = self._windows(question, context)
    logits = self._outputs(
        {k: windows[k] for k in ("input_word_ids", "input_mask",
                                 "input_type_ids")}, "serve_text")
    return best_answers(self.options, windows, context_tokens, logits)


def best_answers(options: QuestionAnsweringOptions,
                 windows: Mapping[str, tf.Tensor],
                 context_tokens: Mapping[str, tf.RaggedTensor],
                 logits: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """squad_lib's answer selection over all doc-stride windows, in the graph.

  The `n_best_size` best starts and ends of each window, spans inside the
  context, starting in their max-context window, at most `max_answer_length`
  tokens; the best start + end logit sum wins. v2.0: "" when the null score
  (min over windows of the [CLS] start + end logits) minus the best span score
  exceeds `null_score_diff_threshold`. `windows` and `context_tokens` are
  `BertTextPacker.squad_windows` and `.tokenize_context`; `logits` their
  `start_logits`, `end_logits` `[windows, max_seq_length]`.

  Returns:
    Per question: `answer_text` (the original words, single-spaced, cut to
    the span's characters, as squad_lib's `get_final_text`; "" for no
    answer), `answer_start_token` / `answer_end_token` (inclusive indices into
    the context's WordPieces, -1 for no answer), `answer_start_byte` /
    `answer_end_byte` (UTF-8 byte span in the context, end exclusive, -1 for
    no answer), `has_answer`, `span_score` (best start + end logit; -inf if no
    span is valid), `num_windows`; v2.0 also `null_score` and
    `null_score_diff` (what squad_lib writes to null_odds.json).
  """
  o = options
  seq_length = o.max_seq_length
  k = min(o.n_best_size, seq_length)
  minus_inf = tf.constant(-float("inf"), tf.float64)

  def in_top_k(values):
    # On the float32 logits (the order is the same in float64); ties: lower
    # index first, as Python's stable sort in squad_lib.
    top = tf.math.top_k(values, k=k).indices
    return tf.reduce_any(tf.one_hot(top, seq_length, on_value=True,
                                    off_value=False), axis=1)

  positions = tf.range(seq_length, dtype=tf.int64)[None, :]
  offset = windows["context_offset"][:, None]
  in_context = (positions >= offset) & (
      positions < offset + windows["window_length"][:, None])
  valid_start = (in_context & windows["max_context"]
                 & in_top_k(logits["start_logits"]))
  valid_end = in_context & in_top_k(logits["end_logits"])
  # float64 sums, as squad_lib's Python floats.
  start = tf.cast(logits["start_logits"], tf.float64)
  end = tf.cast(logits["end_logits"], tf.float64)
  span = positions[0][None, :] - positions[0][:, None]  # end - start
  length_ok = (span >= 0) & (span < o.max_answer_length)
  candidates = (valid_start[:, :, None] & valid_end[:, None, :]
                & length_ok[None, :, :])
  scores = tf.where(candidates, start[:, :, None] + end[:, None, :],
                    minus_inf)
  flat = tf.reshape(scores, [-1, seq_length * seq_length])
  window_arg = tf.argmax(flat, axis=1)

  num_windows = windows["num_windows"]
  # Dense, padded with -inf: a ragged reduce_max would give the float64
  # minimum, not -inf, for a question whose windows hold no valid span
  # (a short context), which passed for a span at position 0.
  by_example = tf.RaggedTensor.from_row_lengths(
      tf.reduce_max(flat, axis=1), num_windows).to_tensor(minus_inf)
  best_score = tf.reduce_max(by_example, axis=1)
  best_window = (tf.cumsum(num_windows, exclusive=True)
                 + tf.argmax(by_example, axis=1))
  arg = tf.gather(window_arg, best_window)
  start_pos, end_pos = arg // seq_length, arg % seq_length
  has_span = best_score > minus_inf
  window_start = tf.gather(windows["window_start"], best_window)
  offset = tf.gather(windows["context_offset"], best_window)
  token_start = tf.where(has_span, window_start + start_pos - offset, 0)
  token_end = tf.where(has_span, window_start + end_pos - offset, 0)

  if o.version_2_with_negative:
    null = tf.RaggedTensor.from_row_lengths(start[:, 0] + end[:, 0],
                                            num_windows)
    null_score = tf.reduce_min(null, axis=1)
    # As squad_lib's null odds: the null score alone when no span is valid.
    null_score_diff = tf.where(has_span, null_score - best_score, null_score)
    has_answer = has_span & (null_score_diff <= o.null_score_diff_threshold)
  else:
    has_answer = has_span

  text, byte_start, byte_end = _answer_text(context_tokens, token_start,
                                            token_end)

  def or_minus_one(index):  # -1 for no answer.
    return tf.cast(tf.where(has_answer, index, tf.constant(-1, tf.int64)),
                   tf.int32)

  result = {
      "answer_text": tf.where(has_answer, text, ""),
      "answer_start_token": or_minus_one(token_start),
      "answer_end_token": or_minus_one(token_end),
      "answer_start_byte": or_minus_one(byte_start),
      "answer_end_byte": or_minus_one(byte_end),
      "has_answer": has_answer,
      "span_score": tf.cast(best_score, tf.float32),
      "num_windows": tf.cast(num_windows, tf.int32),
  }
  if o.version_2_with_negative:
    result["null_score"] = tf.cast(null_score, tf.float32)
    result["null_score_diff"] = tf.cast(null_score_diff, tf.float32)
  return result


def _answer_text(context_tokens, token_start, token_end):
  """Answer text as squad_lib's `get_final_text`, and its byte span.

  The original words the span touches, joined by single spaces (squad_lib
  joins `doc_tokens`), cut to the first and last WordPiece's characters.
  """

  def at(key, index):  # context_tokens[key][i, index[i]]
    values = context_tokens[key]
    return tf.gather(values.flat_values, values.row_starts() + index)

  word_start = at("word_index", token_start)
  word_end = at("word_index", token_end)
  first_cut = at("word_begin", token_start)
  last_keep = at("word_end", token_end)
  words = context_tokens["words"]
  span_words = tf.gather(words.flat_values, tf.ragged.range(
      words.row_starts() + word_start, words.row_starts() + word_end + 1))
  joined = tf.strings.reduce_join(span_words, axis=1, separator=" ")
  last_length = tf.cast(tf.strings.length(at("words", word_end)), tf.int64)
  length = (tf.cast(tf.strings.length(joined), tf.int64)
            - (last_length - last_keep) - first_cut)
  text = tf.strings.substr(joined, first_cut, length)
  byte_start = at("words_begin", word_start) + first_cut
  byte_end = at("words_begin", word_end) + last_keep
  return text, byte_start, byte_end
