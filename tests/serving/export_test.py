"""End-to-end export tests for every head.

One tiny run per head (pre-training, SST-2 classification, STS-B regression,
SQuAD v1.1, SQuAD v2.0) is built here (params.yaml via Model Garden's
`serialize_config`, a checkpoint written as Model Garden's trainer writes it,
a handmade vocabulary) and exported once per test session, even across
pytest-xdist workers (`served`: each head when a test first needs it). Then,
in a FRESH process per head (no Keras model in memory), the SavedModel is
loaded with `tf.saved_model.load` and run through `saved_model_cli run`, and
its outputs are compared with the in-memory Keras models (1e-5) and with the
training data code (token ids, SQuAD features and answers).
"""

import collections
import functools
import json
import os
import pickle
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from realformer_tf.data import glue_tasks
from realformer_tf.data import squad as squad_data
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from realformer_tf.serving import export
from tests.helpers import numpy_reference
from tests.helpers import serving as common

ATOL = 1e-5
# Attention output per head's export: covers the subclassed (pre-training) and
# the functional (GLUE) model paths.
ATTENTION = {"pretraining": "probs", "sst2": "scores", "stsb": "none",
             "squad_v1": "none", "squad_v2": "none"}
ID_KEYS = ["input_word_ids", "input_mask", "input_type_ids"]
CLS, SEP, MASK = 2, 3, 4

SQUAD_QAS = common.SQUAD_QAS
LONG = " ".join(["the film was fun and great"] * 8)
SST2_TEXTS = ("The movie was GREAT!", "a boring film", LONG,
              "Café naïve straße 😀 fun")
STSB_PAIRS = (("the dog sat on the mat", "a cat sat on the mat"),
              (LONG, "a dog"), ("a dog", LONG),
              (LONG, " ".join(["who won super bowl 50 ?"] * 6)))
# (words, indices of the words replaced by [MASK]); the last text is longer
# than the sequence (truncated after its last [MASK]).
LONG_MASKED = " ".join(["the cat sat on a mat ."] * 6)
MASKED_TEXTS = (("the dog sat on the mat", {2}),
                ("Who won Super Bowl 50 ?", {1, 4}),
                (LONG_MASKED, {1, 25}))


class Run:
  """One head: its model dir, in-memory model, requests and expected outputs."""

  def __init__(self, head: str, root: str):
    self.head = head
    self.model_dir, self.vocab_file, self.config, self.model = (
        common.make_model_dir(root, head))
    self.export_dir = os.path.join(root, f"{head}_export")
    self.tokenizer = tokenization.make_tokenizer(self.vocab_file)
    self.requests: Dict[str, Tuple[str, Dict[str, np.ndarray]]] = {}
    self.expected: Dict[str, Dict[str, Any]] = {}
    self.export_kwargs: Dict[str, Any] = {
        "return_attention": ATTENTION[head]}
    self.result = None
    self.outputs: Dict[str, Dict[str, Any]] = {}
    self.cli: Dict[str, Any] = {}

  def ids(self, text: str) -> List[int]:
    """Token ids of the training tokenizer."""
    return self.tokenizer.tokenize([text]).merge_dims(-2, -1).to_list()[0]

  def attention(self, features: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """Reference attention: a second encoder with the same weights."""
    choice = ATTENTION[self.head]
    if choice == "none":
      return {}
    key = {"scores": "residual_scores", "probs": "attention_scores"}[choice]
    encoder_config = self.config.task.model.encoder
    encoder_config.get().return_attention_scores = True
    try:
      encoder = mg_encoders.build_encoder(encoder_config)
    finally:
      encoder_config.get().return_attention_scores = False
    inputs = common.keras_inputs(features, ID_KEYS)
    encoder(inputs)
    encoder.set_weights(self.model.checkpoint_items["encoder"].get_weights())
    outputs = encoder(inputs, training=False)
    return {key: np.stack([t.numpy() for t in outputs[key]], axis=1)}


def random_features(rng: np.random.RandomState, batch: int,
                    seq: int) -> Dict[str, np.ndarray]:
  """Random ids with [CLS] first, padding at the end of row 0, two segments."""
  ids = rng.randint(5, len(common.VOCAB), size=(batch, seq)).astype(np.int32)
  ids[:, 0] = CLS
  mask = np.ones_like(ids)
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  if seq > 4:
    ids[0, -3:] = 0
    mask[0, -3:] = 0
    types[0, -3:] = 0
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


def serialize(features: Dict[str, np.ndarray], **extra) -> np.ndarray:
  """tf.Examples with the record feature names of this project."""
  names = {"input_word_ids": "input_ids", "input_mask": "input_mask",
           "input_type_ids": "segment_ids",
           "masked_lm_positions": "masked_lm_positions"}
  records = []
  for i in range(len(features["input_word_ids"])):
    feature = {
        names[k]: tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(x) for x in v[i]])) for k, v in features.items()}
    for k, v in extra.items():
      feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(x) for x in v[i]]))
    records.append(tf.train.Example(features=tf.train.Features(
        feature=feature)).SerializeToString())
  return np.array(records, dtype=object)


