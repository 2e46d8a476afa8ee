"""SQuAD v1.1 fine-tuning of a Keras 3 `RealFormerBackbone` on JAX, no
TensorFlow: BERT's span head (a start and an end logit per token, the mean of
their cross-entropies) over `squad_spans`' features, `keras3_glue`'s loop and
schedule, the official EM/F1 on dev. keras-hub has no span task for BERT.
"""

import functools
import time
from typing import Dict, List, Tuple

import keras
import numpy as np

from realformer_tf import keras3 as realformer_keras3
from realformer_tf.data import squad_json
from realformer_tf.data import squad_spans
from realformer_tf.data import wordpiece
from realformer_tf.reproduce import keras3_glue

TARGETS = ("start_positions", "end_positions")


@functools.lru_cache(maxsize=2)
def read(path: str, is_training: bool) -> List[squad_json.SquadExample]:
  """A SQuAD v1.1 file's examples, read and checked once a process."""
  return squad_json.read_squad_examples(path, is_training, False)[0]


@functools.lru_cache(maxsize=2)
def featurized(path: str, is_training: bool, vocab: Tuple[str, ...],
               lengths: Tuple[int, int, int]) -> Dict[str, np.ndarray]:
  """`read(path)`'s features over `vocab`, once a process (pure Python)."""
  return squad_spans.featurize(read(path, is_training),
                               wordpiece.WordPieceTokenizer(vocab), *lengths,
                               is_training=is_training)


def span_model(backbone: realformer_keras3.RealFormerBackbone) -> keras.Model:
  """[batch, seq, 2] start and end logits over `backbone`'s tokens."""
  inputs = {k: keras.Input((None,), dtype="int32", name=k)
            for k in keras3_glue.INPUTS}
  logits = keras.layers.Dense(
      2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
      name="span_logits")(backbone(inputs)["sequence_output"])
  return keras.Model(inputs, logits)


def _loss(logits, batch):
  return sum(keras.ops.mean(keras.losses.sparse_categorical_crossentropy(
      batch[target], logits[..., i], from_logits=True))
             for i, target in enumerate(TARGETS)) / 2


def finetune(backbone: realformer_keras3.RealFormerBackbone,
             files: Dict[str, str], vocab: Tuple[str, ...],
             lengths: Tuple[int, int, int], *, learning_rate: float,
             train_steps: int, batch_size: int, seed: int) -> Dict[str, float]:
  """Fine-tunes `backbone` (left unchanged) on `files["train"]` and scores
  `files["dev"]`: {"exact_match", "f1"} (fractions, the official script's),
  `fit_predict`'s training numbers, feature counts and `seconds`."""
  keras3_glue.check_backend()
  start = time.time()
  train = featurized(files["train"], True, vocab, lengths)
  dev = featurized(files["dev"], False, vocab, lengths)
  keras.utils.set_random_seed(seed)
  outputs, results = keras3_glue.fit_predict(
      span_model(backbone), _loss, train, {"dev": dev}, targets=TARGETS,
      learning_rate=learning_rate, train_steps=train_steps,
      batch_size=batch_size, seed=seed)
  examples = read(files["dev"], False)
  answers = squad_spans.predictions(examples, dev, outputs["dev"][..., 0],
                                    outputs["dev"][..., 1], vocab)
  results["exact_match"], results["f1"] = squad_spans.evaluate(examples,
                                                               answers)
  results.update(train_features=float(len(train["token_ids"])),
                 dev_features=float(len(dev["token_ids"])),
                 skipped_without_tokens=float(train["dropped"]),
                 seconds=time.time() - start)
  return results
