"""The TF-free SQuAD v1.1 path (realformer_tf.data.squad_spans) against the
tf_keras face's (`data.squad` on squad_lib and tensorflow-text) and Model
Garden's port of the official evaluate-v1.1.py."""
import collections
import json

import numpy as np
import pytest

from official.nlp.tools import squad_evaluate_v1_1
from realformer_tf.data import squad
from realformer_tf.data import squad_json
from realformer_tf.data import squad_spans
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece
from tests.helpers import squad as common

# Short windows and queries: most contexts span several windows.
LENGTHS = dict(max_seq_length=64, doc_stride=16, max_query_length=12)
Result = collections.namedtuple("Result",
                                ["unique_id", "start_logits", "end_logits"])


def _both(path, is_training, num_questions=None):
  """(examples, our features, squad_lib's features, vocabulary)."""
  examples, _ = squad_json.read_squad_examples(path, is_training, False)
  examples = examples[:num_questions]
  vocab_file = common.vocab_file()
  tokenizer = squad.SquadTokenizer(vocab_file)
  if is_training:
    examples, _ = squad.drop_answers_without_tokens(examples, tokenizer, path)
  reference = []
  squad.convert_examples_to_features(examples, tokenizer, **LENGTHS,
                                     is_training=is_training,
                                     output_fn=reference.append)
  vocab = tokenization.load_vocab(vocab_file)
  ours = squad_spans.featurize(examples, wordpiece.WordPieceTokenizer(vocab),
                               **LENGTHS, is_training=is_training)
  return examples, ours, reference, vocab


def _assert_same_features(ours, reference):
  assert len(ours["token_ids"]) == len(reference)
  for f, ref in enumerate(reference):
    assert list(ours["token_ids"][f]) == ref.input_ids
    assert list(ours["segment_ids"][f]) == ref.segment_ids
    assert list(ours["padding_mask"][f]) == ref.input_mask
    assert ours["example_index"][f] == ref.example_index
    assert (ours["start_positions"][f], ours["end_positions"][f]) == (
        ref.start_position, ref.end_position)
    assert {i: int(w) for i, w in enumerate(ours["orig_index"][f])
            if w >= 0} == ref.token_to_orig_map
    assert {i for i, m in enumerate(ours["max_context"][f]) if m} == {
        i for i, m in ref.token_is_max_context.items() if m}


def _gold_dataset(tmp_path):
  """Handmade v1.1 data: punctuation, an accent, an answer inside a word."""
  context = ("The leader was John Smith (1895-1943). Café owners of "
             "Steve Smith's Japanese electronics industry met in 2016.")
  qas = [{"id": f"q{i}", "question": q, "answers": [
      {"text": t, "answer_start": context.index(t)}]}
         for i, (q, t) in enumerate([
             ("When was he born?", "1895"), ("Who led?", "John Smith"),
             ("Whose industry?", "Steve Smith"), ("Which country?", "Japan"),
             ("Owners of what?", "Café"), ("When did they meet?", "2016")])]
  return common.write_json(common.one_paragraph(qas, context),
                           str(tmp_path / "train.json"))


@pytest.mark.parametrize("is_training", [True, False])
def test_features_equal_squad_lib_on_handmade_data(tmp_path, is_training):
  _, ours, reference, _ = _both(_gold_dataset(tmp_path), is_training)
  _assert_same_features(ours, reference)
  assert ours["dropped"] == 0


@pytest.mark.parametrize("is_training", [True, False])
def test_features_equal_squad_lib_on_the_dev_set(is_training):
  _, ours, reference, _ = _both(common.dev_v11_file(), is_training, 400)
  assert len(reference) > 800  # Most questions span several windows.
  _assert_same_features(ours, reference)


def test_gold_logits_give_the_gold_answers(tmp_path):
  examples, ours, _, vocab = _both(_gold_dataset(tmp_path), True)
  positions = np.arange(LENGTHS["max_seq_length"])
  start = (positions == ours["start_positions"][:, None]) * 10.0
  end = (positions == ours["end_positions"][:, None]) * 10.0
  answers = squad_spans.predictions(examples, ours, start, end, vocab)
  # `final_text` trims "(1895-1943)." to the answer, "Smith's" to "Smith";
  # "Japan" is a part of the word "japanese": the whole word comes back.
  assert answers == {"q0": "1895", "q1": "John Smith", "q2": "Steve Smith",
                     "q3": "Japanese", "q4": "Café", "q5": "2016"}
  exact, f1 = squad_spans.evaluate(examples, answers)
  assert exact == pytest.approx(5 / 6)
  assert f1 == pytest.approx(5 / 6)


def test_predictions_equal_squad_lib_on_random_logits():
  examples, ours, reference, _ = _both(common.dev_v11_file(), False, 300)
  rng = np.random.default_rng(0)
  start = rng.normal(size=ours["token_ids"].shape).astype(np.float32)
  end = rng.normal(size=ours["token_ids"].shape).astype(np.float32)
  results = [Result(ref.unique_id, start[f].tolist(), end[f].tolist())
             for f, ref in enumerate(reference)]
  expected, _, _ = squad.postprocess_output(
      examples, reference, results, squad.SquadTokenizer(common.vocab_file()),
      squad_spans.N_BEST_SIZE, squad_spans.MAX_ANSWER_LENGTH, False)
  vocab = tokenization.load_vocab(common.vocab_file())
  assert squad_spans.predictions(examples, ours, start, end, vocab) == expected


def test_evaluate_equals_the_official_script():
  path = common.dev_v11_file()
  examples, _ = squad_json.read_squad_examples(path, False, False)
  rng = np.random.default_rng(1)
  answers = {}
  for e in examples:  # Exact, cut, padded, wrong and missing answers.
    text = e.answers[rng.integers(len(e.answers))]
    kind = rng.integers(5)
    if kind < 4:
      answers[e.qas_id] = [text, text[:len(text) // 2], f"the {text}!",
                           " ".join(e.doc_tokens[:3])][kind]
  with open(path) as f:
    dataset = json.load(f)["data"]
  expected = squad_evaluate_v1_1.evaluate(dataset, answers)
  exact, f1 = squad_spans.evaluate(examples, answers)
  assert 0.1 < exact < 0.9
  assert exact == pytest.approx(expected["exact_match"], abs=1e-12)
  assert f1 == pytest.approx(expected["final_f1"], abs=1e-12)


def test_lengths_that_leave_no_context_are_refused():
  with pytest.raises(ValueError, match="max_seq_length=15 leaves no room"):
    squad_spans.featurize([], None, 15, 4, 12, False)
