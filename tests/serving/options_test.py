"""Each head's export options: validation, and what `from_task` reads."""

import pytest

from realformer_tf.data import glue_tasks
from realformer_tf.serving import options as options_lib
from tests.helpers import serving as common

COMMON = dict(max_seq_length=16, max_position_embeddings=32,
              vocab_size=len(common.VOCAB), type_vocab_size=2)


def task_of(head, tmp_path):
  return common.make_config(head, str(tmp_path), str(tmp_path / "vocab.txt")
                            ).task


@pytest.mark.parametrize("kwargs, message", [
    (dict(return_attention="all"), r"return_attention='all'; expected one "
     r"of \('none', 'scores', 'probs'\)"),
    (dict(max_seq_length=2), r"max_seq_length=2 must be in \[3, "
     r"max_position_embeddings=32\]"),
    (dict(max_seq_length=33), r"max_seq_length=33 must be in \[3, "),
])
def test_common_options_are_checked(kwargs, message):
  with pytest.raises(ValueError, match=message):
    options_lib.ServingOptions(**dict(COMMON, **kwargs))


def test_limits_are_inclusive():
  for length in (3, 32):
    options = options_lib.ServingOptions(**dict(COMMON, max_seq_length=length))
    assert options.max_seq_length == length


def test_masked_lm_options_take_top_k_only(tmp_path):
  task = task_of("pretraining", tmp_path)
  options = options_lib.MaskedLMOptions.from_task(task, COMMON, top_k=3)
  assert (options.top_k, options.max_seq_length) == (3, 16)
  assert options_lib.MaskedLMOptions.from_task(task, COMMON).top_k == 5
  with pytest.raises(ValueError, match="top_k=0 must be >= 1"):
    options_lib.MaskedLMOptions.from_task(task, COMMON, top_k=0)
  with pytest.raises(TypeError, match="null_score_diff_threshold"):
    options_lib.MaskedLMOptions.from_task(task, COMMON,
                                          null_score_diff_threshold=1.0)


@pytest.mark.parametrize("head, text_pair", [("sst2", False), ("stsb", True)])
def test_sentence_prediction_options_from_the_glue_task(tmp_path, head,
                                                        text_pair):
  options = options_lib.SentencePredictionOptions.from_task(
      task_of(head, tmp_path), COMMON)
  assert options.labels == glue_tasks.get_task(head).labels
  assert (options.labels is None) == (head == "stsb")
  assert options.text_pair == text_pair
  with pytest.raises(TypeError, match="top_k"):
    options_lib.SentencePredictionOptions.from_task(
        task_of(head, tmp_path), COMMON, top_k=5)


def test_sentence_prediction_options_reject_an_unknown_or_mismatched_task(
    tmp_path):
  task = task_of("sst2", tmp_path)
  task.model.num_classes = 3
  with pytest.raises(ValueError, match="task.model.num_classes=3, but sst2 "
                     "has 2"):
    options_lib.SentencePredictionOptions.from_task(task, COMMON)
  task.glue_task = ""
  with pytest.raises(ValueError, match="no task.glue_task"):
    options_lib.SentencePredictionOptions.from_task(task, COMMON)


@pytest.mark.parametrize("head", ["squad_v1", "squad_v2"])
def test_question_answering_options_from_the_task(tmp_path, head):
  task = task_of(head, tmp_path)
  task.null_score_diff_threshold = -1.5
  options = options_lib.QuestionAnsweringOptions.from_task(task, COMMON)
  assert options.null_score_diff_threshold == -1.5  # The run's.
  assert options.version_2_with_negative == (head == "squad_v2")
  assert (options.max_query_length, options.doc_stride) == (
      common.QUERY_LENGTH, common.DOC_STRIDE)
  assert (options.n_best_size, options.max_answer_length) == (
      task.n_best_size, task.max_answer_length)
  assert options_lib.QuestionAnsweringOptions.from_task(
      task, COMMON, null_score_diff_threshold=2.0
  ).null_score_diff_threshold == 2.0


def test_question_answering_lengths_leave_room_for_the_context():
  with pytest.raises(ValueError, match="max_seq_length=16 leaves no room for "
                     "the context"):
    options_lib.QuestionAnsweringOptions(**COMMON, max_query_length=13,
                                         doc_stride=4)
  with pytest.raises(ValueError, match="doc_stride=0 must be >= 1"):
    options_lib.QuestionAnsweringOptions(**COMMON, max_query_length=4,
                                         doc_stride=0)
