r"""Where a step's device time goes: kernels by category, from one trace.

`gpu_suite.py --profile=ROWS` traces a few pipelined steps of each row and
keeps the device time per step (the union of kernel intervals), how busy the
device was over the wall time (low: the host sets the pace), the time per
kernel category (by kernel name, HLO op and source op), the idle gaps and the
top kernels. JAX rows are read back with `jax.profiler.ProfileData`, torch
rows with `torch.profiler`; on a CPU the XLA runtime's thunk events stand in.
"""

import collections
import contextlib
import glob
import os
import re
import shutil
import tempfile
import time

# (category, pattern over "kernel name | hlo op | source op"), first match
# wins: a GEMM fusion whose source op sits under a dropout scope is a GEMM.
CATEGORIES = (
    ("attention kernel", r"pallas|residual_attention_(forward|dq|dkv)|fmha|"
                         r"flash|cudnn.*att|mosaic"),
    ("GEMM", r"gemm|xmma|cutlass|cublas|nvjet|wgmma|matmul|\bdot\b|"
             r"dot[._]|\bmm\b|_mm_|sm\d\d_.*(gemm|mma)|ampere_.*gemm|"
             r"ynn_fusion"),  # the last: XLA CPU's YNNPACK dots (--smoke)
    ("random bits", r"threefry|random_bits|rng|philox|bernoulli|"
                    r"random_uniform|random_wrap"),
    ("gather / scatter", r"scatter|gather|dynamic[-_]update[-_]slice|"
                         r"dynamic[-_]slice|index_put|embedding"),
    ("copy / transpose", r"transpose|copy|concatenate|memcpy|"
                         r"\bslice|pad\b"),
    ("memset", r"memset|zeros|fill"),
    ("reduction", r"reduce|reduction|softmax|norm|welford|per_row|"
                  r"triton_red|sum|max\b"),
    ("elementwise", r"fusion|loop_|elementwise|triton_poi|add|mul|convert|"
                    r"select|where|exp|tanh|erf|gelu"),
)
_COMPILED = tuple((name, re.compile(p, re.I)) for name, p in CATEGORIES)
CATEGORY_NAMES = tuple(name for name, _ in CATEGORIES) + ("other",)
# Device-plane lines that are XLA's own summaries of the stream lines.
_DERIVED_LINES = ("xla modules", "xla ops", "steps", "framework",
                  "source code", "xla traceme", "launch stats",
                  "host threads", "tensorflow")


def category(kernel, hlo_op="", op_name=""):
  text = " | ".join(s for s in (kernel, hlo_op, op_name) if s)
  for name, pattern in _COMPILED:
    if pattern.search(text):
      return name
  return "other"


def save_path(row):
  """Where `row`'s full kernel list goes: `$GPU_PROFILE_DIR/<row>.json`, or
  None without that variable (`gpu_suite.py --profile_dir` sets it)."""
  folder = os.environ.get("GPU_PROFILE_DIR")
  return os.path.join(folder, f"{row}.json") if folder else None


@contextlib.contextmanager
def jax_trace():
  """Within: a `jax.profiler` trace; yields a dict that gets `path`, the
  `.xplane.pb` written, once the block ends."""
  import jax  # pylint: disable=g-import-not-at-top
  folder = tempfile.mkdtemp(prefix="gpu_profile_")
  out = {}
  jax.profiler.start_trace(folder)
  try:
    yield out
  finally:
    jax.profiler.stop_trace()
    found = sorted(glob.glob(os.path.join(folder, "**", "*.xplane.pb"),
                             recursive=True), key=os.path.getmtime)
    if not found:
      shutil.rmtree(folder, ignore_errors=True)
      raise RuntimeError(f"jax.profiler wrote no .xplane.pb under {folder}")
    out["path"], out["folder"] = found[-1], folder


def _kernel_events(path):
  """[(start_ns, end_ns, kernel, hlo_op, op_name)] of the device's stream
  lines or, without a device plane, of the host events with an `hlo_op`."""
  import jax  # pylint: disable=g-import-not-at-top
  data = jax.profiler.ProfileData.from_file(path)
  planes = list(data.planes)
  devices = [p for p in planes if p.name.startswith("/device:")
             and "cpu" not in p.name.lower()]
  events = []
  for plane in devices or [p for p in planes if p.name == "/host:CPU"]:
    for line in plane.lines:
      if devices and line.name.lower().startswith(_DERIVED_LINES):
        continue
      for e in line.events:
        stats = dict(e.stats)
        if not devices and "hlo_op" not in stats:
          continue
        events.append((e.start_ns, e.start_ns + e.duration_ns, e.name,
                       str(stats.get("hlo_op", "")),
                       str(stats.get("tf_op", stats.get("name", "")))))
  return events, bool(devices)


