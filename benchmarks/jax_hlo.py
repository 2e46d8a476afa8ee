r"""Where a Keras 3 training step's time goes, from its XLA program (JAX).

Lowers the step Keras' `fit` jit-compiles (`model.train_step(state, data)`:
forward, backward, AdamW, metrics) of the benchmark's MLM model
(`keras3_fit.build_mlm_model`) and counts what XLA is given: `dot_general`s
by operand and result dtype, converts by (from, to), transposes, random-bit
ops (`rng_bit_generator` and its algorithm, or calls of JAX's threefry2x32),
and XLA's cost analysis of the compiled step (flops, bytes accessed) on this
machine's backend. `count_ops` also reads the StableHLO text of a TF-XLA step
(`gpu_suite.py --to_stablehlo` of `encoder_step.py --dump_hlo`), so the same
counts compare the TF graph with the Keras 3 one.

Usage (CPU is enough: the program XLA is given is the same; the cost
analysis is the CPU compiler's):
  KERAS_BACKEND=jax python benchmarks/jax_hlo.py --models=bert,sum \
      --layers=2 --seq=128 --batch=4
  KERAS_BACKEND=jax python benchmarks/jax_hlo.py --mlir=.gpu_hlo/bert.mlir
"""

import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras3_fit  # pylint: disable=g-import-not-at-top,wrong-import-position

# "name": (arch, backbone kwargs, build_mlm_model kwargs)
MODELS = {
    "bert": ("bert", {}, {}),
    "none": ("realformer", dict(residual_attention="none"), {}),
    "sum": ("realformer", dict(residual_attention="sum"), {}),
    "sum_f32": ("realformer", dict(residual_attention="sum",
                                   score_dtype="float32"), {}),
    "sum_bf16_logits": ("realformer", dict(residual_attention="sum"),
                        dict(logits_dtype="bfloat16")),
}

# One op per line in both the pretty ("%0 = stablehlo.dot_general %a, ...")
# and the generic ('%0 = "stablehlo.dot_general"(%a, ...)') forms; the
# operand and result types close the line: ": (tensor<..xbf16>, ...) ->
# tensor<..xf32>".
_OP = re.compile(r'^\s*(?:%\S+(?:, %\S+)* = )?"?(stablehlo|mhlo|chlo|func)\.'
                 r'([a-z_0-9]+)"?')
_TYPES = re.compile(r"tensor<(?:[0-9?]+x)*([a-z]+[0-9]*)>")


def _signature(line):
  """(operand dtypes, result dtypes) of an op's trailing type signature."""
  sig = line.rsplit(" : ", 1)[-1]
  if "->" in sig:
    ins, outs = sig.split("->", 1)
    return _TYPES.findall(ins), _TYPES.findall(outs)
  types = _TYPES.findall(sig)  # "op %a : tensor<...>" (same in and out)
  return types, types


def count_ops(text):
  """Counts of the ops that say where a step's time goes, from StableHLO text.

  Args:
    text: StableHLO (or MHLO) text, pretty or generic form.

  Returns:
    A dict: `ops` (all ops by name), `dot_general` keyed "lhs,rhs->out"
    dtypes, `convert` keyed "from->to", `transpose`, `rng` (random-bit ops:
    `rng_bit_generator` per algorithm, calls of functions whose name holds
    "threefry"), `threefry_fn_ops`: the ops inside such functions, and
    `scatter`: scatters keyed by their result's dtype (a bfloat16
    scatter-add is a compare-and-swap loop on a GPU: benchmarks/README.md,
    "Embedding gradients").
  """
  ops = collections.Counter()
  dots = collections.Counter()
  converts = collections.Counter()
  rng = collections.Counter()
  scatters = collections.Counter()
  in_threefry, threefry_ops, open_scatter = False, 0, False
  for line in text.splitlines():
    if open_scatter and line.lstrip().startswith("})"):
      # The generic form's scatter closes its region with its signature.
      scatters[(_signature(line)[1] or ["?"])[0]] += 1
      open_scatter = False
    if "func.func" in line:
      in_threefry = "threefry" in line
      continue
    call = re.search(r"\bcall @([A-Za-z_0-9]+)", line)
    if call:  # pretty form: "%0 = call @threefry2x32(...)"
      if "threefry" in call.group(1):
        rng["call threefry2x32"] += 1
      elif call.group(1).startswith("_bernoulli"):
        rng["call bernoulli"] += 1
      continue
    match = _OP.match(line)
    if not match:
      continue
    name = match.group(2)
    if match.group(1) == "func":
      continue
    ops[name] += 1
    if in_threefry:
      threefry_ops += 1
    ins, outs = _signature(line)
    if name == "scatter":
      if "->" in line:  # signature on the op's own line
        scatters[(outs or ["?"])[0]] += 1
      else:
        open_scatter = True
    if name == "dot_general" and len(ins) >= 2 and outs:
      dots[f"{ins[0]},{ins[1]}->{outs[0]}"] += 1
    elif name == "convert" and ins and outs:
      converts[f"{ins[0]}->{outs[0]}"] += 1
    elif name == "rng_bit_generator":
      algo = re.search(r"(DEFAULT|THREE_FRY|PHILOX)", line)
      rng[f"rng_bit_generator {algo.group(1) if algo else '?'}"] += 1
    elif name == "rng":
      rng["rng"] += 1
    elif name == "custom_call" and "threefry" in line:
      rng["custom_call threefry2x32"] += 1
  return dict(ops=dict(ops.most_common()), dot_general=dict(dots),
              convert=dict(converts.most_common()),
              transpose=ops["transpose"], rng=dict(rng),
              threefry_fn_ops=threefry_ops, scatter=dict(scatters))