def pack_pair(run: Run, a: List[int], b: List[int]) -> List[int]:
  keep_a, keep_b = numpy_reference.truncated_lengths(len(a), len(b),
                                               common.SEQ_LENGTH - 3)
  return [CLS] + a[:keep_a] + [SEP] + b[:keep_b] + [SEP]


def padded(rows: List[List[int]], types: List[List[int]] = None
           ) -> Dict[str, np.ndarray]:
  n = len(rows)
  ids = np.zeros((n, common.SEQ_LENGTH), np.int32)
  mask = np.zeros_like(ids)
  type_ids = np.zeros_like(ids)
  for i, row in enumerate(rows):
    ids[i, :len(row)] = row
    mask[i, :len(row)] = 1
    if types is not None:
      type_ids[i, :len(row)] = types[i]
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=type_ids)


# ------------------------------------------------------------- pretraining --


def build_pretraining(run: Run) -> None:
  rng = np.random.RandomState(1)

  def reference(features):
    out = run.model(common.keras_inputs(features,
                                        ID_KEYS + ["masked_lm_positions"]),
                    training=False)
    ref = {"mlm_logits": out["mlm_logits"].numpy(),
           "next_sentence_logits": out["next_sentence"].numpy()}
    ref.update(run.attention(features))
    return ref

  for name, batch, seq in (("ids", 3, 20), ("ids_max_length", 1, 32)):
    features = random_features(rng, batch, seq)
    features["masked_lm_positions"] = rng.randint(
        0, seq, size=(batch, 4)).astype(np.int32)
    run.requests[name] = ("serving_default", features)
    run.expected[name] = reference(features)

  # tf.Example path; the second request differs only in its segment ids.
  features = random_features(rng, 2, 24)
  features["masked_lm_positions"] = rng.randint(
      1, 24, size=(2, 3)).astype(np.int32)
  other = dict(features, input_type_ids=(
      (1 - features["input_type_ids"]) * features["input_mask"]))
  for name, f in (("examples", features), ("examples_other_types", other)):
    run.requests[name] = ("serve_examples", {"examples": serialize(f)})
    run.expected[name] = reference(f)

  # Fill-mask text: word-level reference with the training tokenizer.
  rows, lengths = [], []
  for text, masked in MASKED_TEXTS:
    ids = []
    for i, word in enumerate(text.split()):
      ids += [MASK] if i in masked else run.ids(word)
    rows.append([CLS] + ids[:common.SEQ_LENGTH - 2] + [SEP])
    lengths.append(len(ids))
  features = padded(rows)
  positions = [np.flatnonzero(f == MASK) for f in features["input_word_ids"]]
  width = max(len(p) for p in positions)
  features["masked_lm_positions"] = np.array(
      [list(p) + [0] * (width - len(p)) for p in positions], np.int32)
  weights = np.array([[1.0] * len(p) + [0.0] * (width - len(p))
                      for p in positions], np.float32)
  texts = np.array([" ".join("[MASK]" if i in masked else w
                             for i, w in enumerate(text.split()))
                    for text, masked in MASKED_TEXTS], dtype=object)
  ref = reference(features)
  log_probs = tf.nn.log_softmax(ref["mlm_logits"]).numpy()
  ref.update(masked_lm_positions=features["masked_lm_positions"],
             masked_lm_weights=weights,
             top_k_ids=np.argsort(-log_probs, axis=-1)[..., :5],
             top_k_log_probs=-np.sort(-log_probs, axis=-1)[..., :5],
             num_truncated_tokens=np.array(
                 [max(0, n - (common.SEQ_LENGTH - 2)) for n in lengths],
                 np.int32))
  assert ref["num_truncated_tokens"][-1] > 0
  run.requests["text"] = ("serve_text", {"text": texts})
  run.expected["text"] = ref
  run.requests["preprocess"] = ("preprocess_text", {"text": texts})
  run.expected["preprocess"] = dict(
      {k: features[k] for k in ID_KEYS + ["masked_lm_positions"]},
      masked_lm_weights=weights)

  # Pair: [CLS] a [SEP] b [SEP], longest-first truncation.
  pairs = (("the [MASK] sat", "a cat"),
           ("the dog sat on the mat", " ".join(["who won super bowl"] * 10)))
  rows, types, cut = [], [], []
  for a, b in pairs:
    a_ids = []
    for word in a.split():
      a_ids += [MASK] if word == "[MASK]" else run.ids(word)
    row = pack_pair(run, a_ids, run.ids(b))
    cut.append(len(a_ids) + len(run.ids(b)) + 3 - len(row))
    first = row.index(SEP) + 1
    rows.append(row)
    types.append([0] * first + [1] * (len(row) - first))
  features = padded(rows, types)
  features["masked_lm_positions"] = np.array([[2], [0]], np.int32)
  run.requests["text_pair"] = ("serve_text_pair", {
      "text_a": np.array([a for a, _ in pairs], dtype=object),
      "text_b": np.array([b for _, b in pairs], dtype=object)})
  ref = reference(features)
  run.expected["text_pair"] = {
      "next_sentence_logits": ref["next_sentence_logits"],
      "mlm_logits": ref["mlm_logits"],
      "masked_lm_weights": np.array([[1.0], [0.0]], np.float32),
      "num_truncated_tokens": np.array(cut, np.int32)}
  assert cut[0] == 0 and cut[1] > 0

  # A 20,000-character text with an early [MASK]: served, the cut counted.
  run.requests["text_20k"] = ("serve_text", {
      "text": np.array(["the [MASK] " + "cat " * 4997], dtype=object)})
  run.expected["text_20k"] = {
      "masked_lm_positions": np.array([[2]], np.int32),
      "num_truncated_tokens": np.array([2 + 4997 - (common.SEQ_LENGTH - 2)],
                                       np.int32)}

  # A 100,000-character word: one [UNK], so nothing truncated; the loss is
  # counted (both were 0 until issue 30).
  run.requests["word_100k"] = ("serve_text", {
      "text": np.array(["the [MASK] " + "x" * 100000], dtype=object)})
  run.expected["word_100k"] = {
      "num_truncated_tokens": np.array([0], np.int32),
      "num_unknown_words": np.array([1], np.int32),
      "num_unknown_chars": np.array([100000], np.int32),
      "num_overlong_words": np.array([1], np.int32)}

  ids_request = run.requests["ids"][1]
  run.cli = {
      "signature": "serving_default",
      "inputs": {"input_exprs": ";".join(
          f"{k}={v.tolist()}" for k, v in ids_request.items())},
      "expected": {"mlm_logits": run.expected["ids"]["mlm_logits"]}}


