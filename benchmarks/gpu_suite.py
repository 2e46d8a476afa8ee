r"""One GPU call: every training step of issue 29 at BERT-Base shape, one table.

The same work in every row: BERT-Base shape (12 x 768, 12 heads, FFN 3072),
seq 512, batch 32, mixed bfloat16, dropout 0.1, AdamW, an MLM loss on every
8th position through the tied embedding, the last 1/8 of each row padded;
medians of per-step times (each step waited for), steps of the models of a
group interleaved (alternating order, `keras3_step.FitSteps`: Keras' own
`fit`). Groups, each its own process, run one after another:

  keras   Keras 3 on JAX: keras-hub `BertBackbone`; `RealFormerBackbone`
          "none", "sum" with float32 and "auto" scores, "sum" with the Pallas
          kernel; rows isolating the leads (dropout 0; float32 / bfloat16
          tied logits; a float32 hidden stream where the backbone has a
          switch for it).
  long    seq 4096, batch 2: the reference attention vs the Pallas kernel,
          with the allocator's peak (one process per row, so each peak is
          its own).
  xla     TF-XLA steps of Model Garden's `BertEncoderV2` and our
          `RealFormerEncoder`, dumped and converted here beforehand
          (`benchmarks/gpu_prepare.sh` -> `.gpu_hlo/*.mlir`), compiled and run
          with this machine's jaxlib (absent folder: skipped).
  torch   the PyTorch peer, x-transformers `residual_attn=True` and plain,
          `torch.compile`, bf16 autocast (absent package or no CUDA: skipped).

A row that fails prints `error: ...` and the others go on; each group has a
time budget (`--budget_s` over all), and rows that would not fit print
`skipped: time budget`. The first rows of each group are the ones that
matter most.

Usage (GPU machine: wheels of benchmarks/gpu_wheels.txt on PYTHONPATH):
  python3 benchmarks/gpu_suite.py                 # the full table, <= 7 min
  python3 benchmarks/gpu_suite.py --rows=keras    # one group (or row names)
  KERAS_BACKEND=jax python benchmarks/gpu_suite.py --smoke   # CPU, tiny
Here, once (TF 2.20 + jax 0.10.2): benchmarks/gpu_prepare.sh, which calls
  python benchmarks/gpu_suite.py --to_stablehlo HLO_DIR .gpu_hlo
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HLO_DIR = os.environ.get("GPU_SUITE_HLO_DIR", os.path.join(ROOT, ".gpu_hlo"))

FULL = dict(layers=12, hidden=768, heads=12, inner=3072, seq=512, batch=32,
            long_seq=4096, long_batch=2, steps=5, rounds=3, xla_steps=5,
            torch_steps=10)
SMOKE = dict(layers=1, hidden=32, heads=2, inner=64, seq=32, batch=2,
             long_seq=64, long_batch=1, steps=2, rounds=1, xla_steps=2,
             torch_steps=2)

# "auto" picks the Pallas kernel on a JAX GPU, so rows meant to measure the
# keras.ops reference say "reference".
_SUM = dict(residual_attention="sum", attention_implementation="reference")
_AUTO = dict(_SUM, score_dtype="auto")
_PALLAS = dict(_AUTO, attention_implementation="pallas")
# name: (group, arch, backbone kwargs, build_mlm_model kwargs, what).
# Within a group the order is the priority when the budget runs short.
KERAS_ROWS = {
    "bert": ("keras", "bert", {}, {}, "keras-hub BertBackbone"),
    "sum_pallas": ("keras", "realformer", _PALLAS, {},
                   '"sum", defaults on a JAX GPU (auto: bf16 scores, Pallas)'),
    "sum_auto": ("keras", "realformer", _AUTO, {},
                 '"sum", score_dtype="auto", keras.ops reference'),
    "sum_f32": ("keras", "realformer", dict(_SUM, score_dtype="float32"), {},
                '"sum", score_dtype="float32", reference'),
    "none": ("keras", "realformer",
             dict(residual_attention="none",
                  attention_implementation="reference"), {},
             'RealFormerBackbone("none"), reference'),
    "bert_rbg": ("keras", "bert", {}, dict(prng="unsafe_rbg"),
                 "keras-hub BertBackbone, dropout bits from XLA's RNG"),
    "sum_pallas_rbg": ("keras", "realformer", _PALLAS, dict(prng="unsafe_rbg"),
                       '"sum", Pallas, dropout bits from XLA\'s RNG'),
    "sum_rbg": ("keras", "realformer", _AUTO, dict(prng="unsafe_rbg"),
                '"sum", "auto", reference, dropout bits from XLA\'s RNG'),
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
    "sum_stream_f32": ("keras", "realformer", _AUTO,
                       {}, '"sum", "auto", reference, float32 hidden stream'),
    "long_ref": ("long", "realformer", _AUTO, {},
                 '"sum", "auto", reference attention, seq 4096 x 2'),
    "long_pallas": ("long", "realformer", _PALLAS, {},
                    '"sum", "auto", Pallas kernel, seq 4096 x 2'),
}
TORCH_ROWS = {"xt_residual": "x-transformers residual_attn=True",
              "xt_plain": "x-transformers plain post-norm"}
# A float32 hidden stream can only be asked for where the backbone has an
# argument for it; the first of these names it has is used.
STREAM_ARGS = ("hidden_dtype", "stream_dtype", "residual_dtype")
# Seconds each group may take at most in a 400 s run (scaled with --budget_s;
# a group with none after it takes all that is left), and what a group needs
# at least to be worth starting. Compile times are guesses for BERT-Base on
# an H100 (~25 s per Keras model): the keras group's cap fits about six
# rows, the first six; run --rows=keras alone for all of them.
GROUP_CAPS = {"keras": 190, "long": 55, "xla": 45, "torch": 60}
GROUP_MIN = {"keras": 60, "long": 40, "xla": 30, "torch": 45}


def _write_tiny_step(folder):
  """A tiny jitted SGD step as StableHLO text: --smoke's TF-XLA stand-in.

  The BERT-Base steps of .gpu_hlo are for the GPU; this exercises the same
  loader and runner (donated inputs fed back) in a second on a CPU.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  def step(w, x):
    loss, grad = jax.value_and_grad(
        lambda w: jnp.mean(jnp.tanh(x @ w.astype(jnp.bfloat16)) ** 2))(w)
    return w - 0.1 * grad, loss

  text = jax.jit(step).lower(
      jnp.ones((16, 16), jnp.float32),
      jnp.ones((8, 16), jnp.bfloat16)).as_text()
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, "tiny_smoke.mlir"), "w") as f:
    f.write(text)


