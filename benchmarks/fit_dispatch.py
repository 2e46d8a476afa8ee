r"""What Keras' `fit` runs per step with `steps_per_execution`, on any machine.

Issue 36: `sum_pallas` keeps an H200 busy 62-70% of its pipelined step, so
the host sets its pace. `compile(steps_per_execution=N)` is Keras' knob for
that; this shows, without a GPU, what it changes. For one `fit` of `--steps`
steps of the benchmark's MLM model (`keras3_fit.build_mlm_model`) at each N
of `--steps_per_execution`, it counts, by wrapping the `jit` Keras' JAX
trainer compiles `train_step` with (keras/src/backend/jax/trainer.py:275):

  programs    executables that jitted step compiled (its `_cache_size()`)
  dispatches  calls of the compiled step (one per dispatch to the device)
  callbacks   `on_train_batch_end` calls (once per execution)
  module      the first 12 hex digits of sha256 of the step's StableHLO
              (`jax_hlo.lower_train_step`): the same text is the same program
  cache hits  with JAX's persistent compilation cache on
              (`JAX_COMPILATION_CACHE_DIR`), the compiles it answered during
              the first `fit`: a later N's step is the first one's program

and times `fit`'s pipelined seconds per step (`keras3_fit.FitSteps`) beside
the same step in a bare `jax.jit` loop (`suite_keras.JitSteps`) and, per
N > 1, `fit` through our fused train function
(`realformer_tf.keras3.fused_steps`, what our tasks run: N steps under
`jax.lax.scan`, one dispatch per execution) and N steps under `jax.lax.scan`
in one `jax.jit` without `fit` (`JitSteps` with `steps_per_call=N`); their
modules hold the steps in a `while` loop, counted as `while`. At a tiny
size on a CPU the step's compute is small, so those times are mostly host
work: Keras' loop per step against JAX's dispatch alone. They say where the
host's time goes, not what a GPU step takes.

Usage (CPU):
  KERAS_BACKEND=jax JAX_PLATFORMS=cpu python benchmarks/fit_dispatch.py \
      --models=bert,sum --steps=64 --steps_per_execution=1,8
"""

import argparse
import hashlib
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax_hlo  # pylint: disable=g-import-not-at-top,wrong-import-position
import keras3_fit  # pylint: disable=g-import-not-at-top,wrong-import-position
import suite_keras  # pylint: disable=g-import-not-at-top,wrong-import-position


class _CountingJit:
  """Within: Keras' JAX trainer's `jit` hands back the jitted function
  wrapped to count its calls; `jitted` keeps each (function, calls)."""

  def __enter__(self):
    from keras.src.backend.jax import trainer as jax_trainer  # pylint: disable=g-import-not-at-top
    self._module, self._jit = jax_trainer, jax_trainer.jit
    self.jitted = []
    real_jit, jitted = self._jit, self.jitted

    def counting_jit(fn, *args, **kwargs):
      compiled, calls = real_jit(fn, *args, **kwargs), [0]
      jitted.append((compiled, calls))

      def call(*call_args, **call_kwargs):
        calls[0] += 1
        return compiled(*call_args, **call_kwargs)

      return call

    jax_trainer.jit = counting_jit
    return self

  def __exit__(self, *exc):
    self._module.jit = self._jit


def fit_dispatches(model, seq, batch, steps):
  """Counts of one `fit` of `steps` steps of a compiled `model` (its first:
  it compiles): programs, dispatches, callbacks (see the module doc)."""
  from jax._src import monitoring  # pylint: disable=g-import-not-at-top
  fit = keras3_fit.FitSteps(model, seq, batch)
  hits = []
  listener = lambda event, **_: hits.append(event) if event.endswith(
      "/compilation_cache/cache_hits") else None
  monitoring.register_event_listener(listener)
  try:
    with _CountingJit() as jit:
      per_execution = fit(steps)  # a timer entry per end-of-execution call
  finally:
    monitoring.unregister_event_listener(listener)
  (compiled, calls), = jit.jitted  # fit compiles train_step alone
  return dict(programs=compiled._cache_size(),  # pylint: disable=protected-access
              dispatches=calls[0], callbacks=len(per_execution),
              cache_hits=len(hits))


def analyze(arch, backbone_kwargs, per_executions, *, steps, layers, hidden,
            heads, inner, seq, batch, rounds=3):
  """One row per N, one of the bare `jax.jit` loop and one per N > 1 of N
  steps under `lax.scan` in one `jax.jit`, for one model."""
  rows = []
  build = lambda n, **more: keras3_fit.build_mlm_model(
      arch, layers=layers, hidden=hidden, heads=heads, inner=inner, seq=seq,
      backbone_kwargs=backbone_kwargs, steps_per_execution=n, **more)
  for n in per_executions:
    if steps % n:
      raise ValueError(f"--steps={steps} is not a multiple of "
                       f"--steps_per_execution={n}")
    model = build(n)
    row = dict(way=f"fit, steps_per_execution={n}", **fit_dispatches(
        model, seq, batch, steps))
    row["module"] = _module_hash(
        jax_hlo.lower_train_step(model, seq, batch).as_text())
    row["pipelined_ms"] = _pipelined_ms(
        keras3_fit.FitSteps(model, seq, batch), steps, rounds)
    rows.append(row)
  for n in [n for n in per_executions if n > 1]:
    rows.append(_fused_row(build(n, fused_steps=True), n, steps=steps,
                           seq=seq, batch=batch, rounds=rounds))
  for n in [1] + [n for n in per_executions if n > 1]:
    rows.append(_jit_row(build(1), n, steps=steps, seq=seq, batch=batch,
                         rounds=rounds))
  return rows


