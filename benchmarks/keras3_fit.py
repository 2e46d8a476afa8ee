r"""The benchmarks' Keras 3 MLM model and Keras' own `fit`, timed.

`build_mlm_model` builds the training step every Keras 3 benchmark times
(keras-hub's `BertBackbone` or our `RealFormerBackbone`, an MLM loss on
every 8th position through the tied token embedding, AdamW); `FitSteps`
runs it in `model.fit` as a user does and `make_step_timer` times the steps.
`keras3_step.py` (per backend) and `gpu_suite.py` (`suite_keras`) use them.
"""

import time

VOCAB = 30522


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

  It waits for an execution by converting its logs to NumPy: they are
  outputs of the executable that just ran, so they are ready when it is.
  It never reads `Callback.model`: on JAX that property syncs the training
  state into the model's variables (keras/src/callbacks/callback.py:92-99,
  `jax_state_sync`, a Python loop over every variable) and the next step
  gathers it back (keras/src/backend/jax/trainer.py:451-460): host work a
  user's `fit` does not do once per step. The timer did that each waited
  step before: the waited `fit` figures of the H200 calls of 2026-11-27 and
  -28 (benchmarks/README.md) include it.
  Pipelined, the read would also run in Keras' thread pool and hand `fit`'s
  next step buffers its last step donated.

  With `compile(steps_per_execution=N)` Keras calls the batch callbacks once
  per execution of N steps, `on_train_batch_begin` with its first step's
  index and `on_train_batch_end` with its last
  (keras/src/backend/jax/trainer.py:448 and :479, the indices from
  keras/src/trainers/epoch_iterator.py:113-122), so the timer counts steps
  by those indices, never by calls: every figure is seconds per step.

  Args:
    every_step: True: wait at the end of every execution (a step, or N); its
      `times` hold one entry per execution, its seconds over its steps
      (dispatch included, none overlapping the next). False: wait only after
      the first and the last execution, so the ones between run as `fit`
      runs them, the host dispatching ahead of the device; its `pipelined`
      is their seconds per step (whole executions: steps N+1 to the last;
      what a user's epoch takes).
  """
  import keras  # pylint: disable=g-import-not-at-top

  def wait(logs):
    keras.tree.map_structure(keras.ops.convert_to_numpy, logs or {})

  class StepTimer(keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.times, self.pipelined = [], None
      # Pipelined: let Keras run the batch-end callbacks in its thread pool,
      # as it does for a user's `fit` without batch-end callbacks of their
      # own (keras/src/callbacks/callback_list.py:59-84: any callback that
      # overrides `on_train_batch_end` without `async_safe` turns that off,
      # and then every execution's logs become Python floats on the main
      # thread, a wait for the device before the next dispatch:
      # :194-198 and `_on_train_batch_end`'s `pythonify_logs`). With that
      # wait in, the fused `fit` ran 1.3 ms a step above the same steps
      # without `fit` on an H200 (2026-11-28).
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

  Args:
    arch: "bert" (keras-hub's `BertBackbone`) or "realformer"
      (`RealFormerBackbone`; `backbone_kwargs` picks its mode etc.).
    layers, hidden, heads, inner: The encoder's shape.
    seq: Sequence length (the position table is at least 512).
    dropout: The backbone's dropout rate.
    policy: Keras dtype policy the model is built under.
    logits_dtype: dtype of the tied-embedding logits' GEMM: None keeps the
      backbone's `sequence_output` dtype (what `token_embedding(x,
      reverse=True)` gives a user), else the hidden states are cast to it
      ("bfloat16", "float32") before the reverse embedding.
    backbone_kwargs: More arguments of the backbone.
    jit_compile: `compile(jit_compile=...)`.
    steps_per_execution: `compile(steps_per_execution=...)`: `fit` runs
      this many steps per execution, its callbacks once per execution
      (`FitSteps`).
    fused_steps: With `steps_per_execution` > 1 on JAX, `fit` runs each
      execution's steps in one dispatch
      (`realformer_tf.keras3.fused_steps`, what our tasks do), not Keras'
      dispatch a step.

  Returns:
    A compiled `keras.Model` from the backbone's inputs to float32 logits of
    every 8th position against the tied token embedding (sparse
    cross-entropy, AdamW), as keras-hub's masked LM heads tie them.
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
  """Refuses a step count the timers cannot time as whole executions of
  `per_execution` steps: not a multiple of it (a partial last execution
  would be timed as a whole one), or, pipelined (`every_step=False`),
  fewer than two executions and 3 steps (the time runs from the end of the
  first execution to the end of the last)."""
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

  A model compiled with `steps_per_execution=N` runs `steps` (a multiple
  of N) as `steps / N` executions: Keras 3.15's JAX trainer calls the same
  jitted one-step program N times in a Python loop per execution
  (`_make_function`, keras/src/backend/jax/trainer.py:210-258; the `jit`
  of `train_step` at :275-279), and runs the callbacks and its own
  bookkeeping (the `_jax_state` dict, the epoch iterator) once per
  execution instead of once per step. So N changes the host's work between
  steps, not the compiled program.
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
