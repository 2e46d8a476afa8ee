r"""gpu_suite's Keras groups: Keras 3 on JAX, every row in one process.

`KERAS_ROWS` names the rows (keras-hub's `BertBackbone`, our
`RealFormerBackbone` variants, the long-sequence rows); `keras_child`
builds, compiles and times them interleaved, in `fit`
(`keras3_fit.FitSteps`) or in a bare `jax.jit` loop (`JitSteps`).
"""

import json
import sys
import time

import gpu_profile
import keras3_fit
import timing

# "auto" picks the Pallas kernel on a JAX GPU, so rows meant to measure the
# keras.ops reference say "reference".
_SUM = dict(residual_attention="sum", attention_implementation="reference")
_AUTO = dict(_SUM, score_dtype="auto")
_PALLAS = dict(_AUTO, attention_implementation="pallas")
# `*_spe`: `fit` with `compile(steps_per_execution=8)`; `*_fused`: the same
# in one dispatch (`realformer_tf.keras3.fused_steps`, our tasks' way);
# `*_scan`: 8 `train_step`s under `lax.scan` in one `jax.jit`, no `fit`.
# Each times `steps` calls of 8 steps and traces whole calls.
STEPS_PER_EXECUTION = 8
_SPE = dict(steps_per_execution=STEPS_PER_EXECUTION)
_BERT, _PAL = "keras-hub BertBackbone", '"sum", Pallas'
_FIT_SPE = f"fit with steps_per_execution={STEPS_PER_EXECUTION}"
_FUSED = f"{_FIT_SPE}, fused (one dispatch)"
_JIT = "its train_step in a bare jax.jit loop (no fit)"
_SCAN = (f"{STEPS_PER_EXECUTION} train_steps under lax.scan in one jax.jit "
         "(no fit)")
