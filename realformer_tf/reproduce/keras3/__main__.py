"""`python -m realformer_tf.reproduce.keras3`: flags -> plan -> run (see
`__init__`)."""

import os

# The command trains on JAX: Keras' backend unless the caller named another
# (`train.check_backend` then refuses it), set before Keras is imported.
os.environ.setdefault("KERAS_BACKEND", "jax")

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags

from realformer_tf import cli
from realformer_tf.core import run_lock
from realformer_tf.reproduce.keras3 import plan as plan_lib
from realformer_tf.reproduce.keras3 import run
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS


def define_flags():
  """The flags of `plan.Options`, and --dry_run."""
  flags.DEFINE_string("output_dir", None, "Where the data, every run and "
                      "the results go.")
  flags.DEFINE_enum("size", "small", list(plan_lib.SIZES),
                    "small: BERT-Small for one GPU; tiny: a CPU smoke test.")
  flags.DEFINE_list("archs", list(plan_lib.ARCHS),
                    f"Architectures, some of {', '.join(plan_lib.ARCHS)}.")
  flags.DEFINE_integer("seeds", 1, "Pre-training seeds per architecture.")
  flags.DEFINE_list("corpus", [], "BERT-format text files (a sentence a "
                    "line, a blank line between documents); default: the "
                    "quickstart's stdlib corpus.")
  flags.DEFINE_integer("train_steps", None, "Steps per run (default: the "
                       "size's).")
  flags.DEFINE_integer("checkpoint_steps", None, "Steps between checkpoints.")
  flags.DEFINE_integer("steps_per_execution", None, "Steps per device call.")
  flags.DEFINE_enum("dtype_policy", "auto", ["auto", "float32",
                                             "mixed_bfloat16",
                                             "mixed_float16"],
                    "auto: mixed_bfloat16 on a GPU or TPU, else float32.")
  flags.DEFINE_bool("dry_run", False, "Print the plan; train and write "
                    "nothing.")


def options_from_flags() -> plan_lib.Options:
  return plan_lib.Options(
      output_dir=FLAGS.output_dir, size=FLAGS.size, archs=tuple(FLAGS.archs),
      seeds=FLAGS.seeds, corpus=tuple(FLAGS.corpus),
      train_steps=FLAGS.train_steps, checkpoint_steps=FLAGS.checkpoint_steps,
      steps_per_execution=FLAGS.steps_per_execution,
      dtype_policy=FLAGS.dtype_policy)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  plan = plan_lib.make_plan(options_from_flags())
  print(plan_lib.describe(plan), flush=True)
  if not FLAGS.dry_run:
    run.execute(plan)


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["output_dir"])
  # A refusal (a bad flag value, input, or an output dir another process
  # writes to) is its message alone.
  cli.run(main, cli.REFUSALS + (run_lock.ModelDirBusyError,))