def _union_ns(intervals):
  total, end = 0.0, None
  for start, stop in sorted(intervals):
    if end is None or start > end:
      total += stop - start
      end = stop
    elif stop > end:
      total += stop - end
      end = stop
  return total


# Idle stretches between kernels, by length: short ones are launch latency,
# a long one a step is the host's turn (a sync, `fit`'s loop).
GAP_BUCKETS_US = ((0, 10), (10, 100), (100, 1000), (1000, float("inf")))


GAP_LABELS = ("< 10 us", "10 us-100 us", "100 us-1 ms", ">= 1 ms")


def idle_gaps(intervals):
  """{label: [count, ns]} of the idle stretches between merged kernel
  intervals (none before the first kernel or after the last)."""
  gaps = {label: [0, 0.0] for label in GAP_LABELS}
  end = None
  for start, stop in sorted(intervals):
    if end is not None and start > end:
      us = (start - end) / 1e3
      for (low, high), label in zip(GAP_BUCKETS_US, GAP_LABELS):
        if low <= us < high:
          gaps[label][0] += 1
          gaps[label][1] += start - end
          break
    end = stop if end is None else max(end, stop)
  return gaps


def summarize(events, steps, wall_s, on_device=True, top=15):
  """The per-step figures of one traced row, as a JSON-able dict.

  `events` are (start_ns, end_ns, kernel, hlo_op, op_name) of `steps` steps
  that took `wall_s`. Per step: `wall_ms`, `device_ms`, `busy` (device over
  wall), `kernels`, `categories` (ms of each of `CATEGORY_NAMES`), `gaps`
  ([idle stretches, ms] of each of `GAP_LABELS`), `top` (the `top` kernels:
  name, category, ms, calls, hlo op, source op); `source` "device" or "cpu".
  """
  if not events:
    raise ValueError("the trace holds no kernel events")
  if steps < 1 or wall_s <= 0:
    raise ValueError(f"steps={steps}, wall_s={wall_s}: need >= 1 and > 0")
  per_kernel = collections.defaultdict(lambda: [0.0, 0, "", ""])
  per_category = dict.fromkeys(CATEGORY_NAMES, 0.0)
  for start, stop, kernel, hlo_op, op_name in events:
    k = per_kernel[kernel]
    k[0] += stop - start
    k[1] += 1
    k[2], k[3] = k[2] or hlo_op, k[3] or op_name
    per_category[category(kernel, hlo_op, op_name)] += stop - start
  device_ns = _union_ns((s, e) for s, e, *_ in events)
  ms = lambda ns: round(ns / 1e6 / steps, 3)
  gaps = idle_gaps((s, e) for s, e, *_ in events)
  ranked = sorted(per_kernel.items(), key=lambda kv: -kv[1][0])
  return dict(
      source="device" if on_device else "cpu",
      steps=steps,
      wall_ms=round(1000 * wall_s / steps, 3),
      device_ms=ms(device_ns),
      busy=round(device_ns / 1e9 / wall_s, 3),
      kernels=round(len(events) / steps, 1),
      categories={c: ms(v) for c, v in per_category.items()},
      gaps={label: [round(n / steps, 1), ms(ns)]
            for label, (n, ns) in gaps.items()},
      top=[[name, category(name, h, o), ms(t), round(n / steps, 1), h,
            o[-120:]] for name, (t, n, h, o) in ranked[:top]])


def _summaries(events, steps, wall, on_device, save_to, top=15):
  """The row's summary (its `top` kernels); with `save_to`, the summary with
  every kernel is written there as JSON first."""
  full = summarize(events, steps, wall, on_device, top=len(events))
  if save_to:
    import json  # pylint: disable=g-import-not-at-top
    os.makedirs(os.path.dirname(save_to) or ".", exist_ok=True)
    with open(save_to + ".tmp", "w") as f:
      json.dump(full, f, indent=0)
    os.replace(save_to + ".tmp", save_to)
  return dict(full, top=full["top"][:top])


