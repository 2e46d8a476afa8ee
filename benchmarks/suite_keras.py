r"""gpu_suite's Keras groups: Keras 3 `fit` on JAX, one process per group.

`KERAS_ROWS` names every Keras row (keras-hub's `BertBackbone`, our
`RealFormerBackbone` variants, the leads of issue 29, the long-sequence
rows); `keras_child` builds, compiles and times them, interleaved, with
`keras3_fit.FitSteps` (Keras' own `fit`), and traces the rows asked for
with `gpu_profile`.
"""

import json
import statistics
import sys
import time

import gpu_profile
import keras3_fit

# "auto" picks the Pallas kernel on a JAX GPU, so rows meant to measure the
# keras.ops reference say "reference".
_SUM = dict(residual_attention="sum", attention_implementation="reference")
_AUTO = dict(_SUM, score_dtype="auto")
_PALLAS = dict(_AUTO, attention_implementation="pallas")
# The `*_spe` rows' `compile(steps_per_execution=...)`: Keras' `fit` runs
# the callbacks and its loop's bookkeeping once per 8 steps (the compiled
# step is the same: `keras3_fit.FitSteps`); the `*_fused` rows run `fit`'s
# 8 steps in one dispatch (`realformer_tf.keras3.fused_steps`, our tasks'
# way), the `*_scan` rows 8 steps in one dispatch without `fit`
# (`JitSteps(steps_per_call=8)`). All time `steps` x 8
# steps a call, so they hold as many calls as the others hold steps, and
# trace whole calls (`profile_steps`).
STEPS_PER_EXECUTION = 8
_SPE = dict(steps_per_execution=STEPS_PER_EXECUTION)
# name: (group, arch, backbone kwargs, build_mlm_model kwargs, what).
# Within a group the order is the priority when the budget runs short.
KERAS_ROWS = {
    "bert": ("keras", "bert", {}, {}, "keras-hub BertBackbone"),
    "sum_pallas": ("keras", "realformer", _PALLAS, {},
                   '"sum", defaults on a JAX GPU (auto: bf16 scores, Pallas)'),
    # The product's way to one dispatch per 8 steps: our tasks' `fit` with
    # steps_per_execution=8 on JAX (`realformer_tf.keras3.fused_steps`),
    # Keras' data adapter and callbacks included.
    "sum_pallas_fused": ("keras", "realformer", _PALLAS,
                         dict(_SPE, fused_steps=True),
                         '"sum", Pallas, fit with steps_per_execution='
                         f"{STEPS_PER_EXECUTION}, fused (one dispatch)"),
    "bert_fused": ("keras", "bert", {}, dict(_SPE, fused_steps=True),
                   "keras-hub BertBackbone, fit with steps_per_execution="
                   f"{STEPS_PER_EXECUTION}, fused (one dispatch)"),
    # Issue 36: the GPU idles 30-38% of sum_pallas' pipelined step; these
    # split the host's share between `fit` and JAX's dispatch.
    "sum_pallas_jit": ("keras", "realformer", _PALLAS, dict(loop="jit"),
                       '"sum", Pallas, its train_step in a bare jax.jit '
                       "loop (no fit)"),
    # One dispatch per 8 steps (train_step under lax.scan in one jax.jit)
    # before steps_per_execution, which still dispatches each step: when
    # the budget runs short, the spe rows go first.
    "sum_pallas_scan": ("keras", "realformer", _PALLAS, dict(loop="scan"),
                        f'"sum", Pallas, {STEPS_PER_EXECUTION} train_steps '
                        "under lax.scan in one jax.jit (no fit)"),
    "bert_scan": ("keras", "bert", {}, dict(loop="scan"),
                  f"keras-hub BertBackbone, {STEPS_PER_EXECUTION} train_steps "
                  "under lax.scan in one jax.jit (no fit)"),
    "sum_pallas_spe": ("keras", "realformer", _PALLAS, _SPE,
                       '"sum", Pallas, fit with steps_per_execution='
                       f"{STEPS_PER_EXECUTION}"),
    "bert_spe": ("keras", "bert", {}, _SPE,
                 "keras-hub BertBackbone, fit with steps_per_execution="
                 f"{STEPS_PER_EXECUTION}"),
    "bert_jit": ("keras", "bert", {}, dict(loop="jit"),
                 "keras-hub BertBackbone, its train_step in a bare jax.jit "
                 "loop (no fit)"),
    "sum_auto": ("keras", "realformer", _AUTO, {},
                 '"sum", score_dtype="auto", keras.ops reference'),
    "sum_f32": ("keras", "realformer", dict(_SUM, score_dtype="float32"), {},
                '"sum", score_dtype="float32", reference'),
    "none": ("keras", "realformer",
             dict(residual_attention="none",
                  attention_implementation="reference"), {},
             'RealFormerBackbone("none"), reference'),
    "sum_logits_f32": ("keras", "realformer", _AUTO,
                       dict(logits_dtype="float32"),
                       '"sum", "auto", reference, float32 tied logits'),
    "sum_p0": ("keras", "realformer", _AUTO, dict(dropout=0.0),
               '"sum", "auto", reference, dropout 0'),
    "bert_p0": ("keras", "bert", {}, dict(dropout=0.0),
                "keras-hub BertBackbone, dropout 0"),
    "sum_logits_bf16": ("keras", "realformer", _AUTO,
                        dict(logits_dtype="bfloat16"),
                        '"sum", "auto", reference, bfloat16 tied logits'),
    "long_ref": ("long", "realformer", _AUTO, {},
                 '"sum", "auto", reference attention, seq 4096 x 2'),
    "long_pallas": ("long", "realformer", _PALLAS, {},
                    '"sum", "auto", Pallas kernel, seq 4096 x 2'),
}
def train_steps(model, data, n):
  """(step, its data): `model.train_step` and `data` (n = 1), or a step of
  n `train_step`s under `jax.lax.scan`, `(state, batches) -> (logs,
  state)`, and `data` stacked n deep (n copies; each log gets a leading
  axis of n)."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from realformer_tf.keras3 import fused_steps  # pylint: disable=g-import-not-at-top
  if n == 1:
    return model.train_step, data
  # The scan our tasks' fused `fit` runs, on batches stacked here.
  return (fused_steps.scan_steps(model.train_step),
          jax.tree.map(lambda a: np.stack([a] * n), data))


def train_step_args(model, seq, batch):
  """(state, data): what `fit` hands `model.train_step` for the benchmark's
  batch (the model built on it first)."""
  ids, mask, labels = keras3_fit.mlm_inputs(seq, batch)
  x = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}
  model._symbolic_build(data_batch=(x, labels))  # pylint: disable=protected-access
  state = model._get_jax_state(  # pylint: disable=protected-access
      trainable_variables=True, non_trainable_variables=True,
      optimizer_variables=True, metrics_variables=True)
  return state, (x, labels)


class JitSteps:
  """`model.train_step` under `jax.jit` in a plain Python loop: `fit` less
  its loop; with `steps_per_call=N`, N steps in one dispatch.

  The same compiled program as `fit` runs (`train_step_args`: the
  state and batch `fit` hands `train_step`; donated state, as `fit`'s
  `jax.jit`), on one batch already on the device. Against the same model's
  `fit` row it splits a step's time between Keras' loop (data adapter,
  callbacks, state bookkeeping) and the program with JAX's dispatch.

  `steps_per_call=N > 1` runs `train_step` N times inside one `jax.jit`
  under `jax.lax.scan` over N copies of the batch, as
  `realformer_tf.reproduce.keras3.train.Steps` does: one dispatch per N
  steps, which Keras 3.15's `steps_per_execution` does not give
  (`keras3_fit.FitSteps`). The state tuple `train_step` threads holds the
  dropout seed generators' states (non-trainable variables), so the scan
  runs the same steps as N calls of the one-step program
  (tests/benchmarks/suite_keras_test.py). Same call as
  `keras3_fit.FitSteps` with `steps_per_execution=N`: `steps` a multiple
  of N, per-step seconds (a call's over N).
  """

  def __init__(self, model, seq, batch, steps_per_call=1):
    import jax  # pylint: disable=g-import-not-at-top
    state, data = train_step_args(model, seq, batch)
    n = self.steps_per_execution = steps_per_call
    step, data = train_steps(model, data, n)
    self._step = jax.jit(step, donate_argnums=0)
    self.model = model
    self._state, self._data = state, jax.device_put(data)
    self.dispatches, self.last_loss, self.last_losses = 0, None, None

  def _run(self):
    logs, self._state = self._step(self._state, self._data)
    self.dispatches += 1
    return logs

  def lower(self):
    """The jitted call lowered for this state and data (not run)."""
    return self._step.lower(self._state, self._data)

  def programs(self):
    """Executables the jitted call compiled so far."""
    return self._step._cache_size()  # pylint: disable=protected-access

  def __call__(self, steps, every_step=True):
    """Per-step seconds, one entry per call, or (`every_step=False`) the
    pipelined seconds per step after the first call, as `FitSteps`;
    `last_losses` holds the last call's `loss` log of each step."""
    import jax  # pylint: disable=g-import-not-at-top
    n = self.steps_per_execution
    keras3_fit.check_steps(steps, n, every_step)
    times = []
    for _ in range(steps // n if every_step else 1):
      start = time.perf_counter()
      logs = self._run()
      jax.block_until_ready(self._state)
      times.append((time.perf_counter() - start) / n)
    if not every_step:
      start = time.perf_counter()
      for _ in range(steps // n - 1):
        logs = self._run()
      jax.block_until_ready(self._state)
      times = (time.perf_counter() - start) / (steps - n)
    # Keras' loss log is its loss tracker's running mean (the state's
    # metrics variables), so a step's entry averages it with the steps
    # before since the last `reset_metrics`.
    self.last_losses = [float(v) for v in jax.numpy.ravel(logs["loss"])]
    self.last_loss = self.last_losses[-1]
    return times


def steps_per_call(name):
  """Steps a row's timed call runs: `steps_per_execution` for `fit` rows,
  `STEPS_PER_EXECUTION` for the scan rows, else 1."""
  _, _, _, build, _ = KERAS_ROWS[name]
  if build.get("loop") == "scan":
    return STEPS_PER_EXECUTION
  return build.get("steps_per_execution", 1)


def profile_steps(steps, per_execution):
  """Steps to trace: whole executions, at least `steps` and two executions
  (the pipelined time needs a second one), since the profile's figures are
  its kernels and wall time divided by the steps it traced."""
  return per_execution * max(2, -(-steps // per_execution))


def keras_child(names, shape, deadline, profile=()):
  """Builds, compiles and times Keras rows in this process; prints JSON.

  Per row: `ms`, the median of `fit` steps each waited for; `pipelined_ms`,
  the median over rounds of one `fit`'s steps run as `fit` runs them;
  with the row in `profile`, its `gpu_profile` summary. A row compiled with
  `steps_per_execution=N`, or a scan row of N steps a call
  (`steps_per_call`), runs N times the steps (`shape["steps"]` calls), its
  `ms` the median over calls of each one's seconds per step, traces whole
  calls (`profile_steps`) and says `steps_per_execution` or
  `steps_per_call`; `steps` counts steps either way.
  """
  import jax  # pylint: disable=g-import-not-at-top
  device = jax.devices()[0]
  results, fits, times, pipelined = {}, {}, {}, {}
  long_rows = all(KERAS_ROWS[n][0] == "long" for n in names)
  compile_estimate = None
  for name in names:
    group, arch, kwargs, build, _ = KERAS_ROWS[name]
    seq, batch = ((shape["long_seq"], shape["long_batch"]) if group == "long"
                  else (shape["seq"], shape["batch"]))
    remaining = deadline - time.time()
    reserve = 3 if shape["smoke"] else 25  # the timed rounds
    if compile_estimate and remaining < 1.3 * compile_estimate + reserve:
      results[name] = dict(skipped="time budget")
      continue
    build = dict(build)
    loop = build.pop("loop", "fit")
    try:
      start = time.time()
      model = keras3_fit.build_mlm_model(
          arch, layers=shape["layers"], hidden=shape["hidden"],
          heads=shape["heads"], inner=shape["inner"], seq=seq,
          backbone_kwargs=kwargs, **build)
      fit = (keras3_fit.FitSteps(model, seq, batch) if loop == "fit" else
             JitSteps(model, seq, batch, steps_per_call(name)))
      fit(2 * fit.steps_per_execution)  # compiles, then a warm execution
      compile_s = time.time() - start
      compile_estimate = max(compile_estimate or 0, compile_s)
      fits[name], times[name], pipelined[name] = fit, [], []
      results[name] = dict(compile_s=round(compile_s, 1))
    except Exception as e:  # pylint: disable=broad-except
      results[name] = dict(error=f"{type(e).__name__}: {e}"[:300])
    print(f"[{name}] {json.dumps(results[name])}", file=sys.stderr,
          flush=True)
  # What a timeout of this process still leaves the parent: the compiles.
  print(json.dumps(dict(device=device.device_kind, rows=results)), flush=True)
  step_estimate = None
  for r in range(shape["rounds"]):
    order = list(fits) if r % 2 == 0 else list(reversed(list(fits)))
    round_start = time.time()
    if r and step_estimate and time.time() + step_estimate > deadline:
      break
    for name in order:
      steps = shape["steps"] * fits[name].steps_per_execution
      try:
        times[name] += fits[name](steps)
        pipelined[name].append(fits[name](steps, every_step=False))
      except Exception as e:  # pylint: disable=broad-except
        results[name] = dict(error=f"{type(e).__name__}: {e}"[:300])
        fits.pop(name)
    step_estimate = time.time() - round_start
  for name, fit in fits.items():
    per_execution = fit.steps_per_execution
    if times[name]:
      results[name].update(
          ms=1000 * statistics.median(times[name]),
          steps=len(times[name]) * per_execution,
          pipelined_ms=1000 * statistics.median(pipelined[name]),
          loss=fit.last_loss)
      if per_execution > 1:
        results[name]["steps_per_call" if isinstance(fit, JitSteps) else
                      "steps_per_execution"] = per_execution
      # A fused row's proof that it fused: its train function's program
      # calls over every fit so far, and steps run one at a time (none).
      function = getattr(fit.model, "train_function", None)
      if isinstance(getattr(function, "dispatches", None), int):
        results[name].update(fused_dispatches=function.dispatches,
                             single_steps=function.single_steps)
    if name in profile and time.time() < deadline - 5:
      try:
        results[name]["profile"] = gpu_profile.profile_jax(
            lambda n, fit=fit: fit(n, every_step=False),
            profile_steps(shape["profile_steps"], per_execution),
            gpu_profile.save_path(name))
      except Exception as e:  # pylint: disable=broad-except
        results[name]["profile_error"] = f"{type(e).__name__}: {e}"[:300]
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  if long_rows and stats:
    for name in fits:
      results[name]["peak_mb"] = stats.get("peak_bytes_in_use", 0) / 2**20
  return dict(device=device.device_kind, rows=results)