def _xla_rows():
  return sorted(os.path.basename(p)[:-len(".mlir")]
                for p in glob.glob(os.path.join(HLO_DIR, "*.mlir")))


def _row_name_xla(module):
  return "xla_" + module.split("_")[0]


# ---------------------------------------------------------------- keras rows
class _DropoutBitsFrom:
  """Within: Keras' JAX dropout draws its bits with another PRNG impl.

  Keras keeps a 2-word threefry seed and hands it to `jax.random.bernoulli`,
  whose threefry2x32 becomes ~100 integer HLO ops per 32 random bits.
  "unsafe_rbg" makes them with XLA's `rng_bit_generator` (Philox on a GPU),
  as TF-XLA's dropout does. Only tracing needs the patch: each model's step
  is traced (and compiled) inside, and reused after.
  """

  def __init__(self, impl):
    self._impl = impl

  def __enter__(self):
    import jax  # pylint: disable=g-import-not-at-top
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    from keras.src.backend.jax import random as jax_random  # pylint: disable=g-import-not-at-top
    self._module, self._draw = jax_random, jax_random.jax_draw_seed
    draw, impl = self._draw, self._impl

    def draw_seed(seed):
      data = jnp.asarray(draw(seed), jnp.uint32)
      if getattr(data, "shape", None) != (2,):
        return data
      data = jnp.concatenate([data, data ^ jnp.uint32(0x9E3779B9)])
      return jax.random.wrap_key_data(data, impl=impl)

    jax_random.jax_draw_seed = draw_seed
    return self

  def __exit__(self, *exc):
    self._module.jax_draw_seed = self._draw



