"""Shared helpers for the SQuAD tests: data paths, tiny configs, handmade data."""
import json
import os

from tests.helpers import shared_data

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def vocab_file() -> str:
  """BERT's uncased vocabulary, else the fixture one (tests needing any)."""
  return shared_data.vocab_file()


def dev_v11_file() -> str:
  """The real SQuAD v1.1 dev set; skips the test without it."""
  return shared_data.real(shared_data.SQUAD_DEV_V11)


def config_path(version: str) -> str:
  return os.path.join(_REPO_ROOT, "official_configs", "experiments", "squad",
                      f"{version}.yaml")


# A tiny RealFormer over the vocabulary in use (BERT's 30522 ids, or the
# fixture's).
TINY_ENCODER = dict(vocab_size=shared_data.vocab_size(vocab_file()),
                    hidden_size=32, num_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=128,
                    dropout_rate=0.0, attention_dropout_rate=0.0)


class Flags:
  """Stands in for absl FLAGS in `train_utils.parse_configuration`."""

  def __init__(self, **kwargs):
    self.__dict__.update(dict(tpu=None, tf_data_service=None,
                              params_override=None, config_file=None))
    self.__dict__.update(kwargs)

  def __contains__(self, key):
    return key in self.__dict__


def v2_dataset():
  """Handmade SQuAD v2.0 data: 4 answerable and 3 unanswerable questions."""
  context1 = ("Super Bowl 50 was won by the Denver Broncos, who beat the "
              "Carolina Panthers 24-10 at Levi's Stadium in Santa Clara.")
  context2 = ("The Normans were descended from Norse raiders and gave their "
              "name to Normandy, a region in France, in the 10th century.")

  def answerable(qid, question, context, text):
    start = context.index(text)
    return {"id": qid, "question": question, "is_impossible": False,
            "answers": [{"text": text, "answer_start": start}]}

  def unanswerable(qid, question, context, plausible):
    return {"id": qid, "question": question, "is_impossible": True,
            "answers": [],
            "plausible_answers": [{"text": plausible,
                                   "answer_start": context.index(plausible)}]}

  return {"version": "v2.0", "data": [
      {"title": "Super_Bowl_50", "paragraphs": [{"context": context1, "qas": [
          answerable("q1", "Who won Super Bowl 50?", context1,
                     "Denver Broncos"),
          answerable("q2", "Where was Super Bowl 50 played?", context1,
                     "Levi's Stadium"),
          unanswerable("q3", "Who lost Super Bowl 51?", context1,
                       "Carolina Panthers"),
      ]}]},
      {"title": "Normans", "paragraphs": [{"context": context2, "qas": [
          answerable("q4", "Who were the Normans descended from?", context2,
                     "Norse raiders"),
          answerable("q5", "In what country is Normandy?", context2,
                     "France"),
          unanswerable("q6", "Who gave their name to Brittany?", context2,
                       "The Normans"),
          unanswerable("q7", "In what century did the Normans leave France?",
                       context2, "10th century"),
      ]}]},
  ]}


def write_json(obj, path: str) -> str:
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f)
  return path


def one_paragraph(qas, context="Denver Broncos won Super Bowl 50 in 2016."):
  """SQuAD v1.1 JSON of one paragraph holding `qas`."""
  return {"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": qas}]}]}
