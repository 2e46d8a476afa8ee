"""Fits a tiny RealFormerTextClassifier on JAX twice: on one device, then with
`keras.distribution.DataParallel` over all devices; prints both loss curves
as JSON. Run by data_parallel_test.py with
XLA_FLAGS=--xla_force_host_platform_device_count=2 and KERAS_BACKEND=jax.
"""

import json
import os
import sys

import keras
import numpy as np

from realformer_tf.keras3 import backbone as backbone_lib
from realformer_tf.keras3 import text_classifier

STEPS, GLOBAL_BATCH, SEQ = 6, 8, 8


def data():
  rng = np.random.default_rng(0)
  n = STEPS * GLOBAL_BATCH
  padding_mask = (np.arange(SEQ)[None] < rng.integers(3, SEQ + 1, (n, 1)))
  x = {"token_ids": rng.integers(1, 50, (n, SEQ)).astype("int32"),
       "segment_ids": np.zeros((n, SEQ), "int32"),
       "padding_mask": padding_mask.astype("int32")}
  labels = rng.integers(0, 3, (n,)).astype("int32")
  x["token_ids"][:, 0] = labels + 1  # Learnable: the first token says it.
  return x, labels


def loss_curve(distribution, steps_per_execution=1):
  """Losses the callbacks see (every `steps_per_execution`-th step) of a
  seeded fit under `distribution` (None: one device) then `evaluate`'s, the
  devices holding the weights and the fused train function's dispatches
  (None unfused)."""
  keras.distribution.set_distribution(distribution)
  keras.utils.set_random_seed(0)
  backbone = backbone_lib.RealFormerBackbone(
      vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
      intermediate_dim=32, dropout=0.0, max_sequence_length=SEQ)
  model = text_classifier.RealFormerTextClassifier(
      backbone, num_classes=3, dropout=0.0)
  model.compile(optimizer=keras.optimizers.Adam(3e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True),
                steps_per_execution=steps_per_execution)
  losses = []
  record = keras.callbacks.LambdaCallback(
      on_train_batch_end=lambda batch, logs: losses.append(
          float(logs["loss"])))
  x, y = data()
  model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False,
            verbose=0, callbacks=[record])
  # Devices holding the (replicated) weights.
  devices = len(model.trainable_variables[0].value.sharding.device_set)
  # The trained model's loss on the data (its test function: fused too at
  # steps_per_execution > 1).
  losses.append(float(model.evaluate(x, y, batch_size=GLOBAL_BATCH,
                                     verbose=0, return_dict=True)["loss"]))
  return losses, devices, getattr(model.train_function, "dispatches", None)


def main():
  import jax  # pylint: disable=g-import-not-at-top
  if keras.config.backend() != "jax" or len(jax.devices()) != 2:
    sys.exit(f"needs KERAS_BACKEND=jax and 2 devices (XLA_FLAGS="
             f"{os.environ.get('XLA_FLAGS')!r}); got backend "
             f"{keras.config.backend()} with {jax.devices()}")
  one, one_devices, _ = loss_curve(None)
  two, two_devices, _ = loss_curve(
      keras.distribution.DataParallel(devices=jax.devices()))
  # Three steps a dispatch (`fused_steps`) on the same two devices.
  fused, fused_devices, dispatches = loss_curve(
      keras.distribution.DataParallel(devices=jax.devices()),
      steps_per_execution=3)
  print(json.dumps({"one_device": one, "data_parallel": two,
                    "data_parallel_fused": fused,
                    "fused_dispatches": dispatches,
                    "devices": [one_devices, two_devices, fused_devices]}))


if __name__ == "__main__":
  main()