# name: (group, arch, backbone kwargs, build_mlm_model kwargs, what).
# Within a group the order is the priority when the budget runs short.
KERAS_ROWS = {
    "bert": ("keras", "bert", {}, {}, _BERT),
    "sum_pallas": ("keras", "realformer", _PALLAS, {},
                   '"sum", defaults on a JAX GPU (auto: bf16 scores, Pallas)'),
    "sum_pallas_fused": ("keras", "realformer", _PALLAS,
                         dict(_SPE, fused_steps=True), f"{_PAL}, {_FUSED}"),
    "bert_fused": ("keras", "bert", {}, dict(_SPE, fused_steps=True),
                   f"{_BERT}, {_FUSED}"),
    "sum_pallas_jit": ("keras", "realformer", _PALLAS, dict(loop="jit"),
                       f"{_PAL}, {_JIT}"),
    "sum_pallas_scan": ("keras", "realformer", _PALLAS, dict(loop="scan"),
                        f"{_PAL}, {_SCAN}"),
    "bert_scan": ("keras", "bert", {}, dict(loop="scan"), f"{_BERT}, {_SCAN}"),
    "sum_pallas_spe": ("keras", "realformer", _PALLAS, _SPE,
                       f"{_PAL}, {_FIT_SPE}"),
    "bert_spe": ("keras", "bert", {}, _SPE, f"{_BERT}, {_FIT_SPE}"),
    "bert_jit": ("keras", "bert", {}, dict(loop="jit"), f"{_BERT}, {_JIT}"),
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
    "bert_p0": ("keras", "bert", {}, dict(dropout=0.0), f"{_BERT}, dropout 0"),
    "sum_logits_bf16": ("keras", "realformer", _AUTO,
                        dict(logits_dtype="bfloat16"),
                        '"sum", "auto", reference, bfloat16 tied logits'),
    "long_ref": ("long", "realformer", _AUTO, {},
                 '"sum", "auto", reference attention, seq 4096 x 2'),
    "long_pallas": ("long", "realformer", _PALLAS, {},
                    '"sum", "auto", Pallas kernel, seq 4096 x 2'),
}
class JitSteps:
  """`model.train_step` under `jax.jit` in a plain Python loop: `fit` less
  its loop, on the state and batch `fit` hands `train_step` (donated, as in
  `fit`). `steps_per_call=N > 1` runs N steps in one dispatch under
  `jax.lax.scan` (`realformer_tf.keras3.fused_steps.scan_steps`); the state
  carries the dropout seeds, so these are the steps of N one-step calls.
  Called as `keras3_fit.FitSteps`: per-step seconds.
  """

  def __init__(self, model, seq, batch, steps_per_call=1):
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    from realformer_tf.keras3 import fused_steps  # pylint: disable=g-import-not-at-top
    ids, mask, labels = keras3_fit.mlm_inputs(seq, batch)
    data = ({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask},
            labels)
    model._symbolic_build(data_batch=data)  # pylint: disable=protected-access
    self._state = model._get_jax_state(  # pylint: disable=protected-access
        trainable_variables=True, non_trainable_variables=True,
        optimizer_variables=True, metrics_variables=True)
    n = self.steps_per_execution = steps_per_call
    step = model.train_step
    if n > 1:
      step = fused_steps.scan_steps(model.train_step)
      data = jax.tree.map(lambda a: np.stack([a] * n), data)
    self._step = jax.jit(step, donate_argnums=0)
    self.model, self._data = model, jax.device_put(data)
    self.dispatches, self.last_loss, self.last_losses = 0, None, None

  def _run(self):
    self._logs, self._state = self._step(self._state, self._data)
    self.dispatches += 1

  def _wait(self):
    import jax  # pylint: disable=g-import-not-at-top
    jax.block_until_ready(self._state)

  def programs(self):
    """Executables the jitted call compiled so far."""
    return self._step._cache_size()  # pylint: disable=protected-access

  def __call__(self, steps, every_step=True):
    """Per-step seconds, one entry per call, or (`every_step=False`) the
    pipelined seconds per step after the first call; `last_losses` holds
    the last call's `loss` log of each step (Keras' running mean)."""
    import jax  # pylint: disable=g-import-not-at-top
    n = self.steps_per_execution
    keras3_fit.check_steps(steps, n, every_step)
    times = [t / n for t in timing.waited(
        lambda: (self._run(), self._wait()), steps // n if every_step else 1)]
    if not every_step:
      times = timing.pipelined(self._run, self._wait, steps // n - 1) / n
    self.last_losses = [float(v) for v in jax.numpy.ravel(self._logs["loss"])]
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
  """Steps to trace: whole executions, at least `steps` and two."""
  return per_execution * max(2, -(-steps // per_execution))


def keras_child(names, shape, deadline, profile=()):
  """Builds, compiles and times Keras rows in this process; prints JSON.

  Per row: `ms` (median of steps each waited for), `pipelined_ms` (median
  over rounds of steps run as `fit` runs them), with the row in `profile` its
  `gpu_profile` summary. A row of N steps a call runs N times the steps and
  says `steps_per_execution` or `steps_per_call`; `steps` counts steps.
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
      results[name] = dict(error=timing.error(e))
    print(f"[{name}] {json.dumps(results[name])}", file=sys.stderr,
          flush=True)
  # What a timeout of this process still leaves the parent: the compiles.
  print(json.dumps(dict(device=device.device_kind, rows=results)), flush=True)
  step_estimate = None
  for r in range(shape["rounds"]):
    round_start = time.time()
    if r and step_estimate and time.time() + step_estimate > deadline:
      break
    for name in timing.alternate(fits, r):
      steps = shape["steps"] * fits[name].steps_per_execution
      try:
        times[name] += fits[name](steps)
        pipelined[name].append(fits[name](steps, every_step=False))
      except Exception as e:  # pylint: disable=broad-except
        results[name] = dict(error=timing.error(e))
        fits.pop(name)
    step_estimate = time.time() - round_start
  for name, fit in fits.items():
    per_execution = fit.steps_per_execution
    if times[name]:
      results[name].update(
          ms=timing.median_ms(times[name]),
          steps=len(times[name]) * per_execution,
          pipelined_ms=timing.median_ms(pipelined[name]),
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
        results[name]["profile_error"] = timing.error(e)
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  if long_rows and stats:
    for name in fits:
      results[name]["peak_mb"] = stats.get("peak_bytes_in_use", 0) / 2**20
  return dict(device=device.device_kind, rows=results)