def _fused_row(model, n, *, steps, seq, batch, rounds):
  """`fit` with `steps_per_execution=n` through our fused train function
  (`realformer_tf.keras3.fused_steps`, what our tasks run): its program
  calls and compiles over the first `fit`, its module (the `n` steps'
  `lax.scan`) and pipelined time."""
  fit = keras3_fit.FitSteps(model, seq, batch)
  callbacks = len(fit(steps))
  function = model.train_function
  state, data = jax_hlo.train_step_args(model, seq, batch)
  text = function._fused.lower(state, (data,) * n).as_text()  # pylint: disable=protected-access
  return dict(way=f"fit, steps_per_execution={n}, fused",
              programs=(function._fused._cache_size()  # pylint: disable=protected-access
                        + function._one._cache_size()),  # pylint: disable=protected-access
              dispatches=function.dispatches + function.single_steps,
              callbacks=callbacks, module=_module_hash(text), cache_hits="-",
              while_loops=_while_loops(text),
              pipelined_ms=_pipelined_ms(fit, steps, rounds))


def _jit_row(model, n, *, steps, seq, batch, rounds):
  """The bare `jax.jit` loop (`n` = 1) or `n` steps under `lax.scan` per
  call (`suite_keras.JitSteps`): its counts over one timed run of `steps`
  steps, its module's hash and `while` loops, its pipelined time."""
  jit = suite_keras.JitSteps(model, seq, batch, steps_per_call=n)
  text = jit.lower().as_text()
  jit(2 * n)  # compiles, then a warm call
  before = jit.dispatches
  jit(steps)
  row = dict(way=("train_step in a bare jax.jit loop" if n == 1 else
                  f"{n} train_steps under lax.scan in one jax.jit"),
             programs=jit.programs(), dispatches=jit.dispatches - before,
             callbacks=0, module=_module_hash(text), cache_hits="-",
             while_loops=_while_loops(text),
             pipelined_ms=_pipelined_ms(jit, steps, rounds))
  return row


def _module_hash(text):
  """The first 12 hex digits of sha256 of a module's StableHLO text."""
  return hashlib.sha256(text.encode()).hexdigest()[:12]


def _while_loops(text):
  return jax_hlo.count_ops(text)["ops"].get("while", 0)


def _pipelined_ms(run, steps, rounds):
  """Median over `rounds` of `run`'s pipelined ms per step (`FitSteps`,
  `JitSteps`)."""
  return 1000 * statistics.median(
      run(steps, every_step=False) for _ in range(rounds))


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--models", default="bert,sum",
                 help="bert (keras-hub BertBackbone) and/or sum "
                 "(RealFormerBackbone('sum'), reference attention).")
  p.add_argument("--steps", type=int, default=64)
  p.add_argument("--steps_per_execution", default="1,8")
  p.add_argument("--layers", type=int, default=1)
  p.add_argument("--hidden", type=int, default=32)
  p.add_argument("--heads", type=int, default=2)
  p.add_argument("--inner", type=int, default=64)
  p.add_argument("--seq", type=int, default=32)
  p.add_argument("--batch", type=int, default=2)
  p.add_argument("--rounds", type=int, default=3)
  args = p.parse_args()
  models = dict(bert=("bert", {}),
                sum=("realformer", dict(residual_attention="sum",
                                        attention_implementation="reference")))
  per_executions = [int(n) for n in args.steps_per_execution.split(",")]
  print(f"one fit of {args.steps} steps; {args.layers} x {args.hidden}, "
        f"seq {args.seq}, batch {args.batch}, mixed_bfloat16; pipelined: "
        f"median of {args.rounds}\n| model | way | programs | dispatches | "
        "callbacks | module | while | cache hits | pipelined ms / step |\n"
        "|---|---|---|---|---|---|---|---|---|")
  for name in args.models.split(","):
    if name not in models:
      sys.exit(f"--models: unknown {name!r}; known: {sorted(models)}")
    for r in analyze(*models[name], per_executions, steps=args.steps,
                     layers=args.layers, hidden=args.hidden, heads=args.heads,
                     inner=args.inner, seq=args.seq, batch=args.batch,
                     rounds=args.rounds):
      print(f"| {name} | {r['way']} | {r['programs']} | {r['dispatches']} | "
            f"{r['callbacks']} | {r['module']} | {r.get('while_loops', '-')} "
            f"| {r['cache_hits']} | "
            f"{r['pipelined_ms']:.2f} |",
            flush=True)
      print(json.dumps(dict(model=name, **r)), file=sys.stderr)


if __name__ == "__main__":
  main()
