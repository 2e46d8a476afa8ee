"""GLUE fine-tuning of a Keras 3 `RealFormerBackbone` on JAX, no TensorFlow:
the paper's protocol as the tf_keras face's `realformer/glue` config, in a
jitted stateless loop, SQuAD's too (`fit_predict`; not `fit`: keras-hub's
`Task.fit` needs TensorFlow or grain for its data). The backbone's variables
are read, never written, so every grid point starts from the same weights.
"""

import functools
import time
from typing import Dict, Mapping, Tuple

import jax
import keras
import numpy as np

from realformer_tf import keras3 as realformer_keras3
from realformer_tf.data import glue_tasks
from realformer_tf.data import schedule
from realformer_tf.data import wordpiece

# Not decayed (Model Garden's LayerNorm and bias exclusions, by Keras 3 names).
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")
INPUTS = ("token_ids", "segment_ids", "padding_mask")
# Train steps per dispatch (one `lax.scan`).
STEPS_PER_EXECUTION = 64


class PaperSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """Model Garden's polynomial warm-up over polynomial decay, power 1: the
  rate rises linearly to the decay line's value at `warmup_steps`, then
  falls linearly to 0 at `train_steps`."""

  def __init__(self, peak: float, train_steps: int, warmup_steps: int):
    self.peak, self.train_steps = peak, train_steps
    self.warmup_steps = warmup_steps

  def __call__(self, step):
    step = keras.ops.cast(step, "float32")
    decayed = self.peak * (1.0 - keras.ops.minimum(keras.ops.maximum(
        step, self.warmup_steps), self.train_steps) / self.train_steps)
    if not self.warmup_steps:
      return decayed
    return decayed * keras.ops.minimum(step / self.warmup_steps, 1.0)


def check_backend() -> None:
  """Raises a ValueError unless Keras runs on JAX (the loops are JAX's)."""
  if keras.config.backend() != "jax":
    raise ValueError(
        f"The keras3 face trains on JAX; Keras' backend is "
        f"{keras.config.backend()!r}: set KERAS_BACKEND=jax.")


def metric_suffix(split: str) -> str:
  """"dev" -> "", "dev_matched" -> "_matched" (the tf_keras face's names)."""
  return split[len("dev"):]


@functools.lru_cache(maxsize=None)
def read_task(glue_dir: str, task: str, open_file=open):
  """A task's {split: examples}, read once a process: counted, then packed."""
  return glue_tasks.read_splits(glue_tasks.get_task(task), glue_dir,
                                open_file=open_file)


@functools.lru_cache(maxsize=4)
def packed(glue_dir: str, task: str, max_seq_length: int,
           vocab: Tuple[str, ...], open_file=open
           ) -> Dict[str, Dict[str, np.ndarray]]:
  """A task's packed splits, once a process (tokenizing is pure Python)."""
  tokenizer = wordpiece.WordPieceTokenizer(vocab)
  return {split: glue_tasks.pack(examples, tokenizer, max_seq_length)
          for split, examples in read_task(glue_dir, task, open_file).items()}


def _seeded(values, variables, seed: int):
  """`values` with every dropout generator's state restarted from `seed`."""
  rng = np.random.default_rng(seed)
  return [jax.numpy.asarray([rng.integers(2**31), 0], dtype=value.dtype)
          if "seed_generator" in variable.path else jax.numpy.copy(value)
          for value, variable in zip(values, variables)]


