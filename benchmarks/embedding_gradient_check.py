r"""Embedding-table gradients on one device: time and bitwise determinism.

Issue 36's table, per method and table: the gradient of a lookup of 16,384
ids (BERT-Base's 32 x 512 tokens) into a table of width 768, each method
jit-compiled on its own, median of `--repeats` timed calls after a warm-up,
and whether `--runs` calls give bit-identical gradients (an atomic
scatter-add sums in the order threads arrive).

Methods:
  take_bf16       `jnp.take` on the table cast to bfloat16 (what Keras'
                  autocast gave keras-hub's BERT and us: a bf16 scatter-add)
  take_f32        `jnp.take` on the float32 table (a float32 scatter-add)
  segment_sum     sort the ids, `jax.ops.segment_sum(indices_are_sorted=True)`
  ours            `realformer_tf.keras3.embeddings.lookup`: a one-hot GEMM
                  below `ONE_HOT_BELOW_ROWS` rows, else the sorted segmented
                  scan and a gather
  one_hot         a float32 one-hot GEMM

Tables: `segments_all0` (2 rows, every id 0: the suite's batch),
`segments_01` (2 rows, ids 0/1), `tokens_padded` (30,522 rows, uniform ids,
last 1/8 of each row padding id 0), `tokens_zipf` (Zipf-distributed ids).

Usage (the GPU machine: KERAS_BACKEND=jax, keras on PYTHONPATH; on a CPU it
runs too, small with --smoke):
  KERAS_BACKEND=jax python benchmarks/embedding_gradient_check.py
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BATCH, SEQ, WIDTH, VOCAB = 32, 512, 768, 30522


def _ids(case, batch, seq, vocab, rng):
  import numpy as np  # pylint: disable=g-import-not-at-top
  if case == "segments_all0":
    return np.zeros((batch, seq), "int32"), 2
  if case == "segments_01":
    ids = np.zeros((batch, seq), "int32")
    ids[:, seq // 2:] = 1
    return ids, 2
  if case == "tokens_padded":
    ids = rng.integers(1, vocab, (batch, seq)).astype("int32")
    ids[:, -seq // 8:] = 0
    return ids, vocab
  if case == "tokens_zipf":
    return (rng.zipf(1.2, (batch, seq)) % vocab).astype("int32"), vocab
  raise ValueError(case)


def methods():
  """name -> f(table, ids) whose gradient wrt table is timed."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from realformer_tf.keras3 import embeddings  # pylint: disable=g-import-not-at-top

  def segment_sum(table, ids):
    @jax.custom_vjp
    def take(t):
      return jnp.take(t, ids, axis=0)

    def fwd(t):
      return take(t), None

    def bwd(_, g):
      flat = ids.reshape(-1)
      order = jnp.argsort(flat)
      return (jax.ops.segment_sum(
          g.reshape(-1, g.shape[-1])[order], flat[order], table.shape[0],
          indices_are_sorted=True),)
    take.defvjp(fwd, bwd)
    return take(table)

  return {
      "take_bf16": lambda t, i: jnp.take(t.astype(jnp.bfloat16), i, axis=0),
      "take_f32": lambda t, i: jnp.take(t, i, axis=0),
      "segment_sum": segment_sum,
      "ours": embeddings.lookup,
      "one_hot": lambda t, i: jax.nn.one_hot(i, t.shape[0], dtype=t.dtype) @ t,
  }


def measure(cases, names, batch, seq, width, vocab, repeats, runs):
  """Rows of {case, method, ms, deterministic}."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  fns = methods()
  rows = []
  for case in cases:
    ids, table_rows = _ids(case, batch, seq, vocab, rng)
    ids = jnp.asarray(ids)
    table = jnp.asarray(rng.normal(size=(table_rows, width)), jnp.float32)
    upstream = jnp.asarray(rng.normal(size=(batch, seq, width)), jnp.bfloat16)
    for name in names:
      fn = fns[name]
      grad = jax.jit(lambda t, i, u, fn=fn: jax.vjp(
          lambda t: fn(t, i).astype(jnp.bfloat16), t)[1](u)[0])
      try:
        first = np.asarray(grad(table, ids, upstream))
        same = all(np.asarray(grad(table, ids, upstream)).tobytes()
                   == first.tobytes() for _ in range(runs - 1))
        times = []
        for _ in range(repeats):
          start = time.perf_counter()
          jax.block_until_ready(grad(table, ids, upstream))
          times.append(time.perf_counter() - start)
        rows.append(dict(case=case, method=name,
                         ms=1000 * statistics.median(times),
                         deterministic=same))
      except Exception as e:  # pylint: disable=broad-except
        rows.append(dict(case=case, method=name,
                         error=f"{type(e).__name__}: {e}"[:200]))
      print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
  return rows


def print_table(rows, device):
  print(f"\ndevice: {device}; gradient of a lookup of the ids into a "
        "[rows, width] float32 table, upstream bfloat16; median ms of the "
        "jitted gradient; deterministic = bit-identical over the runs")
  cases = list(dict.fromkeys(r["case"] for r in rows))
  names = list(dict.fromkeys(r["method"] for r in rows))
  print("| table | " + " | ".join(names) + " |")
  print("|---|" + "---|" * len(names))
  for case in cases:
    cells = []
    for name in names:
      r = next(r for r in rows if r["case"] == case and r["method"] == name)
      cells.append("error" if "error" in r else
                   f"{r['ms']:.3f}{'' if r['deterministic'] else ' (nondet.)'}")
    print(f"| {case} | " + " | ".join(cells) + " |")


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--smoke", action="store_true",
                 help="tiny shapes (CPU tests)")
  p.add_argument("--repeats", type=int, default=20)
  p.add_argument("--runs", type=int, default=5,
                 help="calls compared bit for bit")
  p.add_argument("--json_output")
  args = p.parse_args()
  import jax  # pylint: disable=g-import-not-at-top
  shape = (2, 16, 8, 100) if args.smoke else (BATCH, SEQ, WIDTH, VOCAB)
  rows = measure(["segments_all0", "segments_01", "tokens_padded",
                  "tokens_zipf"], list(methods()), *shape,
                 repeats=3 if args.smoke else args.repeats, runs=args.runs)
  device = jax.devices()[0].device_kind
  print_table(rows, device)
  if args.json_output:
    with open(args.json_output, "w") as f:
      json.dump(dict(device=device, jax=jax.__version__, rows=rows), f,
                indent=1)


if __name__ == "__main__":
  main()