def profile_jax(run_steps, steps, save_to=None):
  """Traces `run_steps(steps)` (which waits for its last step) and
  summarizes it; the trace's folder is removed.

  `run_steps` may return its own seconds per step (Keras' `fit` does,
  without its setup and teardown); else the call's wall time counts.
  `save_to`: a JSON path for the summary with every kernel listed.
  """
  with jax_trace() as trace:
    start = time.perf_counter()
    per_step = run_steps(steps)
    wall = time.perf_counter() - start
  if isinstance(per_step, float):
    wall = per_step * steps
  try:
    events, on_device = _kernel_events(trace["path"])
    return _summaries(events, steps, wall, on_device, save_to)
  finally:
    shutil.rmtree(trace["folder"], ignore_errors=True)


def profile_torch(run_steps, steps, save_to=None):
  """As `profile_jax`, with `torch.profiler`'s CUDA kernel events."""
  import torch  # pylint: disable=g-import-not-at-top
  from torch.profiler import ProfilerActivity, profile  # pylint: disable=g-import-not-at-top
  with profile(activities=[ProfilerActivity.CUDA]) as prof:
    start = time.perf_counter()
    run_steps(steps)
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
  events = []
  for e in prof.events():
    if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name:
      begin = e.time_range.start * 1000.0  # us -> ns
      events.append((begin, begin + e.time_range.elapsed_us() * 1000.0,
                     e.name, "", ""))
  return _summaries(events, steps, wall, True, save_to)


_SHORT = {"attention kernel": "attn", "GEMM": "GEMM",
          "random bits": "RNG", "gather / scatter": "gather/scatter",
          "copy / transpose": "copy/transp.", "memset": "memset",
          "reduction": "reduce", "elementwise": "eltwise", "other": "other"}


def print_tables(rows, out):
  """Markdown: one line per profiled row, then each row's top kernels."""
  profiled = {n: r["profile"] for n, r in rows.items() if "profile" in r}
  # TF-XLA rows also trace their waited steps (`suite_xla`): a summary line.
  waited = {f"{n} (waited)": r["profile_waited"] for n, r in rows.items()
            if "profile_waited" in r}
  failed = {n: r["profile_error"] for n, r in rows.items()
            if "profile_error" in r}
  if not profiled and not failed:
    return
  print("\nprofile (ms per step; device = union of kernel times; busy = "
        "device / wall)", file=out)
  print("| row | wall | device | busy | kernels | "
        + " | ".join(_SHORT[c] for c in CATEGORY_NAMES) + " |", file=out)
  print("|---" * (5 + len(CATEGORY_NAMES)) + "|", file=out)
  for name, p in {**profiled, **waited}.items():
    cells = [f"{p['wall_ms']:.2f}", f"{p['device_ms']:.2f}",
             f"{100 * p['busy']:.0f}%", f"{p['kernels']:.0f}"]
    cells += [f"{p['categories'][c]:.2f}" for c in CATEGORY_NAMES]
    print(f"| {name} | " + " | ".join(cells) + " |", file=out)
  for name, error in failed.items():
    print(f"| {name} | error: {error} |", file=out)
  with_gaps = {n: p for n, p in {**profiled, **waited}.items() if "gaps" in p}
  if with_gaps:
    print("\nidle device between kernels, per step (stretches / ms; "
          "wall - device also holds the time before the first kernel)",
          file=out)
    print("| row | " + " | ".join(GAP_LABELS) + " |", file=out)
    print("|---" * (1 + len(GAP_LABELS)) + "|", file=out)
    for name, p in with_gaps.items():
      cells = [f"{p['gaps'][g][0]:g} / {p['gaps'][g][1]:.2f}"
               for g in GAP_LABELS]
      print(f"| {name} | " + " | ".join(cells) + " |", file=out)
  for name, p in profiled.items():
    print(f"\n{name}: top kernels ({p['source']})", file=out)
    print("| ms | calls | category | kernel | hlo op | source op |",
          file=out)
    print("|---|---|---|---|---|---|", file=out)
    for kernel, cat, ms, calls, hlo_op, op_name in p["top"]:
      print(f"| {ms:.3f} | {calls:g} | {cat} | {kernel[:70]} | "
            f"{hlo_op[:40]} | {op_name[-60:]} |", file=out)