def fit_predict(model: keras.Model, loss, train: Mapping[str, np.ndarray],
                dev: Mapping[str, Mapping[str, np.ndarray]], *,
                targets: Tuple[str, ...], learning_rate: float,
                train_steps: int, batch_size: int, seed: int
                ) -> Tuple[Dict[str, np.ndarray], Dict[str, float]]:
  """Trains `model` (built after `keras.utils.set_random_seed(seed)`) for
  `train_steps` on `train`'s rows in a seeded order with the paper's AdamW
  and schedule, `loss(logits, batch)` over `INPUTS + targets`; then
  ({split: its float32 outputs}, {"train_steps", "train_loss_first"/"_last":
  the mean loss of the first and last tenth of the steps})."""
  steps, num_examples = train_steps, len(train[INPUTS[0]])
  optimizer = keras.optimizers.AdamW(
      learning_rate=PaperSchedule(learning_rate, steps,
                                  schedule.warmup_steps(steps)),
      weight_decay=0.01, epsilon=1e-7, global_clipnorm=1.0)
  optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
  optimizer.build(model.trainable_variables)

  def forward(trainable, non_trainable, batch, training):
    logits, non_trainable = model.stateless_call(
        trainable, non_trainable, {k: batch[k] for k in INPUTS},
        training=training)
    return logits.astype("float32"), non_trainable

  def step(state, batch):
    trainable, non_trainable, opt = state

    def loss_fn(trainable, non_trainable):
      logits, non_trainable = forward(trainable, non_trainable, batch, True)
      return loss(logits, batch), non_trainable

    (value, non_trainable), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(trainable, non_trainable)
    trainable, opt = optimizer.stateless_apply(opt, grads, trainable)
    return (trainable, non_trainable, opt), value

  run = jax.jit(lambda state, batches: jax.lax.scan(step, state, batches),
                donate_argnums=0)
  predict = jax.jit(lambda state, batch: forward(*state[:2], batch, False)[0])
  # Copies: the donated state must not be the backbone's own buffers.
  state = ([jax.numpy.copy(v.value) for v in model.trainable_variables],
           _seeded([v.value for v in model.non_trainable_variables],
                   model.non_trainable_variables, seed),
           [jax.numpy.copy(v.value) for v in optimizer.variables])
  rng = np.random.default_rng(seed)
  epochs_needed = -(-steps * batch_size // num_examples)
  order = np.concatenate([rng.permutation(num_examples)
                          for _ in range(epochs_needed)])
  order = order[:steps * batch_size].reshape(steps, batch_size)
  losses = []
  for first in range(0, steps, STEPS_PER_EXECUTION):
    index = order[first:first + STEPS_PER_EXECUTION]
    state, chunk = run(state, {k: train[k][index] for k in INPUTS + targets})
    losses.append(chunk)
  losses = np.concatenate([np.asarray(chunk) for chunk in losses])
  tenth = max(1, steps // 10)
  outputs = {}
  for split, arrays in dev.items():
    count = len(arrays[INPUTS[0]])
    # The last batch filled with its last row: one compiled shape.
    rows = np.minimum(np.arange(-(-count // batch_size) * batch_size),
                      count - 1).reshape(-1, batch_size)
    outputs[split] = np.concatenate([np.asarray(predict(
        state, {k: arrays[k][r] for k in INPUTS})) for r in rows])[:count]
  return outputs, {"train_steps": float(steps),
                   "train_loss_first": float(losses[:tenth].mean()),
                   "train_loss_last": float(losses[-tenth:].mean())}


def finetune(backbone: realformer_keras3.RealFormerBackbone,
             train: Mapping[str, np.ndarray],
             dev: Mapping[str, Mapping[str, np.ndarray]], *, task: str,
             learning_rate: float, train_steps: int,
             batch_size: int = schedule.PAPER_BATCH_SIZE, seed: int = 0
             ) -> Dict[str, float]:
  """Fine-tunes `backbone` (left unchanged) on GLUE `task` from `pack`'s
  arrays, `dev` by split name; `seed` fixes head, dropout and order. The
  paper's metrics of each dev split (`accuracy_matched`...), their
  `majority_class_*` baselines, `seconds` (compiling included) and
  `fit_predict`'s training numbers.
  """
  check_backend()
  spec = glue_tasks.get_task(task)
  start = time.time()
  keras.utils.set_random_seed(seed)
  model = realformer_keras3.RealFormerTextClassifier(
      backbone, num_classes=spec.num_classes, dropout=0.1)

  def loss(logits, batch):
    if spec.is_regression:
      return keras.ops.mean((logits[:, 0] - batch["labels"]) ** 2)
    return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(
        batch["labels"], logits, from_logits=True))

  outputs, results = fit_predict(
      model, loss, train, dev, targets=("labels",),
      learning_rate=learning_rate, train_steps=train_steps,
      batch_size=batch_size, seed=seed)
  for split, arrays in dev.items():
    suffix = metric_suffix(split)
    for name, value in {
        **glue_tasks.glue_metrics(spec.name, outputs[split], arrays["labels"]),
        **glue_tasks.majority_class_metrics(spec.name, arrays["labels"]),
    }.items():
      results[name + suffix] = value
  results["seconds"] = time.time() - start
  return results
