r"""Subprocess body of the distribution tests: per-step training losses.

Runs a few steps of train.py's trainer (Model Garden's task and trainer with
`realformer_tf.training.trainer.Trainer`), from a fixed initial checkpoint,
with dropout off, and writes the per-step `training_loss` as JSON.

  # One device and MirroredStrategy over 2 logical CPUs, in one process;
  # also writes the initial checkpoint:
  python -m tests.helpers.distributed_loss_worker --config_file=tiny.yaml \
      --init_checkpoint=DIR/init --write_init --strategies=one_device,mirrored \
      --output=out.json
  # One worker of a MultiWorkerMirroredStrategy cluster (TF_CONFIG set):
  python -m tests.helpers.distributed_loss_worker --config_file=tiny.yaml \
      --init_checkpoint=DIR/init --strategies=multi_worker_mirrored \
      --output=worker0.json

A strategy needs a fresh process (logical devices and collectives are fixed
at TensorFlow start-up), hence the subprocess.
"""

import json

from absl import app
from absl import flags
import tensorflow as tf

_CONFIG_FILE = flags.DEFINE_string("config_file", None, "Tiny config YAML.")
_INIT = flags.DEFINE_string("init_checkpoint", None, "Initial weights.")
_WRITE_INIT = flags.DEFINE_bool(
    "write_init", False, "Build a model and write --init_checkpoint first.")
_STRATEGIES = flags.DEFINE_list(
    "strategies", ["one_device"],
    "one_device, mirrored (2 logical CPUs), multi_worker_mirrored.")
_STEPS = flags.DEFINE_integer("steps", 3, "Training steps.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON output path.")


def _strategy(name: str) -> tf.distribute.Strategy:
  # Model Garden's factory for what it builds; its "mirrored" on CPU uses one
  # device, so the 2-CPU MirroredStrategy is built directly.
  from official.common import distribute_utils  # pylint: disable=g-import-not-at-top
  if name == "mirrored":
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  return distribute_utils.get_distribution_strategy(
      distribution_strategy=name, num_gpus=0)


def main(_):
  if "mirrored" in _STRATEGIES.value:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  strategies = {name: _strategy(name) for name in _STRATEGIES.value}

  from official.core import task_factory  # pylint: disable=g-import-not-at-top
  from official.core import train_utils  # pylint: disable=g-import-not-at-top
  from realformer_tf.configs import experiments  # pylint: disable=g-import-not-at-top,unused-import
  from realformer_tf.training import train_lib  # pylint: disable=g-import-not-at-top
  from realformer_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  params = train_lib.parse_configuration(train_utils.ParseConfigOptions(
      experiment="realformer/pretraining", config_file=[_CONFIG_FILE.value]))
  params.lock()
  # The pre-training heads create their variables on the first call, so
  # every model is called once before its weights are written or read.
  task = task_factory.get_task(params.task)
  batch = next(iter(task.build_inputs(params.task.train_data)))
  if _WRITE_INIT.value:
    model = task.build_model()
    model(batch)
    # The whole model: `task.init_checkpoint` (`model.checkpoint_items`)
    # leaves out the NSP head's output layer.
    tf.train.Checkpoint(model=model).write(_INIT.value)

  results = {}
  for name, strategy in strategies.items():
    with strategy.scope():
      task = task_factory.get_task(params.task)
      trainer = train_utils.create_trainer(
          params, task, train=True, evaluate=False,
          trainer_cls=trainer_lib.Trainer)
      trainer.model(batch)
    tf.train.Checkpoint(model=trainer.model).read(
        _INIT.value).assert_existing_objects_matched()
    losses = []
    for _ in range(_STEPS.value):
      logs = trainer.train(tf.constant(1, dtype=tf.int32))
      losses.append(float(logs["training_loss"]))
    results[name] = dict(losses=losses,
                         num_replicas=strategy.num_replicas_in_sync,
                         global_step=int(trainer.global_step.numpy()))
  with open(_OUTPUT.value, "w") as f:
    json.dump(results, f)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config_file", "init_checkpoint", "output"])
  app.run(main)
