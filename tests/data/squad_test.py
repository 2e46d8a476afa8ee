"""SQuAD data: tensorflow-text adapter, TFRecords, post-processing (the JSON
checks: squad_json_test.py)."""
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import question_answering_dataloader as qa_dataloader
from official.nlp.tools import tokenization as mg_tokenization
from realformer_tf.data import output_sets
from realformer_tf.data import squad
from realformer_tf.data import squad_spans
from tests.helpers import shared_data
from tests.helpers import squad as common


@pytest.fixture(scope="module")
def tokenizer():
  return squad.SquadTokenizer(common.vocab_file())


def _words(pieces):
  """Whole words of WordPieces: a vocabulary without "1895" splits it."""
  words = []
  for piece in pieces:
    if piece.startswith("##"):
      words[-1] += piece[2:]
    else:
      words.append(piece)
  return words


def test_adapter_gives_squad_lib_strings_and_ids(tokenizer):
  # tensorflow-text BertTokenizer: lower-case, accents stripped, punctuation
  # split, WordPieces; ids are vocab line numbers.
  assert tokenizer.tokenize("Hello, naïve Broncos!") == [
      "hello", ",", "naive", "broncos", "!"]
  assert _words(tokenizer.tokenize("(1895-1943).")) == [
      "(", "1895", "-", "1943", ")", "."]
  assert tokenizer.tokenize("") == []
  # The WordPieces themselves depend on the vocabulary: squad_lib's.
  reference = mg_tokenization.FullTokenizer(common.vocab_file(),
                                            do_lower_case=True)
  for text in ("(1895-1943).", "Levi's Stadium in Santa Clara",
               "Süper Bowl, 10th-century Normandy"):
    assert tokenizer.tokenize(text) == reference.tokenize(text), text
  with open(common.vocab_file(), encoding="utf-8") as f:
    line = {token: i for i, token in enumerate(f.read().splitlines())}
  tokens = ["[CLS]", "[SEP]", "the", "[PAD]"]
  assert tokenizer.convert_tokens_to_ids(tokens) == [line[t] for t in tokens]
  assert line["[PAD]"] == 0
  # Batched priming and single calls agree.
  words = ["Levi's", "Stadium", "Süper", "Straße"]
  singles = [squad.SquadTokenizer(common.vocab_file()).tokenize(w)
             for w in words]
  tokenizer.prime(words)
  assert [tokenizer.tokenize(w) for w in words] == singles


