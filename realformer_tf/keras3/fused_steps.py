"""`steps_per_execution=N` as one dispatch of N training steps on JAX.

`model.train_function = FusedSteps(model)` after `compile` runs Keras' own
`train_step` N times under `jax.lax.scan` in one `jax.jit`.
"""

try:
  import jax
except ImportError:  # The TensorFlow and PyTorch backends run without jax.
  jax = None

import keras


def applies(model) -> bool:
  """Whether `model.fit` runs fused steps: Keras on JAX, `jit_compile`, not
  `run_eagerly`, `steps_per_execution` above 1."""
  return (keras.config.backend() == "jax" and model.steps_per_execution > 1
          and model.jit_compile and not model.run_eagerly)


# The step each kind of function runs (`Trainer.train_step`, `test_step`).
_STEPS = ("train", "test")


def _step_function(model, step):
  # As Keras' `make_train_function` / `make_test_function`: under Flax NNX
  # the unbound method.
  name = step + "_step"
  if keras.config.is_nnx_enabled():
    return lambda state, data: getattr(type(model), name)(model, state, data)
  return getattr(model, name)


def _state_shardings(model, step):
  """Keras' `out_shardings` for a train or test function (a test step's
  state has no optimizer variables), None without a distribution."""
  if keras.distribution.distribution() is None:
    return None
  trainable, non_trainable, optimizer, metrics = (
      model._get_state_sharding_spec())  # pylint: disable=protected-access
  if step == "train":
    return (None, (trainable, non_trainable, optimizer, metrics))
  return (None, (trainable, non_trainable, metrics))


def scan_steps(step_function):
  """`step_function(state, batch) -> (logs, state)` under `lax.scan`:
  `(state, stacked batches) -> (logs, state)`, logs stacked per step."""

  def body(state, batch):
    logs, state = step_function(state, batch)
    return state, logs

  def step(state, batches):
    state, logs = jax.lax.scan(body, state, batches)
    return logs, state

  return step


def _stacked_steps(step_function):
  """(state, batches) -> (last logs, state): the batches (a tuple) stacked
  inside the program, then `scan_steps`."""
  scan = scan_steps(step_function)

  def steps(state, batches):
    logs, state = scan(state, jax.tree.map(
        lambda *leaves: jax.numpy.stack(leaves), *batches))
    # Keras' unfused loop returns the last step's logs.
    return jax.tree.map(lambda log: log[-1], logs), state

  return steps


def _signature(batch):
  """A batch's structure with each array's shape and dtype: batches stack
  only if theirs are equal."""
  leaves, treedef = jax.tree.flatten(batch)
  return treedef, tuple((getattr(leaf, "shape", None),
                         getattr(leaf, "dtype", type(leaf)))
                        for leaf in leaves)


class FusedSteps:
  """Keras' `train_function(state, iterator) -> (logs, state)`, N steps
  one dispatch; with `step="test"`, its `test_function` (`evaluate`, and
  `fit`'s validation). `dispatches` and `single_steps` count the program
  calls: fused executions, and steps run one at a time."""

  def __init__(self, model, step="train"):
    if step not in _STEPS:
      raise ValueError(f"step={step!r}: one of {_STEPS}")
    if not applies(model):
      raise ValueError(
          "fused steps need Keras on JAX compiled with jit_compile, "
          "run_eagerly=False and steps_per_execution > 1; got backend "
          f"{keras.config.backend()!r}, jit_compile={model.jit_compile}, "
          f"run_eagerly={model.run_eagerly}, steps_per_execution="
          f"{model.steps_per_execution}")
    self._model = model
    step_function = _step_function(model, step)
    shardings = _state_shardings(model, step)
    self._one = jax.jit(step_function, donate_argnums=0,
                        out_shardings=shardings)
    self._fused = jax.jit(_stacked_steps(step_function), donate_argnums=0,
                          out_shardings=shardings)
    self.dispatches = self.single_steps = 0

  def __call__(self, state, iterator):
    # N read per call, as Keras reads it; another N compiles another scan.
    n = self._model.steps_per_execution
    # As Keras': the first batch's StopIteration ends the epoch.
    batches = [next(iterator)]
    try:
      while len(batches) < n:
        batches.append(next(iterator))
    except StopIteration:
      pass
    first = _signature(batches[0])
    if (len(batches) == n
        and all(_signature(b) == first for b in batches[1:])):
      self.dispatches += 1
      return self._fused(state, tuple(batches))
    for batch in batches:
      self.single_steps += 1
      logs, state = self._one(state, batch)
    return logs, state