# -------------------------------------------------------------------- GLUE --


def build_glue(run: Run) -> None:
  spec = glue_tasks.get_task(run.head)
  rng = np.random.RandomState(2)

  def reference(features):
    logits = run.model(common.keras_inputs(features, ID_KEYS),
                       training=False).numpy()
    if spec.is_regression:
      ref = {"score": logits[:, 0]}
    else:
      class_ids = logits.argmax(-1)
      ref = {"logits": logits,
             "probabilities": tf.nn.softmax(logits).numpy(),
             "class_ids": class_ids,
             "labels": np.array([spec.labels[i].encode() for i in class_ids],
                                dtype=object)}
    ref.update(run.attention(features))
    return ref

  for name, batch, seq in (("ids", 2, 12), ("ids_max_length", 1, 32)):
    features = random_features(rng, batch, seq)
    run.requests[name] = ("serving_default", features)
    run.expected[name] = reference(features)

  if spec.text_b is None:
    examples = [glue_tasks.GlueExample(t, None, 0, "test") for t in SST2_TEXTS]
    text_inputs = {"text": np.array(SST2_TEXTS, dtype=object)}
  else:
    examples = [glue_tasks.GlueExample(a, b, 0.0, "test")
                for a, b in STSB_PAIRS]
    text_inputs = {
        "text_a": np.array([a for a, _ in STSB_PAIRS], dtype=object),
        "text_b": np.array([b for _, b in STSB_PAIRS], dtype=object)}
  # The training pipeline's features (what the GLUE TFRecords hold).
  packed = glue_tasks.pack(examples, wordpiece.WordPieceTokenizer(
      tokenization.load_vocab(run.vocab_file)), common.SEQ_LENGTH)
  assert packed["num_truncated"] >= 1
  features = dict(input_word_ids=packed["token_ids"],
                  input_mask=packed["padding_mask"].astype(np.int32),
                  input_type_ids=packed["segment_ids"])
  run.requests["preprocess"] = ("preprocess_text", text_inputs)
  run.expected["preprocess"] = features
  if spec.text_b is None:
    lengths = [(len(run.ids(e.text_a)), 0) for e in examples]
    kept = [(min(a, common.SEQ_LENGTH - 2), 0) for a, _ in lengths]
  else:
    lengths = [(len(run.ids(e.text_a)), len(run.ids(e.text_b)))
               for e in examples]
    kept = [numpy_reference.truncated_lengths(a, b, common.SEQ_LENGTH - 3)
            for a, b in lengths]
  num_truncated = np.array([sum(n) - sum(k) for n, k in zip(lengths, kept)],
                           np.int32)
  assert np.count_nonzero(num_truncated) == packed["num_truncated"]
  run.requests["text"] = ("serve_text", text_inputs)
  run.expected["text"] = dict(reference(features),
                              num_truncated_tokens=num_truncated)
  run.requests["examples"] = ("serve_examples", {"examples": serialize(
      features, label_ids=np.zeros((len(examples), 1), np.int64))})
  run.expected["examples"] = {k: v for k, v in run.expected["text"].items()
                              if k != "num_truncated_tokens"}

  if spec.text_b is None:
    run.cli = {
        "signature": "serve_text",
        "inputs": {"input_exprs": f"text={json.dumps(list(SST2_TEXTS[:2]))}"},
        "expected": {k: v[:2] for k, v in run.expected["text"].items()
                     if k in ("probabilities", "attention_scores",
                              "residual_scores")}}
  else:
    # STS-B takes its vocabulary from the flag (GLUE runs without meta data).
    run.export_kwargs["vocab_file"] = run.vocab_file
    ids_request = run.requests["ids"][1]
    run.cli = {
        "signature": "serving_default",
        "inputs": {"input_exprs": ";".join(
            f"{k}={v.tolist()}" for k, v in ids_request.items())},
        "expected": run.expected["ids"]}


