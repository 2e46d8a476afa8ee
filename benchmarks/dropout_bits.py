r"""Keras' `Dropout` against our `HashedDropout` on JAX, forward and backward.

Issue 36: on one H200 the hidden-state dropouts of the BERT-Base step (Keras'
`Dropout`: threefry bits, compare, select) took 3.4 ms of 37.6 ms of kernels
at about ten times their bytes, integer work a deviceless compile does not
time. `realformer_tf.keras3.hashed_dropout` replaces the bits with
`core.dropout_hash`. This times one dropout's forward and backward (the
gradient of a sum of squares) under `jax.jit` at a hidden-state shape, the
median of `--rounds` calls, on whatever device JAX has.

Usage:
  KERAS_BACKEND=jax python benchmarks/dropout_bits.py --shape=32,512,768
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position
import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from realformer_tf.keras3 import hashed_dropout  # pylint: disable=g-import-not-at-top,wrong-import-position


def dropout_step(layer, shape, dtype):
  """A jitted (state, x) -> (loss, dx) of `layer` in training, and its
  arguments."""
  layer.build(shape)
  state = [v.value for v in layer.non_trainable_variables]

  def step(state, x):
    def loss(x):
      y, _ = layer.stateless_call([], state, x, training=True)
      return jnp.sum(jnp.square(y.astype(jnp.float32)))
    return jax.value_and_grad(loss)(x)

  x = jnp.asarray(np.random.default_rng(0).normal(size=shape), dtype)
  return jax.jit(step), (state, x)


def median_ms(step, args, rounds):
  """Median milliseconds of `rounds` waited calls, after a compiling one."""
  jax.block_until_ready(step(*args))
  times = []
  for _ in range(rounds):
    start = time.perf_counter()
    jax.block_until_ready(step(*args))
    times.append(time.perf_counter() - start)
  return 1000 * statistics.median(times)


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--shape", default="32,512,768")
  p.add_argument("--rate", type=float, default=0.1)
  p.add_argument("--dtype", default="bfloat16")
  p.add_argument("--rounds", type=int, default=20)
  args = p.parse_args()
  if keras.config.backend() != "jax":
    sys.exit(f"needs KERAS_BACKEND=jax; the backend is "
             f"{keras.config.backend()!r}")
  shape = tuple(int(d) for d in args.shape.split(","))
  rows = {}
  for name, layer in (("keras Dropout", keras.layers.Dropout(args.rate)),
                      ("HashedDropout",
                       hashed_dropout.HashedDropout(args.rate))):
    step, step_args = dropout_step(layer, shape, args.dtype)
    rows[name] = median_ms(step, step_args, args.rounds)
  device = jax.devices()[0].device_kind
  print(f"{device}, shape {shape} {args.dtype}, rate {args.rate}, forward + "
        f"backward, median of {args.rounds}:")
  for name, ms in rows.items():
    print(f"  {name}: {ms:.3f} ms")
  ratio = rows["HashedDropout"] / rows["keras Dropout"]
  print(f"  HashedDropout / keras Dropout: {ratio:.3f}")
  print(json.dumps(dict(device=device, shape=shape, ms=rows, ratio=ratio)))


if __name__ == "__main__":
  main()