class _nothing:  # pylint: disable=invalid-name

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    pass


def _backbone_features():
  """Which optional `RealFormerBackbone` arguments this checkout takes.

  Probed by building a tiny backbone: the backbone's signature is its
  arguments spec (`core.arguments`), not a Python signature.
  """
  from realformer_tf.keras3 import backbone  # pylint: disable=g-import-not-at-top

  def takes(**kwargs):
    try:
      backbone.RealFormerBackbone(
          vocabulary_size=8, num_layers=1, num_heads=1, hidden_dim=4,
          intermediate_dim=4, max_sequence_length=4, **kwargs)
      return True
    except (ValueError, TypeError):
      return False

  return {"attention_implementation": takes(
              attention_implementation="reference"),
          "stream": next((a for a in STREAM_ARGS if takes(**{a: "float32"})),
                         None),
          "score_dtype_auto": takes(score_dtype="auto")}


def missing_feature(name, features):
  """Why a Keras row cannot run on this checkout, or None if it can."""
  _, _, kwargs, _, _ = KERAS_ROWS[name]
  if ("attention_implementation" in kwargs
      and not features["attention_implementation"]):
    return "RealFormerBackbone has no attention_implementation argument"
  if kwargs.get("score_dtype") == "auto" and not features["score_dtype_auto"]:
    return 'RealFormerBackbone does not take score_dtype="auto"'
  if name == "sum_stream_f32" and not features["stream"]:
    return (f"RealFormerBackbone has no hidden-stream dtype argument "
            f"({'/'.join(STREAM_ARGS)}): compare runs before and after the "
            "compute-dtype stream instead")
  return None


def _keras_child(names, shape, deadline):
  """Builds, compiles and times Keras rows in this process; prints JSON."""
  import jax  # pylint: disable=g-import-not-at-top
  import keras3_step  # pylint: disable=g-import-not-at-top
  features = _backbone_features()
  device = jax.devices()[0]
  results, fits, times = {}, {}, {}
  long_rows = all(KERAS_ROWS[n][0] == "long" for n in names)
  compile_estimate = None
  for name in names:
    group, arch, kwargs, build, _ = KERAS_ROWS[name]
    seq, batch = ((shape["long_seq"], shape["long_batch"]) if group == "long"
                  else (shape["seq"], shape["batch"]))
    reason = missing_feature(name, features)
    if reason:
      results[name] = dict(skipped=reason)
      continue
    remaining = deadline - time.time()
    reserve = 3 if shape is SMOKE else 25  # the timed rounds
    if compile_estimate and remaining < 1.3 * compile_estimate + reserve:
      results[name] = dict(skipped="time budget")
      continue
    kwargs = dict(kwargs)
    if name == "sum_stream_f32":
      kwargs[features["stream"]] = "float32"
    if not features["attention_implementation"]:
      kwargs.pop("attention_implementation", None)  # the reference, then
    build = dict(build)
    prng = build.pop("prng", None)
    try:
      start = time.time()
      with _DropoutBitsFrom(prng) if prng else _nothing():
        model = keras3_step.build_mlm_model(
            arch, layers=shape["layers"], hidden=shape["hidden"],
            heads=shape["heads"], inner=shape["inner"], seq=seq,
            backbone_kwargs=kwargs, **build)
        fit = keras3_step.FitSteps(model, seq, batch)
        fit(2)  # compiles, then one warm step
      compile_s = time.time() - start
      compile_estimate = max(compile_estimate or 0, compile_s)
      fits[name], times[name] = fit, []
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
      try:
        times[name] += fits[name](shape["steps"])
      except Exception as e:  # pylint: disable=broad-except
        results[name] = dict(error=f"{type(e).__name__}: {e}"[:300])
        fits.pop(name)
    step_estimate = time.time() - round_start
  for name, fit in fits.items():
    if times[name]:
      results[name].update(
          ms=1000 * statistics.median(times[name]), steps=len(times[name]),
          loss=fit.last_loss)
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  if long_rows and stats:
    for name in fits:
      results[name]["peak_mb"] = stats.get("peak_bytes_in_use", 0) / 2**20
  return dict(device=device.device_kind, rows=results)


