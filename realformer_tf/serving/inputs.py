"""Graph input guards and `tf.Example` parsing of the serving signatures: a bad
request fails with an `InvalidArgumentError` naming the signature, the input
and the limit, before the model runs."""

from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

import tensorflow as tf

from realformer_tf.serving import options as options_lib
from realformer_tf.serving import text_processing


def with_checks(tensors: Mapping[str, tf.Tensor],
                checks: Sequence[Any]) -> Dict[str, tf.Tensor]:
  """`tensors`, computed only after `checks` passed."""
  with tf.control_dependencies(list(checks)):
    return {k: tf.identity(v) for k, v in tensors.items()}


def check_ids(features: Mapping[str, tf.Tensor],
              options: options_lib.ServingOptions,
              where: str) -> Dict[str, tf.Tensor]:
  """Token-id `features` once their shapes, lengths and ids are valid for
  the model of `options`; `where` names the signature."""
  o = options
  word_ids = features["input_word_ids"]
  prefix = f"Invalid input to {where}: "
  checks = [tf.debugging.assert_equal(
      tf.shape(features[name]), tf.shape(word_ids),
      message=prefix + f"{name} and input_word_ids must have the same "
      "shape [batch, seq_length]") for name in ("input_mask",
                                                "input_type_ids")]
  # The other checks read the shape: after the shape checks, a wrong rank
  # gets the shape message (`control_dependencies` copies the list).
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
          tf.shape(features["masked_lm_positions"])[0], tf.shape(word_ids)[0],
          message=prefix + "masked_lm_positions and input_word_ids must "
          "have the same batch size"))
      bounds.append(("masked_lm_positions", seq_length, "the sequence length"))
    for name, bound, limit in bounds:
      checks += [
          tf.debugging.assert_non_negative(
              features[name], message=prefix + f"{name} must be >= 0"),
          tf.debugging.assert_less(
              features[name], bound,
              message=prefix + f"{name} must be < {limit}")]
  return with_checks(features, checks)


def parse_examples(serialized: tf.Tensor,
                   names: Mapping[str, str]) -> Dict[str, tf.Tensor]:
  """int32 `{key: feature names[key]}` of serialized `tf.Example`s, zero-padded
  to the longest; a failure is reported by batch position, not raw bytes."""
  spec = {f: tf.io.RaggedFeature(tf.int64) for f in names.values()}

  def parse(index, record):
    parsed = tf.io.parse_single_example(record, spec)
    return index, parsed, {f: tf.size(v) for f, v in parsed.items()}

  size = tf.size(serialized, out_type=tf.int64)
  empty = (tf.zeros([0], tf.int64),
           {f: tf.zeros([0, 0], tf.int64) for f in spec},
           {f: tf.zeros([0], tf.int32) for f in spec})
  found, parsed, lengths = tf.data.Dataset.from_tensor_slices(
      serialized).enumerate().map(parse).ignore_errors().padded_batch(
          tf.maximum(size, 1)).reduce(empty, lambda _, batch: batch)
  prefix = "Invalid input to serve_examples: "
  word_ids_name = names["input_word_ids"]
  checks = [
      tf.debugging.Assert(
          tf.equal(tf.size(found, out_type=tf.int64), size),
          [prefix + "`examples` holds a string that is not a serialized "
           f"tf.Example with int64 features {sorted(spec)} at batch "
           "positions",
           tf.sets.difference(tf.range(size)[None], found[None]).values],
          name="check_examples_parse"),
      tf.debugging.assert_positive(
          lengths[word_ids_name], message=prefix + "every example needs a "
          f"non-empty `{word_ids_name}` feature")]
  checks += [tf.debugging.assert_equal(
      lengths[names[key]], lengths[word_ids_name],
      message=(prefix + f"feature `{names[key]}` must have as many values "
               f"as `{word_ids_name}` in every example"))
             for key in ("input_mask", "input_type_ids")]
  return with_checks({k: tf.cast(parsed[f], tf.int32)
                      for k, f in names.items()}, checks)


def pack_texts(packer: text_processing.BertTextPacker,
               tokenize: Callable[[tf.Tensor], tf.RaggedTensor],
               text=None, text_a=None, text_b=None
               ) -> Tuple[Dict[str, tf.Tensor], Sequence[tf.RaggedTensor],
                          Sequence[str]]:
  """(features, tokens, input names) of `text` or the pair, packed once valid
  UTF-8 in equal batches."""
  if text_b is None:
    texts, names, checks = [text], ["text"], []
  else:
    texts, names = [text_a, text_b], ["text_a", "text_b"]
    checks = [text_processing.assert_same_batch(text_a, text_b, *names)]
  checks += [text_processing.assert_valid_utf8(t, name)
             for t, name in zip(texts, names)]
  with tf.control_dependencies(checks):
    tokens = [tokenize(t) for t in texts]
  features, checks = packer.pack(tokens, names)
  return with_checks(features, checks), tokens, names
