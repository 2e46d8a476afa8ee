"""The export modules in process, on a tiny GLUE model (no SavedModel).

End to end (every head exported, served in a fresh process and by
`saved_model_cli`) is export_test.py.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from official.core import task_factory
from realformer_tf.data import glue as glue_data
from realformer_tf.data import glue_tasks
from realformer_tf.serving import options as options_lib
from realformer_tf.serving import heads
from tests.helpers import serving as common

HEADS = {"pretraining": heads.MaskedLMServing,
         "sst2": heads.SentencePredictionServing,
         "stsb": heads.SentencePredictionServing,
         "squad_v1": heads.QuestionAnsweringServing}


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
  """(task config, Keras model) of a tiny SST-2 run."""
  root = tmp_path_factory.mktemp("sst2")
  config = common.make_config("sst2", str(root), common.write_vocab(
      str(root / "vocab.txt")))
  return config.task, task_factory.get_task(config.task).build_model()


def module_of(task, model, return_attention="none"):
  options = options_lib.SentencePredictionOptions.from_task(task, dict(
      max_seq_length=common.SEQ_LENGTH, max_position_embeddings=32,
      vocab_size=len(common.VOCAB), type_vocab_size=2,
      return_attention=return_attention))
  return heads.SentencePredictionServing(model, options)


def test_serve_equals_the_keras_model(sst2):
  task, model = sst2
  module = module_of(task, model)
  rng = np.random.RandomState(0)
  features = dict(
      input_word_ids=rng.randint(5, len(common.VOCAB), (3, 10)),
      input_mask=np.ones((3, 10)), input_type_ids=np.zeros((3, 10)))
  features = {k: tf.constant(v, tf.int32) for k, v in features.items()}
  out = module.serve(**features)
  logits = model(features, training=False).numpy()
  # A traced graph and eager Keras may order float32 sums differently
  # (1.4e-6 seen in a full run); 1e-5 as the other parity tests.
  np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
  np.testing.assert_allclose(out["probabilities"],
                             tf.nn.softmax(logits).numpy(), atol=1e-5)
  np.testing.assert_array_equal(out["class_ids"], logits.argmax(-1))
  labels = glue_tasks.get_task("sst2").labels
  assert [t.decode() for t in out["labels"].numpy()] == [
      labels[i] for i in logits.argmax(-1)]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="Invalid input to serving_default: input_word_ids "
                     "must be < vocab_size"):
    module.serve(**dict(features, input_word_ids=features["input_word_ids"]
                        + len(common.VOCAB)))


def test_text_signatures_follow_the_task(sst2):
  task, model = sst2
  assert module_of(task, model).TEXT_SIGNATURES == {
      "serve_text": ("serve_text", ("text",)),
      "preprocess_text": ("preprocess_text", ("text",))}


def test_attention_needs_an_encoder_that_returns_it(sst2):
  task, model = sst2  # Built without return_attention_scores.
  with pytest.raises(ValueError, match="The encoder has no 'residual_scores' "
                     "output: build it with return_attention_scores=True"):
    module_of(task, model, return_attention="scores")


def test_recorded_vocab_of_each_head(tmp_path):
  vocab_file = common.write_vocab(str(tmp_path / "vocab.txt"))
  recorded = {head: module.recorded_vocab(common.make_config(
      head, str(tmp_path / head), vocab_file).task)
              for head, module in HEADS.items()}
  assert recorded["pretraining"] == (vocab_file, None, "task.vocab_file")
  assert recorded["sst2"] == (vocab_file, True, glue_data.meta_data_path(
      os.path.join(str(tmp_path / "sst2"), "data"), "sst2"))
  assert recorded["stsb"] == (
      None, None, "<task>_meta_data.json next to the task's input_path")
  assert recorded["squad_v1"] == (vocab_file, True,
                                  "task.validation_data.vocab_file")

