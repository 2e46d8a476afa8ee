r"""One GPU call: every training step at BERT-Base shape, one table.

Every row does the same work: BERT-Base (12 x 768, FFN 3072), seq 512,
batch 32, mixed bfloat16, dropout 0.1, AdamW, an MLM loss on every 8th
position through the tied embedding, the last 1/8 padded. Two times per
row: the median of steps each waited for, and pipelined (steps back to back,
one wait at the end, as in training). Groups, each its own process with a
time budget: `keras` (Keras 3 on JAX, `suite_keras`), `long` (seq 4096,
with the allocator's peak), `xla` (TF-XLA steps dumped by `gpu_prepare.sh`,
`suite_xla`), `torch` (x-transformers, `suite_torch`). A row that fails or
does not fit says so and the others go on; `--profile` traces rows
(`gpu_profile`).

usage (GPU machine: wheels of benchmarks/gpu_wheels.txt on PYTHONPATH):
  python3 benchmarks/gpu_suite.py                 # the full table, <= 7 min
  python3 benchmarks/gpu_suite.py --rows=bert,xla_bert --profile=all
  KERAS_BACKEND=jax python benchmarks/gpu_suite.py --smoke   # CPU, tiny
"""

import argparse
import json
import os
import subprocess
import sys
import time

import gpu_profile
import suite_keras
import suite_torch
import suite_xla
import timing

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FULL = dict(layers=12, hidden=768, heads=12, inner=3072, seq=512, batch=32,
            long_seq=4096, long_batch=2, steps=5, rounds=3, xla_steps=10,
            torch_steps=10, profile_steps=4, smoke=False)
SMOKE = dict(layers=1, hidden=32, heads=2, inner=64, seq=32, batch=2,
             long_seq=64, long_batch=1, steps=3, rounds=1, xla_steps=2,
             torch_steps=2, profile_steps=3, smoke=True)

KERAS_ROWS = suite_keras.KERAS_ROWS
TORCH_ROWS = suite_torch.TORCH_ROWS
# Seconds each group may take at most in a 400 s run (scaled with --budget_s;
# the last group takes all that is left; the xla cap is per module), and
# what a group needs at least to be worth starting.
GROUP_CAPS = {"keras": 190, "long": 55, "xla": 50, "torch": 60}
CAP_PER_ROW = {"xla"}
GROUP_MIN = {"keras": 60, "long": 40, "xla": 30, "torch": 45}


def group_budget(group, rows, remaining, later, budget_s):
  """Seconds for one group: its cap (scaled), leaving later groups their
  minimum; the last group takes all that remains."""
  budget = remaining - sum(GROUP_MIN[g] for g in later)
  if later:
    cap = GROUP_CAPS[group] * (rows if group in CAP_PER_ROW else 1)
    budget = min(budget, cap * budget_s / 400)
  return budget


def _plan(args):
  """[(group, [row names])] in run order, after --rows."""
  wanted = set(args.rows.split(",")) if args.rows else None
  pick = lambda group, name: (wanted is None or group in wanted
                              or name in wanted)
  keras_rows = [n for n, r in KERAS_ROWS.items()
                if r[0] == "keras" and pick("keras", n)]
  long_rows = [n for n, r in KERAS_ROWS.items()
               if r[0] == "long" and pick("long", n)]
  xla = [m for m in suite_xla.xla_rows() if pick("xla", suite_xla.row_name(m))]
  torch_rows = [n for n in TORCH_ROWS if pick("torch", n)]
  plan = []
  if args.smoke:  # one process: CPU peaks mean nothing, imports cost time
    keras_rows += long_rows
  if keras_rows:
    plan.append(("keras", keras_rows))
  if not args.smoke:
    plan += [("long", [n]) for n in long_rows]
  if wanted is None or "xla" in wanted or any(
      n.startswith("xla_") for n in wanted):
    plan.append(("xla", xla))
  if torch_rows:
    plan.append(("torch", torch_rows))
  return plan


