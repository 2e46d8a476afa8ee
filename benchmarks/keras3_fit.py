r"""The benchmarks' MLM training step on Keras 3, timed in Keras' own `fit`.

`build_mlm_model` (keras-hub's `BertBackbone` or our `RealFormerBackbone`,
an MLM loss on every 8th position through the tied token embedding, AdamW);
`FitSteps` runs it in `model.fit` as a user does; `make_step_timer` times it.
"""

import time

VOCAB = 30522
SIZES = {  # layers, hidden, heads, intermediate (the paper's Table 1)
    "small": (4, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}


def mlm_inputs(seq, batch):
  """Token ids, padding mask (the last 1/8 padded) and labels of every 8th
  position: one batch of `batch` x `seq`, the same on every call."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, VOCAB - 1, size=(batch, seq)).astype("int32")
  mask = np.ones_like(ids)
  mask[:, seq - seq // 8:] = 0
  labels = rng.integers(0, VOCAB, size=(batch, len(range(0, seq, 8))))
  return ids * mask, mask, labels.astype("int32")


def make_step_timer(every_step=True):
  """A Keras callback that times `fit` steps until their results are ready.

  It waits for an execution by converting its logs to NumPy (outputs of the
  executable that just ran) and never reads `Callback.model`, which on JAX
  syncs the whole training state into the model's variables. Keras calls
  batch callbacks once per execution of `steps_per_execution` steps, with
  its first and last step indices, so every figure is seconds per step.

  `every_step=True`: wait after every execution; `times` holds each one's
  seconds per step. False: wait after the first and the last only, so the
  ones between run as `fit` runs them; `pipelined` is their seconds per step.
  """
  import keras  # pylint: disable=g-import-not-at-top

  def wait(logs):
    keras.tree.map_structure(keras.ops.convert_to_numpy, logs or {})

  class StepTimer(keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.times, self.pipelined = [], None
      # Pipelined, Keras may run batch-end callbacks in its thread pool, as
      # for a user's `fit`; otherwise it waits for each execution's logs.
      self.async_safe = not every_step
      self._start = self._begin = self._first = None

    def on_train_batch_begin(self, batch, logs=None):
      self._begin = batch
      if every_step:
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
      last = batch == self.params["steps"] - 1
      if every_step:
        wait(logs)
        self.times.append((time.perf_counter() - self._start)
                          / (batch - self._begin + 1))
      elif self._first is None or last:
        wait(logs)
        if self._first is None:  # the end of the first execution
          self._first = (batch, time.perf_counter())
        else:
          first_batch, first_end = self._first
          self.pipelined = ((time.perf_counter() - first_end)
                            / (batch - first_batch))

  return StepTimer()


def build_mlm_model(arch, *, layers, hidden, heads, inner, seq, dropout=0.1,
                    policy="mixed_bfloat16", logits_dtype=None,
                    backbone_kwargs=None, jit_compile=True,
                    steps_per_execution=1, fused_steps=False):
  """The benchmark's MLM model on a Keras 3 backbone, compiled for `fit`.

  `arch` is "bert" (keras-hub's `BertBackbone`) or "realformer"
  (`RealFormerBackbone`, with `backbone_kwargs`), built under `policy`; the
  model maps the backbone's inputs to float32 logits of every 8th position
  against the tied token embedding (sparse cross-entropy, AdamW), in
  `logits_dtype` if given (else the backbone's output dtype).
  `steps_per_execution` and `jit_compile` go to `compile`; `fused_steps`
  runs each execution's steps in one dispatch on JAX
  (`realformer_tf.keras3.fused_steps`, what our tasks do).
  """
  import keras  # pylint: disable=g-import-not-at-top
  keras.config.set_dtype_policy(policy)
  keras.utils.set_random_seed(0)
  try:
    kwargs = dict(vocabulary_size=VOCAB, num_layers=layers, num_heads=heads,
                  hidden_dim=hidden, intermediate_dim=inner, dropout=dropout,
                  max_sequence_length=max(512, seq), **(backbone_kwargs or {}))
    if arch == "bert":
      import keras_hub  # pylint: disable=g-import-not-at-top
      backbone = keras_hub.models.BertBackbone(**kwargs)
    else:
      from realformer_tf import keras3  # pylint: disable=g-import-not-at-top
      backbone = keras3.RealFormerBackbone(**kwargs)
    every_8th = backbone.output["sequence_output"][:, ::8]
    if logits_dtype is not None:
      every_8th = keras.ops.cast(every_8th, logits_dtype)
    logits = backbone.token_embedding(every_8th, reverse=True)
    model = keras.Model(backbone.input, keras.layers.Activation(
        "linear", dtype="float32")(logits))
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True), jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    if fused_steps:
      from realformer_tf.keras3 import fused_steps as fused  # pylint: disable=g-import-not-at-top
      model.train_function = fused.FusedSteps(model)
  finally:
    keras.config.set_dtype_policy("float32")
  return model


def check_steps(steps, per_execution, every_step):
  """Refuses a step count that is not whole executions of `per_execution`
  steps or, pipelined, fewer than two executions and 3 steps."""
  n = per_execution
  if steps % n:
    raise ValueError(f"steps={steps}: not a multiple of the model's "
                     f"steps_per_execution={n} (a partial last execution "
                     "would be timed as a whole one)")
  if not every_step and steps < max(3, 2 * n):
    raise ValueError(f"steps={steps}: pipelined timing needs >= "
                     f"{max(3, 2 * n)} (two executions of {n})")


class FitSteps:
  """Runs `fit` on a repeated in-memory batch and times its steps.

  Each call is one `fit` of `steps` steps (`steps_per_epoch`, one epoch) over
  the same batch tiled `steps` times, as a user's in-memory arrays; the
  first call compiles. Returns the per-step seconds of that call.

  With `compile(steps_per_execution=N)`, `steps` (a multiple of N) run as
  `steps / N` executions: Keras runs its callbacks and bookkeeping once per
  execution; the compiled step is the same.
  """

  def __init__(self, model, seq, batch):
    import numpy as np  # pylint: disable=g-import-not-at-top
    ids, mask, labels = mlm_inputs(seq, batch)
    self._batch = batch
    self._arrays = (ids, mask, labels)
    self._tile = lambda a, n: np.concatenate([a] * n)
    self.model = model
    # Keras' Trainer.compile keeps it as an int attribute (1 by default).
    self.steps_per_execution = int(getattr(model, "steps_per_execution", 1))

  def __call__(self, steps, every_step=True):
    """Per-step seconds of one `fit` of `steps` steps (`every_step`: one
    entry per execution), or, with `every_step=False`, the pipelined
    seconds per step after the first execution (at least 3 steps and 2
    executions), as `make_step_timer` says."""
    check_steps(steps, self.steps_per_execution, every_step)
    ids, mask, labels = (self._tile(a, steps) for a in self._arrays)
    timer = make_step_timer(every_step)
    x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}
    history = self.model.fit(x, labels, batch_size=self._batch, epochs=1,
                             steps_per_epoch=steps, shuffle=False, verbose=0,
                             callbacks=[timer])
    self.last_loss = float(history.history["loss"][-1])
    return timer.times if every_step else timer.pipelined