# ------------------------------------------------------------------ TF-XLA
def _xla_child(names, shape, deadline):
  """Compiles and times the TF-XLA steps of .gpu_hlo (see run_on_gpu.py)."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_enable_x64", True)  # TF's step counters are int64
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  backend = xla_bridge.get_backend()
  device = backend.devices()[0]
  results, loaded = {}, {}
  for module in names:
    name = _row_name_xla(module)
    if time.time() > deadline - 10:
      results[name] = dict(skipped="time budget")
      continue
    try:
      start = time.time()
      loaded[name] = _xla_load(os.path.join(HLO_DIR, module + ".mlir"),
                               backend, device)
      _xla_step(*loaded[name][:3])
      results[name] = dict(compile_s=round(time.time() - start, 1),
                           **loaded[name][3])
    except Exception as e:  # pylint: disable=broad-except
      results[name] = dict(error=f"{type(e).__name__}: {e}"[:300])
  times = {name: [] for name in loaded}
  for r in range(shape["rounds"]):
    if r and time.time() > deadline:
      break
    order = list(loaded) if r % 2 == 0 else list(reversed(list(loaded)))
    for name in order:
      for _ in range(shape["xla_steps"]):
        start = time.perf_counter()
        _xla_step(*loaded[name][:3])
        times[name].append(time.perf_counter() - start)
  for name in loaded:
    results[name].update(ms=1000 * statistics.median(times[name]),
                         steps=len(times[name]))
  return dict(device=device.device_kind, rows=results)


_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16",
           "i32": "int32", "i64": "int64", "i1": "bool", "ui32": "uint32",
           "ui64": "uint64"}


def _xla_load(path, backend, device):
  """Compiles one StableHLO step; random inputs; (exe, args, aliases, info)."""
  import re  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from jax._src import compiler  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    text = f.read()
  with jax_mlir.make_ir_context():
    module = ir.Module.parse(text)
    main = [op for op in module.body.operations
            if op.attributes["sym_name"].value == "main"][0]
    inputs = [(tuple(t.shape), str(t.element_type)) for t in main.type.inputs]
    text = module.operation.get_asm(binary=False)
  header = text[:text.find("func.func")]
  aliases = [(int(p), int(o)) for p, o in re.findall(
      r"parameter_number = (\d+) : i64\}, output_index = array<i64: (\d+)>",
      header)]
  options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
  devices = xla_client.DeviceList((device,))
  exe, errors = None, []
  for attempt in ("str_pos", "str_kw", "module_kw"):
    try:  # jaxlib's private API moves between versions
      if attempt == "str_pos":
        exe = backend.compile_and_load(text, devices, options)
      elif attempt == "str_kw":
        exe = backend.compile_and_load(text, executable_devices=devices,
                                       compile_options=options)
      else:
        with jax_mlir.make_ir_context():
          exe = backend.compile_and_load(
              ir.Module.parse(text), executable_devices=devices,
              compile_options=options)
      break
    except Exception as e:  # pylint: disable=broad-except
      errors.append(f"{attempt}: {e!r}"[:200])
  if exe is None:
    raise RuntimeError("; ".join(errors))
  cost = exe.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  info = dict(xla_gflops=round(float(cost.get("flops", 0)) / 1e9, 1),
              xla_gbytes=round(float(cost.get("bytes accessed", 0)) / 1e9, 2))
  try:
    info["temp_mb"] = round(
        exe.get_compiled_memory_stats().temp_size_in_bytes / 2**20)
  except Exception:  # pylint: disable=broad-except
    pass
  rng = np.random.default_rng(0)
  args = []
  for shape, dtype in inputs:
    np_dtype = (ml_dtypes.bfloat16 if dtype == "bf16"
                else np.dtype(_DTYPES[dtype]))
    if dtype[0] in "iu":
      value = np.zeros(shape, np_dtype)
    else:
      value = np.abs(rng.standard_normal(shape) * 0.02).astype(np_dtype)
    args.append(jax.device_put(value, device))
  return exe, args, aliases, info


def _xla_step(exe, args, aliases):
  try:
    outs = exe.execute(args)
  except AttributeError:
    outs = [x[0] for x in
            exe.execute_sharded(args).disassemble_into_single_device_arrays()]
  for o in outs:
    o.block_until_ready()
  for param, out in aliases:  # donated inputs: feed the updated values back
    args[param] = outs[out]


def to_stablehlo(src, dst):
  """TF-dumped HLO (*.hlo.pb) -> StableHLO text that jaxlib 0.11 compiles.

  Needs jax 0.10.2 (the project's venv). Newer jaxlibs reject `mhlo.copy`;
  a copy is an identity, so it becomes a same-shape `stablehlo.reshape`
  (as ../shared/tools/xla_gpu_step/to_stablehlo.py).
  """
  import collections  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top
  os.makedirs(dst, exist_ok=True)
  for path in sorted(glob.glob(os.path.join(src, "*.hlo.pb"))):
    with open(path, "rb") as f:
      stablehlo = xla_client._xla.mlir.hlo_to_stablehlo(f.read())  # pylint: disable=protected-access
    with jax_mlir.make_ir_context():
      text = ir.Module.parse(stablehlo).operation.get_asm(
          binary=False, print_generic_op_form=True)
    legacy = collections.Counter(re.findall(r'"(mhlo\.[a-z_]+)"', text))
    text = text.replace('"mhlo.copy"', '"stablehlo.reshape"')
    name = os.path.basename(path)[:-len(".hlo.pb")] + ".mlir"
    with open(os.path.join(dst, name), "w") as f:
      f.write(text)
    print(name, f"{len(text)} chars", dict(legacy), flush=True)


# ------------------------------------------------------------------- torch
def _torch_child(names, shape, deadline):
  """The peer (../shared/tools/peer_xtransformers/xt_bench.py's step)."""
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top
  from x_transformers import Encoder, TransformerWrapper  # pylint: disable=g-import-not-at-top
  if not torch.cuda.is_available():
    raise RuntimeError("no CUDA device")
  batch, seq, vocab = shape["batch"], shape["seq"], 30522
  results = {}
  for name in names:
    if time.time() > deadline - 20:
      results[name] = dict(skipped="time budget")
      continue
    try:
      torch.manual_seed(0)
      kw = dict(dim=shape["hidden"], depth=shape["layers"],
                heads=shape["heads"], ff_mult=shape["inner"] // shape["hidden"],
                attn_dropout=0.1, ff_dropout=0.1, pre_norm=False)
      if name == "xt_residual":
        kw["residual_attn"] = True
      model = TransformerWrapper(num_tokens=vocab, max_seq_len=seq,
                                 attn_layers=Encoder(**kw)).cuda()
      opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                              weight_decay=0.01, fused=True)
      fwd = torch.compile(model)
      g = torch.Generator().manual_seed(0)
      x = torch.randint(1000, vocab - 1, (batch, seq), generator=g).cuda()
      mask = torch.ones(batch, seq, dtype=torch.bool)
      mask[:, seq - seq // 8:] = False
      mask = mask.cuda()
      labels = torch.randint(0, vocab, (batch, seq // 8), generator=g).cuda()
      emb_w = model.token_emb.emb.weight

      def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
          h = fwd(x, mask=mask, return_embeddings=True)[:, ::8]  # pylint: disable=cell-var-from-loop
          logits = h @ emb_w.t()  # pylint: disable=cell-var-from-loop
        loss = F.cross_entropy(logits.float().reshape(-1, vocab),
                               labels.reshape(-1))  # pylint: disable=cell-var-from-loop
        loss.backward()
        opt.step()  # pylint: disable=cell-var-from-loop
        opt.zero_grad(set_to_none=True)  # pylint: disable=cell-var-from-loop
        torch.cuda.synchronize()
        return loss

      start = time.time()
      for _ in range(3):
        step()
      compile_s = time.time() - start
      torch.cuda.reset_peak_memory_stats()
      times = []
      for _ in range(shape["torch_steps"]):
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
      results[name] = dict(ms=1000 * statistics.median(times),
                           steps=len(times), compile_s=round(compile_s, 1),
                           peak_mb=torch.cuda.max_memory_allocated() / 2**20,
                           loss=float(loss))
    except Exception as e:  # pylint: disable=broad-except
      results[name] = dict(error=f"{type(e).__name__}: {e}"[:300])
    torch.cuda.empty_cache()
  return dict(device=torch.cuda.get_device_name(), rows=results)


# ------------------------------------------------------------------ driver
def _plan(args):
  """[(group, [row names])] in run order, after --rows."""
  wanted = set(args.rows.split(",")) if args.rows else None
  pick = lambda group, name: (wanted is None or group in wanted
                              or name in wanted)
  keras_rows = [n for n, r in KERAS_ROWS.items()
                if r[0] == "keras" and pick("keras", n)]
  long_rows = [n for n, r in KERAS_ROWS.items()
               if r[0] == "long" and pick("long", n)]
  xla = [m for m in _xla_rows() if pick("xla", _row_name_xla(m))]
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
          f"--_names={','.join(names)}", f"--_budget={budget:.0f}"]
  if args.smoke:
    argv.append("--smoke")
  env = dict(os.environ, KERAS_BACKEND="jax", PYTHONUNBUFFERED="1")
  if args.smoke:
    # Tiny shapes: LLVM's optimizations cost more than they save (as
    # tests/keras3/backends_test.py).
    env["XLA_FLAGS"] = " ".join([env.get("XLA_FLAGS", ""),
                                 "--xla_backend_optimization_level=0"]).strip()
  env["PYTHONPATH"] = os.pathsep.join(
      [HERE, ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  try:
    out = subprocess.run(argv, capture_output=True, text=True, env=env,
                         timeout=budget + 20, check=False)
    stdout, stderr, rc = out.stdout, out.stderr, out.returncode
  except subprocess.TimeoutExpired as e:
    stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (
        e.stdout or "")
    stderr, rc = f"timed out after {budget + 20:.0f} s", "timeout"
  for line in reversed(stdout.splitlines()):
    if line.startswith("{"):
      return json.loads(line)
  tail = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
  rename = _row_name_xla if group == "xla" else (lambda n: n)
  return dict(rows={rename(n): dict(error=f"group {group} rc {rc}: {tail}")
                    for n in names})


def _ratio(r, base):
  if "ms" in r and base and "ms" in base:
    return f"{r['ms'] / base['ms']:.3f}"
  return ""


def _print_table(results, devices, shape, args):
  print(f"\ndevice: {', '.join(sorted(devices)) or '?'}; shape "
        f"{shape['layers']} x {shape['hidden']}, {shape['heads']} heads, FFN "
        f"{shape['inner']}, seq {shape['seq']}, batch {shape['batch']} (long:"
        f" seq {shape['long_seq']}, batch {shape['long_batch']}); "
        "mixed_bfloat16, dropout 0.1, AdamW, MLM loss on every 8th position"
        " (tied embedding), last 1/8 padded; ms = median per step")
  print("| row | model | ms / step | ratio | peak MB | compile s | note |")
  print("|---|---|---|---|---|---|---|")
  bases = {"keras": results.get("bert"), "long": results.get("long_ref"),
           "xla": results.get("xla_bert"), "torch": results.get("xt_plain")}
  names = _row_names(args)
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
                                              "temp_mb", "steps") if k in r)
    else:
      value, note = "-", "no timed steps (time budget)"
    peak = f"{r['peak_mb']:.0f}" if r.get("peak_mb") else "-"
    print(f"| {name} | {what} | {value} | {_ratio(r, bases.get(group))} | {peak} "
          f"| {r.get('compile_s', '-')} | {note} |", flush=True)


def _row_names(args):
  names = {n: (r[0], r[4]) for n, r in KERAS_ROWS.items()}
  for m in _xla_rows():
    names[_row_name_xla(m)] = ("xla", f"TF-XLA {m}")
  names.update({n: ("torch", w) for n, w in TORCH_ROWS.items()})
  del args
  return names


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--smoke", action="store_true",
                 help="Every row at a tiny size on the CPU (Pallas in "
                 "interpret mode).")
  p.add_argument("--rows", default="",
                 help="Comma-separated groups (keras, long, xla, torch) "
                 "and/or row names; default: all.")
  p.add_argument("--budget_s", type=float, default=400,
                 help="Seconds for all groups (compile included).")
  p.add_argument("--json_output", default=None)
  p.add_argument("--to_stablehlo", nargs=2, metavar=("HLO_DIR", "MLIR_DIR"),
                 help="Convert encoder_step.py --dump_hlo output and exit.")
  p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
  p.add_argument("--_names", default="", help=argparse.SUPPRESS)
  p.add_argument("--_budget", type=float, default=0, help=argparse.SUPPRESS)
  args = p.parse_args()
  shape = SMOKE if args.smoke else FULL
  if args.to_stablehlo:
    to_stablehlo(*args.to_stablehlo)
    return
  if args._child:  # pylint: disable=protected-access
    deadline = time.time() + args._budget  # pylint: disable=protected-access
    names = [n for n in args._names.split(",") if n]  # pylint: disable=protected-access
    child = {"keras": _keras_child, "long": _keras_child,
             "xla": _xla_child, "torch": _torch_child}[args._child]  # pylint: disable=protected-access
    print(json.dumps(child(names, shape, deadline)), flush=True)
    return
  start = time.time()
  if args.smoke:
    import tempfile  # pylint: disable=g-import-not-at-top
    global HLO_DIR
    HLO_DIR = tempfile.mkdtemp(prefix="gpu_suite_smoke_")
    os.environ["GPU_SUITE_HLO_DIR"] = HLO_DIR
    _write_tiny_step(HLO_DIR)
  plan = _plan(args)
  results, devices = {}, set()
  for i, (group, names) in enumerate(plan):
    if group == "xla" and not names:
      for n in ("xla_bert", "xla_realformer"):
        results[n] = dict(skipped=f"no {HLO_DIR}/*.mlir (run "
                          "benchmarks/gpu_prepare.sh here first)")
      continue
    if group == "torch" and not _torch_ready():
      for n in names:
        results[n] = dict(skipped=_torch_ready(reason=True))
      continue
    remaining = args.budget_s - (time.time() - start)
    later = [g for g, n in plan[i + 1:] if n]
    budget = remaining - sum(GROUP_MIN[g] for g in later)
    if later and not args.smoke:
      budget = min(budget, GROUP_CAPS[group] * args.budget_s / 400)
    if budget < (5 if args.smoke else GROUP_MIN[group]):
      for n in names:
        results[n] = dict(skipped="time budget")
      continue
    print(f"[{time.time() - start:.0f} s] {group}: {','.join(names)} "
          f"(budget {budget:.0f} s)", file=sys.stderr, flush=True)
    out = _run_child(group, names, args, budget)
    results.update(out["rows"])
    if out.get("device"):
      devices.add(out["device"])
  _print_table(results, devices, shape, args)
  print(f"\ntotal {time.time() - start:.0f} s", flush=True)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(dict(devices=sorted(devices), rows=results), f, indent=1)


def _torch_ready(reason=False):
  """Whether the peer's rows can run here (torch, x-transformers, CUDA)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  for module in ("torch", "x_transformers"):
    if importlib.util.find_spec(module) is None:
      return f"{module} is not importable" if reason else False
  try:
    import torch  # pylint: disable=g-import-not-at-top
    if not torch.cuda.is_available():
      return "no CUDA device for torch" if reason else False
  except Exception as e:  # pylint: disable=broad-except
    return f"torch: {e!r}"[:200] if reason else False
  return True


if __name__ == "__main__":
  main()