def test_training_skips_answers_without_wordpieces(tmp_path, caplog):
  """A zero-width-space answer is a whitespace word but no WordPiece."""
  context = "Denver Broncos won \u200b Super Bowl 50 in 2016."
  path = common.write_json(common.one_paragraph([
      {"id": "good", "question": "Who won?",
       "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
      {"id": "zwsp", "question": "What is invisible?",
       "answers": [{"text": "\u200b", "answer_start": context.index("\u200b")}]},
  ], context), str(tmp_path / "train.json"))
  record = str(tmp_path / "train.tf_record")
  with caplog.at_level(logging.WARNING):
    _, _, meta = squad.write_features(
        path, squad.SquadTokenizer(common.vocab_file()), record,
        max_seq_length=32, doc_stride=16, max_query_length=8,
        version_2_with_negative=False, is_training=True)
  assert meta["num_skipped_answer_without_tokens"] == 1
  assert meta["train_data_size"] == 1
  assert "zwsp" in caplog.text
  for raw in tf.data.TFRecordDataset(record):
    feature = tf.train.Example.FromString(raw.numpy()).features.feature
    assert (feature["start_positions"].int64_list.value[0] <=
            feature["end_positions"].int64_list.value[0])


def test_bad_lengths():
  with pytest.raises(ValueError, match="leaves no room for the context"):
    squad_spans.validate_lengths(max_seq_length=67, doc_stride=128,
                           max_query_length=64)


@pytest.mark.parametrize("is_training,bad", [
    (True, dict(max_seq_length=128, max_query_length=200)),
    (True, dict(epochs=2.0)),  # Without --train_batch_size.
    (True, dict(epochs=0.0, train_batch_size=4)),
    (False, dict(eval_batch_size=0)),
    (True, dict(input_json="missing")),  # Fails while converting.
])
def test_failed_conversion_leaves_earlier_outputs_untouched(
    tmp_path, is_training, bad):
  source = common.write_json(common.v2_dataset(), str(tmp_path / "v2.json"))
  out = tmp_path / "out"
  args = dict(input_json=source, vocab_file=common.vocab_file(),
              output_dir=str(out), is_training=is_training,
              version_2_with_negative=True, max_seq_length=48, doc_stride=16,
              max_query_length=16, eval_batch_size=4)
  squad.convert(**args)
  before = {p.name: p.read_bytes() for p in out.iterdir()}
  record = squad.TRAIN_RECORD if is_training else squad.EVAL_RECORD
  assert before[record]
  if bad.get("input_json") == "missing":
    bad = dict(input_json=str(tmp_path / "missing.json"))
  with pytest.raises(ValueError):
    squad.convert(**dict(args, **bad))
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def _load(record, is_training, seq_length, batch_size):
  config = qa_dataloader.QADataConfig(
      input_path=record, is_training=is_training, seq_length=seq_length,
      global_batch_size=batch_size, drop_remainder=False)
  if is_training:
    config = config.replace(shuffle_buffer_size=1)
  dataset = qa_dataloader.QuestionAnsweringDataLoader(config).load()
  if is_training:
    dataset = dataset.take(1)
  return list(dataset.as_numpy_iterator())


def test_v2_records_read_by_model_garden_loader(tmp_path):
  """The documented command, for v2.0 training and evaluation features."""
  source = common.write_json(common.v2_dataset(), str(tmp_path / "v2.json"))
  train_dir = str(tmp_path / "train")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  subprocess.run(
      [sys.executable, "-m", "realformer_tf.data.squad",
       f"--input_json={source}", f"--vocab_file={common.vocab_file()}",
       f"--output_dir={train_dir}", "--version_2_with_negative",
       "--max_seq_length=48", "--doc_stride=16", "--max_query_length=16",
       "--is_training", "--epochs=2", "--train_batch_size=4"],
      check=True, env=env, capture_output=True)
  with open(os.path.join(train_dir, squad.TRAIN_META)) as f:
    meta = json.load(f)
  assert meta["num_questions"] == 7 and meta["num_unanswerable"] == 3
  assert meta["num_skipped_answer_not_found"] == 0
  assert meta["vocab_size"] == shared_data.vocab_size(common.vocab_file())
  assert meta["vocab_sha256"] == output_sets.file_sha256(common.vocab_file())
  n = meta["train_data_size"]
  # Contexts of 21-24 words fit in one 48-token window (3 question tokens
  # kept at most 16): one feature per question.
  assert n == 7
  x, y = _load(os.path.join(train_dir, squad.TRAIN_RECORD), True, 48, n)[0]
  assert set(x) == {"input_word_ids", "input_mask", "input_type_ids"}
  # The loader (BERT format) reads the positions; is_impossible is in the
  # records too (XLNet format and our checks read it).
  assert set(y) == {"start_positions", "end_positions"}
  records = [tf.train.Example.FromString(r.numpy()) for r in
             tf.data.TFRecordDataset(os.path.join(train_dir,
                                                  squad.TRAIN_RECORD))]
  y["is_impossible"] = np.array([
      r.features.feature["is_impossible"].int64_list.value[0]
      for r in records])
  # One shuffled batch of all features: reorder to the file's order.
  order = [next(i for i, r in enumerate(records) if list(
      r.features.feature["input_ids"].int64_list.value) == list(ids))
           for ids in x["input_word_ids"]]
  y["is_impossible"] = y["is_impossible"][order]
  assert x["input_word_ids"].shape == (n, 48)
  vocab = squad.SquadTokenizer(common.vocab_file()).vocab
  assert np.all(x["input_word_ids"][:, 0] == vocab.index("[CLS]"))
  # Unanswerable: target [CLS] (0, 0), is_impossible 1; the others point at
  # their answer's WordPieces.
  answers = sorted(
      " ".join(vocab[t] for t in ids[s:e + 1])
      for ids, s, e, imp in zip(x["input_word_ids"], y["start_positions"],
                                y["end_positions"], y["is_impossible"])
      if not imp)
  assert answers == ["denver broncos", "france", "levi ' s stadium",
                     "norse raiders"]
  impossible = y["is_impossible"] == 1
  assert impossible.sum() == 3
  assert np.all(y["start_positions"][impossible] == 0)
  assert np.all(y["end_positions"][impossible] == 0)
  with open(os.path.join(train_dir, squad.TRAIN_SCHEDULE)) as f:
    schedule = f.read()
  assert "train_steps: 4" in schedule  # ceil(7 x 2 / 4)

  eval_dir = str(tmp_path / "eval")
  meta = squad.convert(source, common.vocab_file(), eval_dir,
                       is_training=False, version_2_with_negative=True,
                       max_seq_length=48, doc_stride=16, max_query_length=16,
                       eval_batch_size=4)
  assert meta["eval_data_size"] == 7 and meta["num_padding_features"] == 1
  batches = _load(os.path.join(eval_dir, squad.EVAL_RECORD), False, 48, 4)
  assert [b[0]["unique_ids"].tolist() for b in batches] == [
      [1000000000 + i for i in range(4)], [1000000004 + i for i in range(4)]]
  assert "start_positions" not in batches[0][1]


def _long_paragraph():
  """A dev paragraph of 283 words and 5 questions (Warsaw), or a handmade one.

  Without the shared dev set: the first three paragraphs of the WikiText-format
  fixture (~240 words) and 5 questions.
  """
  dev = os.path.join(shared_data.DATA_DIR, shared_data.SQUAD_DEV_V11)
  if os.path.exists(dev):
    with open(dev) as f:
      return json.load(f)["data"][1]["paragraphs"][1]
  with open(os.path.join(shared_data.FIXTURE_DIR, shared_data.WIKITEXT_VALID),
            encoding="utf-8") as f:
    paragraphs = [l.strip() for l in f if l.strip() and "=" not in l]
  context = " ".join(paragraphs[:3])
  qas = [{"id": f"q{i}", "question": question, "answers": [
      {"text": answer, "answer_start": context.index(answer)}]}
         for i, (question, answer) in enumerate([
             ("Where does the River Alder rise?", "in the hills"),
             ("How long is the river?", "42 miles"),
             ("What did most of the mills grind?", "corn"),
             ("When was the worst flood?", "1894"),
             ("What was built along the river?", "a stone wall")])]
  return {"context": context, "qas": qas}


def test_long_context_windows_and_padding(tmp_path, tokenizer):
  """doc_stride windows over a long paragraph; padding to whole batches."""
  data = {"version": "1.1", "data": [
      {"title": "Long", "paragraphs": [_long_paragraph()]}]}
  source = common.write_json(data, str(tmp_path / "long.json"))
  examples, features, meta = squad.write_features(
      source, tokenizer, str(tmp_path / "eval.tf_record"), max_seq_length=64,
      doc_stride=32, max_query_length=16, version_2_with_negative=False,
      is_training=False, batch_size=16)
  assert len(examples) == 5
  per_question = {f.example_index for f in features}
  assert per_question == set(range(5))
  # Every context WordPiece is in exactly one max-context window.
  for i in range(5):
    max_context = sum(v for f in features if f.example_index == i
                      for v in f.token_is_max_context.values())
    n_doc_pieces = sum(len(tokenizer.tokenize(t))
                       for t in examples[i].doc_tokens)
    assert max_context == n_doc_pieces
  records = sum(1 for _ in tf.data.TFRecordDataset(
      str(tmp_path / "eval.tf_record")))
  assert records % 16 == 0 and records - len(features) < 16
  assert meta["num_padding_features"] == records - len(features)


class _Result:

  def __init__(self, unique_id, start_logits, end_logits):
    self.unique_id = unique_id
    self.start_logits = start_logits
    self.end_logits = end_logits


def test_postprocess_projects_answers_onto_original_text(tmp_path, tokenizer):
  context = "The title went to the Denver Broncos. Later, Santa Clara's mayor…"
  data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": [
          {"id": "span", "question": "Who won?", "answers": [
              {"text": "Denver Broncos", "answer_start": 22}]},
          {"id": "null", "question": "Who lost?", "answers": []}]}]}]}
  source = common.write_json(data, str(tmp_path / "pp.json"))
  examples, features, _ = squad.write_features(
      source, tokenizer, str(tmp_path / "eval.tf_record"), max_seq_length=64,
      doc_stride=32, max_query_length=16, version_2_with_negative=True,
      is_training=False, batch_size=1)
  assert len(features) == 2
  results = []
  for f in features:
    start = np.full(64, -10.0)
    end = np.full(64, -10.0)
    if examples[f.example_index].qas_id == "span":
      # "denver" .. "broncos" then "." : "Broncos." must lose the full stop.
      s = f.tokens.index("denver")
      start[s], end[s + 1] = 5.0, 4.0
      start[0], end[0] = 1.0, 1.0  # null 2.0 < span 9.0
    else:
      s = f.tokens.index("santa")
      start[s], end[s + 3] = 2.0, 2.0  # "santa clara ' s"
      start[0], end[0] = 3.0, 2.5  # null 5.5 > span 4.0
    results.append(_Result(f.unique_id, start, end))
  predictions, nbest, null_odds = squad.postprocess_output(
      examples, features, results, tokenizer, n_best_size=5,
      max_answer_length=10, version_2_with_negative=True)
  assert predictions == {"span": "Denver Broncos", "null": ""}
  assert null_odds["span"] == pytest.approx(2.0 - 9.0)
  assert null_odds["null"] == pytest.approx(5.5 - 4.0)
  assert nbest["null"][1]["text"] == "Santa Clara's"
  # A threshold above the odds answers the second question too.
  predictions, _, _ = squad.postprocess_output(
      examples, features, results, tokenizer, n_best_size=5,
      max_answer_length=10, version_2_with_negative=True,
      null_score_diff_threshold=2.0)
  assert predictions["null"] == "Santa Clara's"
  # v1.1: always the best span.
  predictions, _, odds = squad.postprocess_output(
      examples, features, results, tokenizer, n_best_size=5,
      max_answer_length=10, version_2_with_negative=False)
  assert predictions == {"span": "Denver Broncos", "null": "Santa Clara's"}
  assert odds == {}