# ------------------------------------------------------------------- SQuAD --


RawResult = collections.namedtuple("RawResult",
                                   ["unique_id", "start_logits", "end_logits"])


def build_squad(run: Run) -> None:
  v2 = run.head == "squad_v2"
  task = run.config.task
  examples, features, tokenizer = common.squad_features(
      os.path.join(run.model_dir, "dev.json"), run.vocab_file, v2)
  assert len(features) > len(examples)  # Long contexts: several windows.
  arrays = dict(
      input_word_ids=np.array([f.input_ids for f in features], np.int32),
      input_mask=np.array([f.input_mask for f in features], np.int32),
      input_type_ids=np.array([f.segment_ids for f in features], np.int32))

  def logits(f):
    start, end = run.model(common.keras_inputs(f, ID_KEYS), training=False)
    return {"start_logits": start.numpy(), "end_logits": end.numpy()}

  reference = logits(arrays)
  results = [RawResult(f.unique_id, reference["start_logits"][i],
                       reference["end_logits"][i])
             for i, f in enumerate(features)]

  def answers(threshold):
    return squad_data.postprocess_output(
        examples, features, results, tokenizer, task.n_best_size,
        task.max_answer_length, v2, threshold)

  predictions, _, null_odds = answers(0.0)
  if v2:
    # A threshold halfway between two null odds: some questions get "" and
    # some an answer (the flag is exercised both ways), and none is a near tie.
    odds = sorted(null_odds.values())
    threshold = float((odds[len(odds) // 2 - 1] + odds[len(odds) // 2]) / 2)
    run.export_kwargs["null_score_diff_threshold"] = threshold
    predictions, _, null_odds = answers(threshold)
    assert "" in predictions.values()
    assert any(predictions.values())
  inputs = {"question": np.array([q for q, _ in SQUAD_QAS], dtype=object),
            "context": np.array([c for _, c in SQUAD_QAS], dtype=object)}
  run.requests["preprocess"] = ("preprocess_text", inputs)
  run.expected["preprocess"] = dict(
      arrays,
      example_index=np.array([f.example_index for f in features], np.int32),
      max_context=np.array(
          [[bool(f.token_is_max_context.get(p, False))
            for p in range(common.SEQ_LENGTH)] for f in features]))
  run.requests["text"] = ("serve_text", inputs)
  expected = {"answer_text": np.array(
      [predictions[e.qas_id].encode() for e in examples], dtype=object)}
  if v2:
    expected["null_score_diff"] = np.array(
        [null_odds[e.qas_id] for e in examples], np.float32)
  run.expected["text"] = expected
  run.squad_features = features

  # Contexts of one or two tokens (a short context could index before the
  # context when no span was valid).
  run.requests["short_context"] = ("serve_text", {
      "question": np.array(["who?", "who won super bowl 50 ?"], dtype=object),
      "context": np.array(["a", "the dog"], dtype=object)})
  run.expected["short_context"] = {"num_windows": np.array([1, 1], np.int32)}

  rng = np.random.RandomState(3)
  random = random_features(rng, 2, 16)
  run.requests["ids"] = ("serving_default", random)
  run.expected["ids"] = logits(random)
  run.requests["ids_max_length"] = ("serving_default", arrays)
  run.expected["ids_max_length"] = reference
  run.requests["examples"] = ("serve_examples", {"examples": serialize(
      arrays, unique_ids=np.array([[f.unique_id] for f in features]))})
  run.expected["examples"] = reference

  if v2:
    first = {k: v[:1].tolist() for k, v in arrays.items()}
    run.cli = {
        "signature": "serve_examples",
        "inputs": {"input_examples": "examples=[" + json.dumps({
            "input_ids": first["input_word_ids"][0],
            "input_mask": first["input_mask"][0],
            "segment_ids": first["input_type_ids"][0]}) + "]"},
        "expected": {k: v[:1] for k, v in reference.items()}}
  else:
    question, context = SQUAD_QAS[1]
    run.cli = {
        "signature": "serve_text",
        "inputs": {"input_exprs": f"question={json.dumps([question])};"
                                  f"context={json.dumps([context])}"},
        "expected": {"answer_text": expected["answer_text"][1:2]}}


BUILDERS = {"pretraining": build_pretraining, "sst2": build_glue,
            "stsb": build_glue, "squad_v1": build_squad,
            "squad_v2": build_squad}


# --------------------------------------------------------- bad input cases --


def bad_requests() -> Dict[str, Tuple[str, str, Dict]]:
  """name -> (head, signature, inputs) that must fail with a clear error."""
  ok = random_features(np.random.RandomState(4), 2, 8)
  mlm = dict(ok, masked_lm_positions=np.array([[1], [8]], np.int32))
  long = random_features(np.random.RandomState(5), 1, 33)
  too_big = dict(ok, input_word_ids=ok["input_word_ids"].copy())
  too_big["input_word_ids"][1, 1] = len(common.VOCAB)
  bad_mask = dict(ok, input_mask=ok["input_mask"] * 2)
  mismatched = serialize(ok)
  short = dict(ok, input_type_ids=ok["input_type_ids"][:, :-1])
  mismatched[1] = serialize(short)[1]
  texts = lambda *t: np.array(t, dtype=object)  # pylint: disable=unnecessary-lambda-assignment
  return {
      "wrong_dtype": ("sst2", "serving_default", dict(
          ok, input_word_ids=ok["input_word_ids"].astype(np.int64))),
      "wrong_rank": ("sst2", "serving_default", dict(
          ok, input_word_ids=ok["input_word_ids"][0])),
      "mismatched_batch": ("sst2", "serving_default", dict(
          ok, input_mask=ok["input_mask"][:1])),
      "too_long": ("stsb", "serving_default", long),
      "id_out_of_vocab": ("sst2", "serving_default", too_big),
      "mask_not_binary": ("squad_v1", "serving_default", bad_mask),
      "position_out_of_sequence": ("pretraining", "serving_default", mlm),
      "examples_mismatched_lengths": ("sst2", "serve_examples",
                                      {"examples": mismatched}),
      "empty_text": ("sst2", "serve_text", {"text": texts("fun", "")}),
      "blank_text": ("pretraining", "serve_text",
                     {"text": texts("  \t ", "the [MASK]")}),
      "pair_batch_mismatch": ("stsb", "serve_text", {
          "text_a": texts("a dog", "a cat"), "text_b": texts("a dog")}),
      "empty_context": ("squad_v2", "serve_text", {
          "question": texts("who?"), "context": texts("")}),
      # The [MASK] at word 40 is past the 30 tokens kept.
      "mask_truncated": ("pretraining", "serve_text", {"text": texts(
          "the [MASK]", " ".join("[MASK]" if i == 40 else w
                                 for i, w in enumerate(LONG_MASKED.split())))}),
      "mask_truncated_pair": ("pretraining", "serve_text_pair", {
          "text_a": texts("the [MASK] sat"),
          "text_b": texts(LONG_MASKED + " [MASK]")}),
      # Latin-1 "é"; a lone continuation byte; a cut 2-byte character.
      "invalid_utf8_text": ("sst2", "serve_text",
                            {"text": texts(b"fun", b"caf\xe9 fun")}),
      "invalid_utf8_pair": ("pretraining", "serve_text_pair", {
          "text_a": texts(b"the [MASK]", b"a cat"),
          "text_b": texts(b"a dog", b"\x80 dog")}),
      "invalid_utf8_context": ("squad_v1", "serve_text", {
          "question": texts(b"who?"), "context": texts(b"the dog \xc3")}),
      "examples_not_tf_example": ("sst2", "serve_examples", {
          "examples": np.array([serialize(ok)[0], b"\xff\xfe\x00 not a proto"],
                               dtype=object)}),
  }


# ---------------------------------------------------------------- fixtures --


def _popen(args: List[str]) -> subprocess.Popen:
  return subprocess.Popen(args, env=common.subprocess_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, cwd=common.REPO_ROOT)


def serve_head(head: str, root: str) -> Run:
  """Builds, exports and serves one head in a fresh process.

  One `saved_model_runner` process calls the head's requests, its bad
  requests and its `saved_model_cli run`; SQuAD v1.1 also runs the
  command line `python -m realformer_tf.serving.saved_model_cli` on a bad
  input, beside it. Returns the run without its Keras model (picklable).
  """
  run = Run(head, root)
  BUILDERS[head](run)
  run.result = export.export_model(run.model_dir, run.export_dir,
                                   **run.export_kwargs)
  requests = [(run.export_dir, name, signature, inputs)
              for name, (signature, inputs) in run.requests.items()]
  requests += [(run.export_dir, f"bad/{name}", signature, inputs)
               for name, (bad_head, signature, inputs)
               in bad_requests().items() if bad_head == head]
  run.cli_outdir = os.path.join(root, "cli")
  requests.append((run.export_dir, "cli", run.cli["signature"],
                   run.cli["inputs"], run.cli_outdir))
  requests_path = os.path.join(root, "requests.pkl")
  results_path = os.path.join(root, "results.pkl")
  with open(requests_path, "wb") as f:
    pickle.dump(requests, f)
  processes = {"runner": _popen([sys.executable, "-m",
                                 "tests.helpers.saved_model_runner",
                                 requests_path, results_path])}
  if head == "squad_v1":
    question, _ = SQUAD_QAS[0]
    processes["cli_bad"] = _popen(
        [sys.executable, "-m", "realformer_tf.serving.saved_model_cli", "run",
         "--dir", run.export_dir, "--tag_set", "serve",
         "--signature_def", "serve_text", "--input_exprs",
         f"question={json.dumps([question])};context=['']"])
  finished = {name: (p.communicate(timeout=600), p.returncode)
              for name, p in processes.items()}
  (_, runner_err), runner_rc = finished.pop("runner")
  assert runner_rc == 0, runner_err[-3000:]
  with open(results_path, "rb") as f:
    results = pickle.load(f)
  run.cli_result = results.pop("cli")
  run.bad = {name.split("/", 1)[1]: value.get("error")
             for name, value in results.items() if name.startswith("bad/")}
  run.outputs = {name: value for name, value in results.items()
                 if not name.startswith("bad/")}
  run.cli_bad = finished.get("cli_bad")
  run.max_answer_length = getattr(run.config.task, "max_answer_length", None)
  run.model = run.tokenizer = run.config = None
  return run


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """`served(head)`: the head's `serve_head`, built once per session (and
  across pytest-xdist workers), so that each test waits for its heads only."""
  cache = {}

  def get(head: str) -> Run:
    if head not in cache:
      cache[head] = common.build_once(tmp_path_factory, f"export_{head}",
                                      functools.partial(serve_head, head))
    return cache[head]

  return get


def assert_outputs(actual: Dict[str, Any], expected: Dict[str, Any],
                   where: str) -> None:
  assert "error" not in actual, f"{where}: {actual.get('error')}"
  for key, value in expected.items():
    assert key in actual, f"{where}: no output {key!r} ({sorted(actual)})"
    got = actual[key]
    value = np.asarray(value)
    assert got.shape == value.shape, f"{where}/{key}: {got.shape} vs " \
                                     f"{value.shape}"
    if value.dtype.kind in "fc":
      np.testing.assert_allclose(got, value, atol=ATOL, rtol=ATOL,
                                 err_msg=f"{where}/{key}")
    else:
      np.testing.assert_array_equal(got, value, err_msg=f"{where}/{key}")


# ------------------------------------------------------------------- tests --


@pytest.mark.parametrize("head", common.HEADS)
def test_fresh_process_outputs_equal_keras_and_training_pipeline(served, head):
  run = served(head)
  assert set(run.outputs) == set(run.requests)
  for name, expected in run.expected.items():
    assert_outputs(run.outputs[name], expected, f"{head}/{name}")


@pytest.mark.parametrize("head", common.HEADS)
def test_saved_model_cli_run_equals_keras(served, head):
  run = served(head)
  assert "error" not in run.cli_result, run.cli_result["error"][-3000:]
  outputs = {os.path.splitext(name)[0]: np.load(
      os.path.join(run.cli_outdir, name), allow_pickle=True)
             for name in os.listdir(run.cli_outdir)}
  assert_outputs(outputs, run.cli["expected"], f"saved_model_cli {head}")


@pytest.mark.parametrize("head", common.HEADS)
def test_signatures_and_custom_ops(served, head):
  # Every head packs with Model Garden's BertPackInputs (SQuAD's windows
  # too), which trims with tensorflow-text's RoundRobinTrimmer.
  text_ops = sorted(["CaseFoldUTF8", "NormalizeUTF8", "RegexSplitWithOffsets",
                     "WordpieceTokenizeWithOffsets", "TFText>RoundRobinTrim"])
  result = served(head).result
  expected = ["preprocess_text", "serve_examples", "serve_text",
              "serving_default"]
  if head == "pretraining":
    expected.insert(3, "serve_text_pair")
  assert result.signatures == expected, head
  assert result.max_seq_length == common.SEQ_LENGTH
  assert result.lower_case is True
  assert result.custom_ops == text_ops, head
  with open(os.path.join(served(head).export_dir, "assets", "vocab.txt")) as f:
    assert f.read().split("\n")[:-1] == common.VOCAB


def test_serve_examples_uses_segment_ids(served):
  """Model Garden's MaskedLM.serve_examples feeds word ids as type ids."""
  outputs = served("pretraining").outputs
  for key in ("mlm_logits", "next_sentence_logits"):
    difference = np.abs(outputs["examples"][key]
                        - outputs["examples_other_types"][key]).max()
    assert difference > 1e-3, key


def test_squad_answers_point_into_the_context(served):
  for head in ("squad_v1", "squad_v2"):
    out = served(head).outputs["text"]
    assert list(out["num_windows"]) == [
        sum(f.example_index == i for f in served(head).squad_features)
        for i in range(len(SQUAD_QAS))]
    for i, (_, context) in enumerate(SQUAD_QAS):
      text = out["answer_text"][i].decode()
      if not out["has_answer"][i]:
        assert text == "" and out["answer_start_byte"][i] == -1
        assert head == "squad_v2"
        continue
      start, end = out["answer_start_byte"][i], out["answer_end_byte"][i]
      # The byte span in the context; the text has single spaces, as
      # squad_lib joins words.
      assert " ".join(context.encode()[start:end].decode().split()) == text
      assert 0 <= out["answer_start_token"][i] <= out["answer_end_token"][i]
      assert (out["answer_end_token"][i] - out["answer_start_token"][i]
              < served(head).max_answer_length)
  v2 = served("squad_v2").outputs["text"]
  threshold = served("squad_v2").export_kwargs["null_score_diff_threshold"]
  np.testing.assert_array_equal(v2["has_answer"],
                                v2["null_score_diff"] <= threshold)
  np.testing.assert_allclose(v2["null_score_diff"],
                             v2["null_score"] - v2["span_score"], atol=1e-5)


@pytest.mark.parametrize("name, message", [
    ("wrong_dtype", "int32"),
    ("wrong_rank", "shape"),
    ("mismatched_batch", "input_mask and input_word_ids must have the same "
     "shape"),
    ("too_long", "exceeds the maximum of the model, 32 tokens"),
    ("id_out_of_vocab", f"input_word_ids must be < vocab_size="
     f"{len(common.VOCAB)}"),
    ("mask_not_binary", "input_mask values must be 0 or 1"),
    ("position_out_of_sequence", "masked_lm_positions must be < the "
     "sequence length"),
    ("examples_mismatched_lengths", "feature `segment_ids` must have as many "
     "values as `input_ids`"),
    ("empty_text", "`text` holds an empty string"),
    ("blank_text", "`text` holds an empty string"),
    ("pair_batch_mismatch", "`text_a` and `text_b` must have the same batch "
     "size"),
    ("empty_context", "`context` holds an empty string"),
    ("mask_truncated", "`text` has a [MASK] beyond the truncation point "
     "(max_seq_length=32 tokens, [CLS] and [SEP] included) at batch "
     "positions] [1]"),
    ("mask_truncated_pair", "`text_b` has a [MASK] beyond the truncation "
     "point"),
    ("examples_not_tf_example", "`examples` holds a string that is not a "
     "serialized tf.Example"),
    ("invalid_utf8_text", "`text` holds a string that is not valid UTF-8 at "
     "batch positions] [1]"),
    ("invalid_utf8_pair", "`text_b` holds a string that is not valid UTF-8 "
     "at batch positions] [1]"),
    ("invalid_utf8_context", "`context` holds a string that is not valid "
     "UTF-8 at batch positions] [0]"),
])
def test_bad_input_gives_clear_error(served, name, message):
  error = served(bad_requests()[name][0]).bad[name]
  assert error, f"no error for {name}"
  assert message in error, error[:2000]
  if name not in ("wrong_dtype", "wrong_rank"):
    assert error.startswith("InvalidArgumentError"), error[:300]


def test_saved_model_cli_bad_input_fails_with_message(served):
  (_, stderr), rc = served("squad_v1").cli_bad
  assert rc != 0
  assert "`context` holds an empty string" in stderr, stderr[-3000:]