def cost_of(compiled):
  """XLA's cost analysis of a compiled executable: GFLOP, GB accessed."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return dict(gflops=float(cost.get("flops", 0)) / 1e9,
              gbytes=float(cost.get("bytes accessed", 0)) / 1e9)


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


def lower_train_step(model, seq, batch, platform=None):
  """The `jax.jit` lowering of `model.train_step` (what `fit` compiles).

  `platform` ("cuda", "cpu", ...) lowers for that platform from any machine:
  e.g. JAX's threefry is a rolled loop on a CPU and unrolled on a GPU.
  """
  import jax  # pylint: disable=g-import-not-at-top
  state, data = train_step_args(model, seq, batch)
  jitted = jax.jit(model.train_step, donate_argnums=0)  # as `fit`'s
  if platform:
    return jitted.trace(state, data).lower(lowering_platforms=(platform,))
  return jitted.lower(state, data)


def analyze_model(name, *, layers=2, hidden=128, heads=2, inner=512, seq=128,
                  batch=4, dropout=0.1, policy="mixed_bfloat16", cost=True,
                  extra_backbone_kwargs=None, platform=None):
  """Counts (and optionally the CPU cost analysis) of one model's step."""
  arch, backbone_kwargs, build_kwargs = MODELS[name]
  model = keras3_fit.build_mlm_model(
      arch, layers=layers, hidden=hidden, heads=heads, inner=inner, seq=seq,
      dropout=dropout, policy=policy,
      backbone_kwargs={**backbone_kwargs, **(extra_backbone_kwargs or {})},
      **build_kwargs)
  lowered = lower_train_step(model, seq, batch, platform)
  row = dict(model=name, **count_ops(lowered.as_text()))
  if cost and not platform:
    row.update(cost_of(lowered.compile()))
  return row


def _fmt(counts):
  return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--models", default="bert,none,sum")
  p.add_argument("--layers", type=int, default=2)
  p.add_argument("--hidden", type=int, default=128)
  p.add_argument("--heads", type=int, default=2)
  p.add_argument("--inner", type=int, default=512)
  p.add_argument("--seq", type=int, default=128)
  p.add_argument("--batch", type=int, default=4)
  p.add_argument("--dropout", type=float, default=0.1)
  p.add_argument("--no_cost", action="store_true")
  p.add_argument("--platform", default=None,
                 help="Lower for this platform (e.g. cuda); no cost analysis.")
  p.add_argument("--mlir", default="",
                 help="Comma-separated StableHLO text files (TF-XLA steps) "
                 "to count instead of lowering Keras models.")
  args = p.parse_args()
  rows = []
  if args.mlir:
    for path in args.mlir.split(","):
      with open(path) as f:
        rows.append(dict(model=os.path.basename(path), **count_ops(f.read())))
  else:
    for name in args.models.split(","):
      rows.append(analyze_model(
          name, layers=args.layers, hidden=args.hidden, heads=args.heads,
          inner=args.inner, seq=args.seq, batch=args.batch,
          dropout=args.dropout, cost=not args.no_cost,
          platform=args.platform))
  print("| model | dot_general (lhs,rhs->out) | converts | transposes | "
        "random bits | GFLOP | GB accessed |\n|---|---|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['model']} | {_fmt(r['dot_general'])} | "
          f"{sum(r['convert'].values())} | {r['transpose']} | "
          f"{_fmt(r['rng'])} (+{r['threefry_fn_ops']} ops) | "
          f"{r.get('gflops', float('nan')):.2f} | "
          f"{r.get('gbytes', float('nan')):.3f} |")
  for r in rows:
    print(json.dumps(r), file=sys.stderr)


if __name__ == "__main__":
  main()