def _run_child(group, names, args, budget):
  """Runs one group in a subprocess; returns its rows (errors included)."""
  argv = [sys.executable, os.path.abspath(__file__), f"--_child={group}",
          f"--_names={','.join(names)}", f"--_budget={budget:.0f}",
          f"--profile={args.profile}"]
  if args.smoke:
    argv.append("--smoke")
  env = dict(os.environ, KERAS_BACKEND="jax", PYTHONUNBUFFERED="1")
  if args.profile_dir:
    env["GPU_PROFILE_DIR"] = os.path.abspath(args.profile_dir)
  if args.smoke:
    # Tiny shapes: LLVM's optimizations cost more than they save.
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""),
                                 "--xla_backend_optimization_level=0"]).strip()
  env["PYTHONPATH"] = os.pathsep.join(
      [HERE, ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  try:
    out = subprocess.run(argv, capture_output=True, text=True, env=env,
                         timeout=None if budget == float("inf")
                         else budget + 20, check=False)
    stdout, stderr, rc = out.stdout, out.stderr, out.returncode
  except subprocess.TimeoutExpired as e:
    stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (
        e.stdout or "")
    stderr, rc = f"timed out after {budget + 20:.0f} s", "timeout"
  for line in reversed(stdout.splitlines()):
    if line.startswith("{"):
      return json.loads(line)
  tail = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
  rename = suite_xla.row_name if group == "xla" else (lambda n: n)
  return dict(rows={rename(n): dict(error=f"group {group} rc {rc}: {tail}")
                    for n in names})


def _ratio(r, base, key="ms"):
  if key in r and base and key in base:
    return f"{r[key] / base[key]:.3f}"
  return ""


def _print_table(results, devices, shape):
  print(f"\ndevice: {', '.join(sorted(devices)) or '?'}; shape "
        f"{shape['layers']} x {shape['hidden']}, {shape['heads']} heads, FFN "
        f"{shape['inner']}, seq {shape['seq']}, batch {shape['batch']} (long:"
        f" seq {shape['long_seq']}, batch {shape['long_batch']}); "
        "mixed_bfloat16, dropout 0.1, AdamW, MLM loss on every 8th position"
        " (tied embedding), last 1/8 padded. ms / step: median of steps"
        " each waited for; pipelined: median over rounds of steps run back"
        " to back with one wait at the end (what a training loop gets)."
        " ratio: against bert for the Keras rows, long_ref for long_*,"
        " xla_bert for xla_*, xt_plain for xt_*")
  print("| row | model | ms / step | ratio | pipelined ms / step | ratio | "
        "peak MB | compile s | note |")
  print("|---|---|---|---|---|---|---|---|---|")
  bases = {"keras": results.get("bert"),
           "long": results.get("long_ref"),
           "xla": results.get("xla_bert"), "torch": results.get("xt_plain")}
  names = _row_names()
  for name in results:
    names.setdefault(name, (name.split("_")[0], name))
  for name, (group, what) in names.items():
    r = results.get(name)
    if r is None:
      continue
    if "error" in r:
      value, note = "error", "error: " + r["error"].replace("|", "/")
    elif "skipped" in r:
      value, note = "-", "skipped: " + r["skipped"]
    elif "ms" in r:
      value = f"{r['ms']:.2f}"
      note = ", ".join(f"{k} {r[k]}" for k in ("xla_gflops", "xla_gbytes",
                                              "temp_mb", "steps",
                                              "steps_per_execution",
                                              "steps_per_call",
                                              "fused_dispatches",
                                              "single_steps")
                       if k in r)
    else:
      value, note = "-", "no timed steps (time budget)"
    peak = f"{r['peak_mb']:.0f}" if r.get("peak_mb") else "-"
    base = bases.get(group)
    piped = f"{r['pipelined_ms']:.2f}" if "pipelined_ms" in r else "-"
    print(f"| {name} | {what} | {value} | {_ratio(r, base)} | {piped} | "
          f"{_ratio(r, base, 'pipelined_ms')} | {peak} "
          f"| {r.get('compile_s', '-')} | {note} |", flush=True)


# The headline: each RealFormer row against its peers; a row run another way
# (steps_per_execution, jax.jit, lax.scan) also against the same way's BERT
# and the default sum_pallas.
HEADLINE = (
    ("sum_pallas", ("bert", "xla_bert", "xt_residual")),
    ("sum_pallas_fused", ("bert_fused", "sum_pallas", "xt_residual")),
    ("sum_pallas_spe", ("bert_spe", "sum_pallas", "xt_residual")),
    ("sum_pallas_jit", ("sum_pallas", "xt_residual")),
    ("sum_pallas_scan", ("bert_scan", "sum_pallas", "xt_residual")),
    ("bert_fused", ("bert",)),
    ("bert_spe", ("bert",)),
    ("bert_scan", ("bert",)),
    ("xla_realformer-default", ("bert", "xla_bert", "xt_residual")),
    # The TF-XLA softmax candidate (encoder_step.py --softmax=kept).
    ("xla_realformer-default-keptprobs", ("xla_realformer-default",
                                          "xla_bert")),
)


def headline(results):
  """Rows of (row, base, pipelined ratio, waited ratio) that both ran."""
  out = []
  for name, bases in HEADLINE:
    for base in bases:
      r, b = results.get(name) or {}, results.get(base) or {}
      if "pipelined_ms" in r and "pipelined_ms" in b:
        out.append((name, base, r["pipelined_ms"] / b["pipelined_ms"],
                    r["ms"] / b["ms"] if "ms" in r and "ms" in b else None))
  return out


def _print_headline(results):
  rows = headline(results)
  if not rows:
    return
  print("\nheadline (pipelined ms / step ratio; waited in brackets):")
  for name, base, piped, waited in rows:
    waited = f" ({waited:.3f})" if waited is not None else ""
    print(f"  {name} / {base}: {piped:.3f}{waited}")


def _row_names():
  names = {n: (r[0], r[4]) for n, r in KERAS_ROWS.items()}
  for m in suite_xla.xla_rows():
    names[suite_xla.row_name(m)] = ("xla", f"TF-XLA {m}")
  names.update({n: ("torch", w) for n, w in TORCH_ROWS.items()})
  return names


def main():
  p = timing.parser(__doc__)
  p.add_argument("--smoke", action="store_true",
                 help="Every row at a tiny size on the CPU.")
  p.add_argument("--rows", default="",
                 help="Comma-separated groups (keras, long, xla, torch) "
                 "and/or row names; default: all.")
  p.add_argument("--budget_s", type=float, default=400,
                 help="Seconds for all groups (compile included).")
  p.add_argument("--json_output", default=None)
  p.add_argument("--profile", default="",
                 help="Row names (or 'all'): trace a few steps of each and "
                 "print where the device time goes (gpu_profile.py).")
  p.add_argument("--profile_dir", default="",
                 help="With --profile: write each profiled row's every "
                 "kernel to DIR/<row>.json.")
  p.add_argument("--to_stablehlo", nargs=2, metavar=("HLO_DIR", "MLIR_DIR"),
                 help="Convert encoder_step.py --dump_hlo output and exit.")
  p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
  p.add_argument("--_names", default="", help=argparse.SUPPRESS)
  p.add_argument("--_budget", type=float, default=0, help=argparse.SUPPRESS)
  args = p.parse_args()
  shape = SMOKE if args.smoke else FULL
  if args.to_stablehlo:
    suite_xla.to_stablehlo(*args.to_stablehlo)
    return
  if args._child:  # pylint: disable=protected-access
    deadline = time.time() + args._budget  # pylint: disable=protected-access
    names = [n for n in args._names.split(",") if n]  # pylint: disable=protected-access
    child = {"keras": suite_keras.keras_child, "long": suite_keras.keras_child,
             "xla": suite_xla.xla_child, "torch": suite_torch.torch_child}[args._child]  # pylint: disable=protected-access
    rows = [suite_xla.row_name(n) if args._child == "xla" else n  # pylint: disable=protected-access
            for n in names]
    profile = (set(rows) if args.profile == "all"
               else set(args.profile.split(",")) & set(rows))
    print(json.dumps(child(names, shape, deadline, profile)), flush=True)
    return
  start = time.time()
  if args.smoke:
    import tempfile  # pylint: disable=g-import-not-at-top
    suite_xla.HLO_DIR = tempfile.mkdtemp(prefix="gpu_suite_smoke_")
    os.environ["GPU_SUITE_HLO_DIR"] = suite_xla.HLO_DIR
    suite_xla.write_tiny_step(suite_xla.HLO_DIR)
  plan = _plan(args)
  results, devices = {}, set()
  for i, (group, names) in enumerate(plan):
    if group == "xla" and not names:
      for n in ("xla_bert", "xla_realformer"):
        results[n] = dict(skipped=f"no {suite_xla.HLO_DIR}/*.mlir (run "
                          "benchmarks/gpu_prepare.sh here first)")
      continue
    if group == "torch" and not suite_torch.torch_ready():
      for n in names:
        results[n] = dict(skipped=suite_torch.torch_ready(reason=True))
      continue
    remaining = args.budget_s - (time.time() - start)
    later = [g for g, n in plan[i + 1:] if n]
    # The smoke runs its fixed steps (SMOKE) with no time budget.
    budget = float("inf") if args.smoke else group_budget(
        group, len(names), remaining, later, args.budget_s)
    if budget < GROUP_MIN[group]:
      for n in names:
        results[n] = dict(skipped="time budget")
      continue
    limit = (f"budget {budget:.0f} s" if budget < float("inf")
             else "no time budget")
    print(f"[{time.time() - start:.0f} s] {group}: {','.join(names)} "
          f"({limit})", file=sys.stderr, flush=True)
    out = _run_child(group, names, args, budget)
    results.update(out["rows"])
    if out.get("device"):
      devices.add(out["device"])
  _print_table(results, devices, shape)
  _print_headline(results)
  gpu_profile.print_tables(results, sys.stdout)
  print(f"\ntotal {time.time() - start:.0f} s", flush=True)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(dict(devices=sorted(devices), rows=results), f, indent=1)


if __name__ == "__main__":
  main()
