r"""gpu_suite's TF-XLA group: Model Garden / RealFormer steps dumped by TF here.

`encoder_step.py --dump_hlo` writes each TF-XLA training step as HLO;
`to_stablehlo` turns it into StableHLO text that the GPU machine's jaxlib
compiles (it has no TensorFlow); `xla_child` compiles and times the modules
there, feeding donated outputs back as the next step's inputs, as TF does.
"""

import glob
import os
import time

import gpu_profile
import timing

HLO_DIR = os.environ.get(
    "GPU_SUITE_HLO_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                 ".gpu_hlo"))


def write_tiny_step(folder):
  """A tiny jitted SGD step as StableHLO text: --smoke's TF-XLA stand-in
  (the same loader and runner, in a second on a CPU)."""
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


def xla_rows():
  return sorted(os.path.basename(p)[:-len(".mlir")]
                for p in glob.glob(os.path.join(HLO_DIR, "*.mlir")))


def row_name(module):
  return "xla_" + module.split("_")[0]


# Seconds a profiled row's two traces (pipelined and waited) take on a GPU,
# kept free of the timing rounds.
PROFILE_RESERVE_S = 12


def xla_child(names, shape, deadline, profile=()):
  """Compiles and times the TF-XLA steps of .gpu_hlo.

  Per row: `ms`, the median of steps each waited for; `pipelined_ms`, the
  median over rounds of `xla_steps` steps dispatched back to back (one wait
  at the end: what a training loop gets); with the row in `profile`, its
  `gpu_profile` summary.
  """
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_enable_x64", True)  # TF's step counters are int64
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  backend = xla_bridge.get_backend()
  device = backend.devices()[0]
  results, loaded = {}, {}
  for module in names:
    name = row_name(module)
    if time.time() > deadline - 10:
      results[name] = dict(skipped="time budget")
      continue
    try:
      start = time.time()
      loaded[name] = _xla_load(os.path.join(HLO_DIR, module + ".mlir"),
                               backend, device)
      _xla_steps(*loaded[name][:3], 1)
      results[name] = dict(compile_s=round(time.time() - start, 1),
                           **loaded[name][3])
    except Exception as e:  # pylint: disable=broad-except
      results[name] = dict(error=timing.error(e))
  times = {name: [] for name in loaded}
  pipelined = {name: [] for name in loaded}
  reserve = PROFILE_RESERVE_S * sum(name in profile for name in loaded)
  for r in range(shape["rounds"]):
    if r and time.time() > deadline - reserve:
      break
    for name in timing.alternate(loaded, r):
      step = loaded[name][:3]
      times[name] += timing.waited(lambda s=step: _xla_steps(*s, 1),
                                   shape["xla_steps"])
      last = []
      pipelined[name].append(timing.pipelined(
          lambda s=step, last=last: last.append(_xla_steps(*s, 1, False)),
          lambda last=last: _wait(last[-1]), shape["xla_steps"]))
  for name in loaded:
    results[name].update(
        ms=timing.median_ms(times[name]), steps=len(times[name]),
        pipelined_ms=timing.median_ms(pipelined[name]))
    if name in profile and time.time() < deadline - 5:
      try:
        results[name]["profile"] = gpu_profile.profile_jax(
            lambda n, name=name: _xla_steps(*loaded[name][:3], n),
            shape["profile_steps"],
            gpu_profile.save_path(name))
        # The same steps each waited for, as `ms` times them.
        results[name]["profile_waited"] = gpu_profile.profile_jax(
            lambda n, name=name: _waited_steps(loaded[name][:3], n),
            shape["profile_steps"],
            gpu_profile.save_path(name + "_waited"))
      except Exception as e:  # pylint: disable=broad-except
        results[name]["profile_error"] = timing.error(e)
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


def _xla_steps(exe, args, aliases, steps, wait=True):
  """Runs `steps` steps back to back, each fed the donated outputs of the
  one before; waits for the last one (`wait`); returns its outputs."""
  for _ in range(steps):
    try:
      outs = exe.execute(args)
    except AttributeError:
      outs = [x[0] for x in exe.execute_sharded(
          args).disassemble_into_single_device_arrays()]
    for param, out in aliases:  # donated inputs: feed the updated values back
      args[param] = outs[out]
  if wait:
    _wait(outs)
  return outs


def _wait(arrays):
  for a in arrays:
    a.block_until_ready()


def _waited_steps(step, steps):
  """`steps` steps, each waited for before the next (the `ms` timing)."""
  for _ in range(steps):
    _xla_steps(*step, 1)


def to_stablehlo(src, dst):
  """TF-dumped HLO (*.hlo.pb) -> StableHLO text that jaxlib 0.11 compiles.

  Runs in the project's environment (jax 0.10.2). Newer jaxlibs reject
  `mhlo.copy`, an identity, so it becomes a same-shape `stablehlo.reshape`.
  """
  import collections  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir as jax_mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  from jax._src.lib.mlir import ir  # pylint: disable=g-import-not-at-top
  # Here only (the project's venv): the GPU machine has no TensorFlow.
  from realformer_tf import utils  # pylint: disable=g-import-not-at-top
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
    # Whole or not at all: a killed conversion leaves the previous module.
    with utils.atomic_path(os.path.join(dst, name)) as tmp:
      with open(tmp, "w") as f:
        f.write(text)
    print(name, f"{len(text)} chars", dict(legacy), flush=True)
