"""Export modules for RealFormer heads, subclassing Model Garden's.

`MaskedLMServing`, `SentencePredictionServing` and `QuestionAnsweringServing`
subclass `official.nlp.serving.serving_modules.{MaskedLM, SentencePrediction,
QuestionAnswering}` (so `official.core.export_base.export` /
`export_savedmodel_util.export` save them, and Model Garden's
`get_inference_signatures` builds the `serve` and `serve_examples` signatures)
and change or add only what Model Garden lacks or gets wrong:

* `serve` (signature `serving_default`) checks its inputs in the graph
  (`tf.debugging` asserts: equal shapes, sequence length within
  `max_position_embeddings`, ids within the vocabulary and type vocabulary, a
  0/1 mask, masked positions inside the sequence) and returns all heads'
  outputs: MLM logits *and* NSP logits (Model Garden's MaskedLM returns only
  the NSP logits), class probabilities or the STS-B score, span logits.
* `serve_examples` parses the feature names of this project's TFRecords
  (`input_ids`, `input_mask`, `segment_ids`, plus `masked_lm_positions`) at any
  length up to the model's maximum (Model Garden needs a fixed
  `parse_sequence_length`), and passes the segment ids as type ids: Model
  Garden's `MaskedLM.serve_examples` passes the *word* ids as
  `input_type_ids` (see `MaskedLMServing.serve_examples`).
* `serve_text` / `preprocess_text`: raw strings, tokenized and packed in the
  graph (`text_processing.BertTextPacker`); Model Garden's text path
  (`serve_text_examples`) only reads text from serialized `tf.Example`s, has no
  [MASK] handling and no SQuAD windows or answer extraction.
* Optional attention output (`ServingOptions.return_attention`): every layer's
  pre-softmax residual scores or softmax probabilities, `[batch, layers,
  heads, seq, seq]`.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence, Text, Tuple

import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official.nlp.serving import serving_modules
from realformer_tf.serving import text_processing

ATTENTION_CHOICES = ("none", "scores", "probs")
_ATTENTION_KEYS = {"scores": "attention_scores", "probs": "attention_probs"}

# Feature names in this project's TFRecords (Model Garden's v1 names).
_WORD_IDS_FEATURE = "input_ids"
_TYPE_IDS_FEATURE = "segment_ids"


@dataclasses.dataclass
class ServingOptions:
  """What the exported signatures need to know besides the Keras model.

  Attributes:
    max_seq_length: Length the text signatures pack to (the training length).
    max_position_embeddings: Longest sequence the encoder accepts.
    vocab_size: Word-id range of the embedding table.
    type_vocab_size: Type-id range.
    return_attention: "none", "scores" or "probs".
    top_k: MLM text signatures: predictions per [MASK].
    labels: GLUE class names in class-id order; None for regression.
    text_pair: GLUE: whether the task takes two texts.
    max_query_length: SQuAD question tokens kept.
    doc_stride: SQuAD window stride.
    n_best_size: SQuAD start/end candidates per window.
    max_answer_length: SQuAD longest answer, in WordPieces.
    version_2_with_negative: SQuAD v2.0 (null answers).
    null_score_diff_threshold: SQuAD v2.0: answer "" iff null score - best
      span score > this.
  """
  max_seq_length: int
  max_position_embeddings: int
  vocab_size: int
  type_vocab_size: int
  return_attention: str = "none"
  top_k: int = 5
  labels: Optional[Tuple[str, ...]] = None
  text_pair: bool = False
  max_query_length: int = 64
  doc_stride: int = 128
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0

  def validate(self):
    if self.return_attention not in ATTENTION_CHOICES:
      raise ValueError(f"return_attention={self.return_attention!r}; expected "
                       f"one of {ATTENTION_CHOICES}.")
    if not 3 <= self.max_seq_length <= self.max_position_embeddings:
      raise ValueError(
          f"max_seq_length={self.max_seq_length} must be in [3, "
          f"max_position_embeddings={self.max_position_embeddings}].")


def _int_spec(name: str) -> tf.TensorSpec:
  return tf.TensorSpec(shape=[None, None], dtype=tf.int32, name=name)


def _text_spec(name: str) -> tf.TensorSpec:
  return tf.TensorSpec(shape=[None], dtype=tf.string, name=name)


def _with_checks(tensors: Mapping[str, tf.Tensor],
                 checks: Sequence[Any]) -> Dict[str, tf.Tensor]:
  """`tensors`, computed only after `checks` passed."""
  with tf.control_dependencies(list(checks)):
    return {k: tf.identity(v) for k, v in tensors.items()}


class _RealFormerServingMixin:
  """Shared input checks, model call, example parsing and attention output."""

  # Set by the subclasses: the function keys of their text signatures
  # (exported under the same signature keys).
  TEXT_FUNCTIONS: Tuple[str, ...] = ()

  def _init_serving(self, options: ServingOptions,
                    packer: Optional[text_processing.BertTextPacker]):
    options.validate()
    self.options = options
    if packer is not None and packer.max_seq_length != options.max_seq_length:
      raise ValueError(f"packer.max_seq_length={packer.max_seq_length} != "
                       f"options.max_seq_length={options.max_seq_length}.")
    self.packer = packer
    self.serving_model = self._build_serving_model()

  def _build_serving_model(self) -> tf_keras.Model:
    """The model, plus the encoder's attention output when requested.

    `BertClassifier` and `BertSpanLabeler` are functional models whose
    outputs drop the encoder's extra outputs, so a second functional model
    over the same graph (same layers and weights, one encoder call) adds the
    attention tensors. `BertPretrainerV2` already returns all encoder outputs.
    """
    if self.options.return_attention == "none" or isinstance(
        self.model, models.BertPretrainerV2):
      return self.model
    encoder = self.model.checkpoint_items["encoder"]
    encoder_outputs = encoder.get_output_at(0)
    key = _ATTENTION_KEYS[self.options.return_attention]
    if not isinstance(encoder_outputs, dict) or key not in encoder_outputs:
      raise ValueError(
          f"The encoder has no '{key}' output: build it with "
          "return_attention_scores=True (the exporter does) to export "
          f"attention.")
    return tf_keras.Model(
        self.model.inputs,
        {"outputs": self.model.outputs, "attention": encoder_outputs[key]})

  def _check_features(self, features: Mapping[str, tf.Tensor],
                      where: str) -> Dict[str, tf.Tensor]:
    """Graph asserts on token-id inputs (clear `InvalidArgumentError`s)."""
    o = self.options
    word_ids = features["input_word_ids"]
    mask = features["input_mask"]
    type_ids = features["input_type_ids"]
    prefix = f"Invalid input to {where}: "
    seq_length = tf.shape(word_ids)[1]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(mask), tf.shape(word_ids),
            message=prefix + "input_mask and input_word_ids must have the "
            "same shape [batch, seq_length]"),
        tf.debugging.assert_equal(
            tf.shape(type_ids), tf.shape(word_ids),
            message=prefix + "input_type_ids and input_word_ids must have "
            "the same shape [batch, seq_length]"),
        tf.debugging.assert_positive(
            seq_length, message=prefix + "the sequence length must be >= 1"),
        tf.debugging.assert_less_equal(
            seq_length, o.max_position_embeddings,
            message=prefix + "the sequence length exceeds the maximum of the "
            f"model, {o.max_position_embeddings} tokens "
            "(max_position_embeddings); truncate the input as in training"),
        tf.debugging.assert_non_negative(
            word_ids, message=prefix + "input_word_ids must be >= 0"),
        tf.debugging.assert_less(
            word_ids, o.vocab_size,
            message=prefix + f"input_word_ids must be < vocab_size="
            f"{o.vocab_size}"),
        tf.debugging.assert_non_negative(
            type_ids, message=prefix + "input_type_ids must be >= 0"),
        tf.debugging.assert_less(
            type_ids, o.type_vocab_size,
            message=prefix + f"input_type_ids must be < type_vocab_size="
            f"{o.type_vocab_size}"),
        tf.debugging.Assert(
            tf.reduce_all((mask == 0) | (mask == 1)),
            [prefix + "input_mask values must be 0 or 1"]),
    ]
    positions = features.get("masked_lm_positions")
    if positions is not None:
      checks += [
          tf.debugging.assert_equal(
              tf.shape(positions)[0], tf.shape(word_ids)[0],
              message=prefix + "masked_lm_positions and input_word_ids must "
              "have the same batch size"),
          tf.debugging.assert_non_negative(
              positions, message=prefix + "masked_lm_positions must be >= 0"),
          tf.debugging.assert_less(
              positions, seq_length,
              message=prefix + "masked_lm_positions must be < the sequence "
              "length"),
      ]
    return _with_checks(features, checks)

  def _run_model(self, features: Mapping[str, tf.Tensor]) -> Dict[str, Any]:
    """Model outputs: {"outputs": <the model's outputs>, "attention": ...}."""
    inputs = {k: tf.cast(v, tf.int32) for k, v in features.items()}
    outputs = self.serving_model(inputs, training=False)
    if isinstance(self.model, models.BertPretrainerV2):
      result = {"outputs": outputs}
      key = _ATTENTION_KEYS.get(self.options.return_attention)
      if key:
        result["attention"] = outputs[key]
      return result
    if self.options.return_attention == "none":
      return {"outputs": outputs}
    return outputs

  def _attention_output(self, raw: Mapping[str, Any]) -> Dict[str, tf.Tensor]:
    if "attention" not in raw:
      return {}
    return {_ATTENTION_KEYS[self.options.return_attention]:
                tf.cast(tf.stack(raw["attention"], axis=1), tf.float32)}

  def _parse_examples(self, serialized: tf.Tensor,
                      extra_fields: Sequence[str] = ()) -> Dict[str, tf.Tensor]:
    """Parses int64 features of any length (up to the model's maximum).

    Rows are zero-padded to the longest example of the batch (mask 0); an
    example whose features differ in length is an error.
    """
    names = {
        "input_word_ids": _WORD_IDS_FEATURE,
        "input_mask": "input_mask",
        "input_type_ids": _TYPE_IDS_FEATURE,
    }
    names.update({f: f for f in extra_fields})
    parsed = tf.io.parse_example(
        serialized,
        {feature: tf.io.RaggedFeature(tf.int64) for feature in names.values()})
    lengths = parsed[_WORD_IDS_FEATURE].row_lengths()
    checks = [
        tf.debugging.assert_equal(
            parsed[names[key]].row_lengths(), lengths,
            message=(f"Invalid input to serve_examples: feature "
                     f"`{names[key]}` must have as many values as "
                     f"`{_WORD_IDS_FEATURE}` in every example"))
        for key in ("input_mask", "input_type_ids")
    ]
    checks.append(tf.debugging.assert_positive(
        lengths, message=(f"Invalid input to serve_examples: every example "
                          f"needs a non-empty `{_WORD_IDS_FEATURE}` feature")))
    dense = {key: tf.cast(parsed[feature].to_tensor(), tf.int32)
             for key, feature in names.items()}
    return _with_checks(dense, checks)

  def _text_signature(self, key: str):
    raise ValueError(f"{type(self).__name__} has no text function {key!r}.")

  def get_inference_signatures(self, function_keys: Dict[Text, Text]):
    """Model Garden's `serve` / `serve_examples` signatures plus text ones."""
    model_garden_keys = {k: v for k, v in function_keys.items()
                         if k in ("serve", "serve_examples")}
    signatures = dict(super().get_inference_signatures(model_garden_keys))
    for key, signature_key in function_keys.items():
      if key in model_garden_keys:
        continue
      if key not in self.TEXT_FUNCTIONS:
        raise ValueError(
            f"Invalid function key {key!r} for {type(self).__name__}; valid "
            f"keys: {('serve', 'serve_examples') + self.TEXT_FUNCTIONS}.")
      if self.packer is None:
        raise ValueError(f"Function {key!r} needs a vocabulary (a text "
                         "packer); export with a vocab file.")
      signatures[signature_key] = self._text_signature(key)
    return signatures


class MaskedLMServing(_RealFormerServingMixin, serving_modules.MaskedLM):
  """Pre-training (MLM + NSP) export module."""

  TEXT_FUNCTIONS = ("serve_text", "serve_text_pair", "preprocess_text")

  def __init__(self, params: serving_modules.MaskedLM.Params,
               model: tf_keras.Model, options: ServingOptions,
               packer: Optional[text_processing.BertTextPacker] = None):
    super().__init__(params, model)
    self._init_serving(options, packer)
    self._cls_heads = tuple(head.name for head in model.classification_heads)

  def _outputs(self, features: Mapping[str, tf.Tensor],
               where: str) -> Dict[str, tf.Tensor]:
    features = self._check_features(features, where)
    raw = self._run_model(features)
    outputs = raw["outputs"]
    result = {"mlm_logits": tf.cast(outputs["mlm_logits"], tf.float32)}
    for name in self._cls_heads:
      result[f"{name}_logits"] = tf.cast(outputs[name], tf.float32)
    result.update(self._attention_output(raw))
    return result

  @tf.function
  def serve(self, input_word_ids, input_mask, input_type_ids,
            masked_lm_positions) -> Dict[str, tf.Tensor]:
    """MLM logits at `masked_lm_positions` and each head's logits."""
    return self._outputs(
        dict(input_word_ids=input_word_ids, input_mask=input_mask,
             input_type_ids=input_type_ids,
             masked_lm_positions=masked_lm_positions), "serving_default")

  @tf.function
  def serve_examples(self, inputs) -> Dict[str, tf.Tensor]:
    """`serve` on serialized `tf.Example`s of the pre-training records.

    Model Garden's `MaskedLM.serve_examples` calls `serve(...,
    input_type_ids=features[self.input_word_ids_field])`: the word ids are
    fed as type ids, so the segment ids are ignored and any word id >= 2
    indexes past the 2-row type embedding. Here the parsed `segment_ids` are
    the type ids.
    """
    features = self._parse_examples(inputs, ["masked_lm_positions"])
    return self._outputs(features, "serve_examples")

  def _pack_masked(self, segments: Sequence[tf.Tensor],
                   names: Sequence[str]) -> Dict[str, tf.Tensor]:
    checks = [text_processing.assert_same_batch(
        segments[0], segments[1], names[0], names[1])
              ] if len(segments) == 2 else []
    with tf.control_dependencies(checks):
      tokens = [self.packer.tokenize_with_masks(s) for s in segments]
    features, checks = self.packer.pack(tokens, names)
    features = _with_checks(features, checks)
    is_mask = tf.equal(features["input_word_ids"], self.packer.mask_id)
    found = tf.where(is_mask)  # row-major: positions ascending per row
    batch = tf.shape(features["input_word_ids"], out_type=tf.int64)[0]
    positions = tf.RaggedTensor.from_value_rowids(
        tf.cast(found[:, 1], tf.int32), found[:, 0], nrows=batch)
    features["masked_lm_positions"] = positions.to_tensor(default_value=0)
    features["masked_lm_weights"] = tf.ones_like(
        positions, dtype=tf.float32).to_tensor(default_value=0.0)
    return features

  def _text_outputs(self, features: Dict[str, tf.Tensor],
                    where: str) -> Dict[str, tf.Tensor]:
    weights = features.pop("masked_lm_weights")
    result = self._outputs(features, where)
    log_probs = tf.nn.log_softmax(result["mlm_logits"], axis=-1)
    k = min(self.options.top_k, self.options.vocab_size)
    top = tf.math.top_k(log_probs, k=k)
    result.update(
        masked_lm_positions=features["masked_lm_positions"],
        masked_lm_weights=weights,
        top_k_ids=top.indices,
        top_k_tokens=self.packer.id_to_token(top.indices),
        top_k_log_probs=top.values)
    return result

  @tf.function
  def serve_text(self, text) -> Dict[str, tf.Tensor]:
    """Fill-mask: each "[MASK]" in `text` gets its top-k predictions.

    Outputs are per masked position (`masked_lm_positions`, ascending,
    zero-padded to the most masks in the batch; `masked_lm_weights` is 0 on
    padding).
    """
    return self._text_outputs(self._pack_masked([text], ["text"]),
                              "serve_text")

  @tf.function
  def serve_text_pair(self, text_a, text_b) -> Dict[str, tf.Tensor]:
    """`serve_text` on `[CLS] a [SEP] b [SEP]`; NSP logits are meaningful."""
    return self._text_outputs(
        self._pack_masked([text_a, text_b], ["text_a", "text_b"]),
        "serve_text_pair")

  @tf.function
  def preprocess_text(self, text) -> Dict[str, tf.Tensor]:
    """The model inputs `serve_text` builds from `text`."""
    return self._pack_masked([text], ["text"])

  def _text_signature(self, key: str):
    if key == "serve_text_pair":
      return self.serve_text_pair.get_concrete_function(
          text_a=_text_spec("text_a"), text_b=_text_spec("text_b"))
    return getattr(self, key).get_concrete_function(text=_text_spec("text"))


class SentencePredictionServing(_RealFormerServingMixin,
                                serving_modules.SentencePrediction):
  """GLUE export module: class probabilities, or the STS-B score."""

  TEXT_FUNCTIONS = ("serve_text", "preprocess_text")

  def __init__(self, params: serving_modules.SentencePrediction.Params,
               model: tf_keras.Model, options: ServingOptions,
               packer: Optional[text_processing.BertTextPacker] = None):
    if params.inputs_only:
      raise ValueError("params.inputs_only must be False: the signatures take "
                       "input_mask and input_type_ids.")
    if params.text_fields:
      raise ValueError("params.text_fields is Model Garden's tf.Example text "
                       "path; use serve_text instead.")
    super().__init__(params, model)
    self._init_serving(options, packer)

  def _outputs(self, features: Mapping[str, tf.Tensor],
               where: str) -> Dict[str, tf.Tensor]:
    features = self._check_features(features, where)
    raw = self._run_model(features)
    logits = tf.nest.flatten(raw["outputs"])[0]
    logits = tf.cast(logits, tf.float32)
    if self.options.labels is None:
      result = {"score": logits[:, 0]}
    else:
      class_ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
      result = {
          "logits": logits,
          "probabilities": tf.nn.softmax(logits, axis=-1),
          "class_ids": class_ids,
          "labels": tf.gather(tf.constant(list(self.options.labels)),
                              class_ids),
      }
    result.update(self._attention_output(raw))
    return result

  @tf.function
  def serve(self, input_word_ids, input_mask=None,
            input_type_ids=None) -> Dict[str, tf.Tensor]:
    """Probabilities (classification) or the score (regression)."""
    return self._outputs(
        dict(input_word_ids=input_word_ids, input_mask=input_mask,
             input_type_ids=input_type_ids), "serving_default")

  @tf.function
  def serve_examples(self, inputs) -> Dict[str, tf.Tensor]:
    """`serve` on serialized `tf.Example`s of the GLUE records."""
    return self._outputs(self._parse_examples(inputs), "serve_examples")

  def _pack(self, texts: Sequence[tf.Tensor],
            names: Sequence[str]) -> Dict[str, tf.Tensor]:
    checks = [text_processing.assert_same_batch(
        texts[0], texts[1], names[0], names[1])] if len(texts) == 2 else []
    with tf.control_dependencies(checks):
      tokens = [self.packer.tokenize(t) for t in texts]
    features, checks = self.packer.pack(tokens, names)
    return _with_checks(features, checks)

  @tf.function
  def serve_text_single(self, text) -> Dict[str, tf.Tensor]:
    return self._outputs(self._pack([text], ["text"]), "serve_text")

  @tf.function
  def serve_text_pair(self, text_a, text_b) -> Dict[str, tf.Tensor]:
    return self._outputs(
        self._pack([text_a, text_b], ["text_a", "text_b"]), "serve_text")

  @tf.function
  def preprocess_text_single(self, text) -> Dict[str, tf.Tensor]:
    return self._pack([text], ["text"])

  @tf.function
  def preprocess_text_pair(self, text_a, text_b) -> Dict[str, tf.Tensor]:
    return self._pack([text_a, text_b], ["text_a", "text_b"])

  def _text_signature(self, key: str):
    if self.options.text_pair:
      return getattr(self, f"{key}_pair").get_concrete_function(
          text_a=_text_spec("text_a"), text_b=_text_spec("text_b"))
    return getattr(self, f"{key}_single").get_concrete_function(
        text=_text_spec("text"))


class QuestionAnsweringServing(_RealFormerServingMixin,
                               serving_modules.QuestionAnswering):
  """SQuAD export module: span logits, and answers from raw text."""

  TEXT_FUNCTIONS = ("serve_text", "preprocess_text")

  def __init__(self, params: serving_modules.QuestionAnswering.Params,
               model: tf_keras.Model, options: ServingOptions,
               packer: Optional[text_processing.BertTextPacker] = None):
    super().__init__(params, model)
    self._init_serving(options, packer)
    if options.max_seq_length < options.max_query_length + 4:
      raise ValueError(
          f"max_seq_length={options.max_seq_length} leaves no room for the "
          f"context after max_query_length={options.max_query_length}.")

  def _logits(self, features: Mapping[str, tf.Tensor],
              where: str) -> Dict[str, tf.Tensor]:
    features = self._check_features(features, where)
    raw = self._run_model(features)
    start_logits, end_logits = tf.nest.flatten(raw["outputs"])
    result = {"start_logits": tf.cast(start_logits, tf.float32),
              "end_logits": tf.cast(end_logits, tf.float32)}
    result.update(self._attention_output(raw))
    return result

  @tf.function
  def serve(self, input_word_ids, input_mask=None,
            input_type_ids=None) -> Dict[str, tf.Tensor]:
    """Start and end logits, `[batch, seq_length]`."""
    return self._logits(
        dict(input_word_ids=input_word_ids, input_mask=input_mask,
             input_type_ids=input_type_ids), "serving_default")

  @tf.function
  def serve_examples(self, inputs) -> Dict[str, tf.Tensor]:
    """`serve` on serialized `tf.Example`s of the SQuAD records."""
    return self._logits(self._parse_examples(inputs), "serve_examples")

  def _windows(self, question, context):
    checks = [text_processing.assert_same_batch(
        question, context, "question", "context")]
    with tf.control_dependencies(checks):
      question_ids = self.packer.tokenize(question)
      context_tokens = self.packer.tokenize_context(context)
    checks = [
        text_processing.assert_has_tokens(question_ids, "question"),
        text_processing.assert_has_tokens(context_tokens["ids"], "context"),
    ]
    with tf.control_dependencies(checks):
      windows = self.packer.squad_windows(
          question_ids, context_tokens["ids"], self.options.max_query_length,
          self.options.doc_stride)
    return windows, context_tokens

  @tf.function
  def preprocess_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The model inputs (one row per doc-stride window) `serve_text` builds."""
    windows, _ = self._windows(question, context)
    return {k: (tf.cast(v, tf.int32) if v.dtype == tf.int64 else v)
            for k, v in windows.items()}

  @tf.function
  def serve_text(self, question, context) -> Dict[str, tf.Tensor]:
    """The best answer span of each question in its context.

    BERT's / squad_lib's selection over all doc-stride windows: the
    `n_best_size` best starts and ends of each window, spans inside the
    context, starting in their max-context window, at most
    `max_answer_length` tokens; the best start + end logit sum wins. v2.0: ""
    when the null score (min over windows of the [CLS] start + end logits)
    minus the best span score exceeds `null_score_diff_threshold`.

    Outputs, per question: `answer_text` (the original words, single-spaced,
    cut to the span's characters, as squad_lib's `get_final_text`; "" for no
    answer), `answer_start_token` / `answer_end_token` (inclusive indices into
    the context's WordPieces, -1 for no answer), `answer_start_byte` /
    `answer_end_byte` (UTF-8 byte span in `context`, end exclusive, -1 for no
    answer), `has_answer`, `span_score` (best start + end logit; -inf if no
    span is valid), `num_windows`; v2.0 also `null_score` and
    `null_score_diff` (what squad_lib writes to null_odds.json).
    """
    windows, context_tokens = self._windows(question, context)
    logits = self._logits(
        {k: windows[k] for k in ("input_word_ids", "input_mask",
                                 "input_type_ids")}, "serve_text")
    return self._best_answers(windows, context_tokens, logits)

  def _best_answers(self, windows, context_tokens, logits):
    o = self.options
    seq_length = o.max_seq_length
    k = min(o.n_best_size, seq_length)

    def in_top_k(values):
      # On the float32 logits (the order is the same in float64); ties: lower
      # index first, as Python's stable sort in squad_lib.
      top = tf.math.top_k(values, k=k).indices
      return tf.reduce_any(tf.one_hot(top, seq_length, on_value=True,
                                      off_value=False), axis=1)

    valid_start = in_top_k(logits["start_logits"])
    valid_end = in_top_k(logits["end_logits"])
    # float64 sums, as squad_lib's Python floats.
    start = tf.cast(logits["start_logits"], tf.float64)
    end = tf.cast(logits["end_logits"], tf.float64)

    positions = tf.range(seq_length, dtype=tf.int64)[None, :]
    offset = windows["context_offset"][:, None]
    in_context = (positions >= offset) & (
        positions < offset + windows["window_length"][:, None])
    valid_start = in_context & windows["max_context"] & valid_start
    valid_end = in_context & valid_end
    span = positions[0][None, :] - positions[0][:, None]  # end - start
    length_ok = (span >= 0) & (span < o.max_answer_length)
    candidates = (valid_start[:, :, None] & valid_end[:, None, :]
                  & length_ok[None, :, :])
    scores = tf.where(candidates, start[:, :, None] + end[:, None, :],
                      tf.constant(-float("inf"), tf.float64))
    flat = tf.reshape(scores, [-1, seq_length * seq_length])
    window_best = tf.reduce_max(flat, axis=1)
    window_arg = tf.argmax(flat, axis=1)

    num_windows = windows["num_windows"]
    by_example = tf.RaggedTensor.from_row_lengths(window_best, num_windows)
    best_score = tf.reduce_max(by_example, axis=1)
    best_window = (by_example.row_starts()
                   + tf.argmax(by_example.to_tensor(-float("inf")), axis=1))
    arg = tf.gather(window_arg, best_window)
    start_pos, end_pos = arg // seq_length, arg % seq_length
    has_span = best_score > -float("inf")
    window_start = tf.gather(windows["window_start"], best_window)
    offset = tf.gather(windows["context_offset"], best_window)
    token_start = tf.where(has_span, window_start + start_pos - offset, 0)
    token_end = tf.where(has_span, window_start + end_pos - offset, 0)

    if o.version_2_with_negative:
      null = tf.RaggedTensor.from_row_lengths(start[:, 0] + end[:, 0],
                                              num_windows)
      null_score = tf.reduce_min(null, axis=1)
      # As squad_lib's null odds: the null score alone when no span is valid.
      null_score_diff = tf.where(has_span, null_score - best_score,
                                 null_score)
      has_answer = has_span & (null_score_diff <= o.null_score_diff_threshold)
    else:
      has_answer = has_span

    text, byte_start, byte_end = self._answer_text(
        context_tokens, token_start, token_end)
    no = tf.constant(-1, tf.int64)
    result = {
        "answer_text": tf.where(has_answer, text, ""),
        "answer_start_token": tf.cast(tf.where(has_answer, token_start, no),
                                      tf.int32),
        "answer_end_token": tf.cast(tf.where(has_answer, token_end, no),
                                    tf.int32),
        "answer_start_byte": tf.cast(tf.where(has_answer, byte_start, no),
                                     tf.int32),
        "answer_end_byte": tf.cast(tf.where(has_answer, byte_end, no),
                                   tf.int32),
        "has_answer": has_answer,
        "span_score": tf.cast(best_score, tf.float32),
        "num_windows": tf.cast(num_windows, tf.int32),
    }
    if o.version_2_with_negative:
      result["null_score"] = tf.cast(null_score, tf.float32)
      result["null_score_diff"] = tf.cast(null_score_diff, tf.float32)
    return result

  def _answer_text(self, context_tokens, token_start, token_end):
    """Answer text as squad_lib's `get_final_text`, and its byte span.

    The original words the span touches, joined by single spaces (squad_lib
    joins `doc_tokens`), cut to the first and last WordPiece's characters.
    """
    ids = context_tokens["ids"]
    flat_start = ids.row_starts() + token_start
    flat_end = ids.row_starts() + token_end
    word_start = tf.gather(context_tokens["word_index"].flat_values,
                           flat_start)
    word_end = tf.gather(context_tokens["word_index"].flat_values, flat_end)
    first_cut = tf.gather(context_tokens["word_begin"].flat_values, flat_start)
    last_keep = tf.gather(context_tokens["word_end"].flat_values, flat_end)
    words = context_tokens["words"]
    words_begin = context_tokens["words_begin"]
    first_word = words.row_starts() + word_start
    last_word = words.row_starts() + word_end
    span_words = tf.gather(words.flat_values,
                           tf.ragged.range(first_word, last_word + 1))
    joined = tf.strings.reduce_join(span_words, axis=1, separator=" ")
    last_length = tf.cast(
        tf.strings.length(tf.gather(words.flat_values, last_word)), tf.int64)
    length = (tf.cast(tf.strings.length(joined), tf.int64)
              - (last_length - last_keep) - first_cut)
    text = tf.strings.substr(joined, first_cut, length)
    byte_start = tf.gather(words_begin.flat_values, first_word) + first_cut
    byte_end = tf.gather(words_begin.flat_values, last_word) + last_keep
    return text, byte_start, byte_end

  def _text_signature(self, key: str):
    return getattr(self, key).get_concrete_function(
        question=_text_spec("question"), context=_text_spec("context"))
