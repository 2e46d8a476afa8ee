"""`python -m realformer_tf.reproduce`: flags -> face -> plan -> run (see
`__init__`). The first line printed names the face and why it was chosen."""

import dataclasses
import importlib.util
import os
import sys
from typing import Tuple

from absl import app
from absl import flags

from realformer_tf import cli
from realformer_tf.data import corpus_text
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import run
from realformer_tf.training import process_exit

FLAGS = flags.FLAGS


def define_flags():
  """The flags of `plan.Options`, and --dry_run."""
  flags.DEFINE_string("output_dir", None, "Where the data, every run and "
                      "the results go.")
  flags.DEFINE_enum("face", None, list(plan_lib.FACES), "Default: keras3 "
                    "where TensorFlow is not importable or JAX sees an "
                    "accelerator, else tf_keras.")
  flags.DEFINE_enum("size", "tiny", list(plan_lib.SIZES),
                    "tiny: a CPU test; mini: an hour on a CPU; small: "
                    "BERT-Small on one GPU; base, large: the paper's recipe.")
  flags.DEFINE_list("archs", list(plan_lib.DEFAULT_ARCHS),
                    f"Architectures, some of {', '.join(plan_lib.ARCHS)}.")
  flags.DEFINE_integer("seeds", 3, "Pre-training seeds per architecture.")
  flags.DEFINE_list("corpus", [], "BERT-format text files to pre-train on; "
                    "default (tf_keras: WikiText-2 from the data dir, else) "
                    "the quickstart's stdlib corpus.")
  flags.DEFINE_list("glue_tasks", list(plan_lib.DEFAULT_GLUE_TASKS),
                    "GLUE tasks to fine-tune on (those in --glue_dir).")
  flags.DEFINE_string("glue_dir", None, "GLUE TSVs, one directory per task; "
                      "default: <data dir>/glue.")
  flags.DEFINE_integer("train_steps", None, "Pre-training steps (default: "
                       "the size's).")
  flags.DEFINE_string("train_data", "", "tf_keras: pre-training TFRecords.")
  flags.DEFINE_string("validation_data", "", "tf_keras: held-out TFRecords.")
  flags.DEFINE_string("vocab_file", "", "tf_keras: --train_data's vocabulary.")
  flags.DEFINE_multi_string("config_file", None, "tf_keras: more YAML for "
                            "every pre-training run (e.g. a runtime file).")
  flags.DEFINE_string("params_override", "", "tf_keras: pre-training "
                      "overrides.")
  flags.DEFINE_integer("checkpoint_steps", None, "keras3: steps between "
                       "checkpoints.")
  flags.DEFINE_integer("steps_per_execution", None, "keras3: steps per "
                       "device call.")
  flags.DEFINE_enum("dtype_policy", "auto", list(plan_lib.DTYPE_POLICIES),
                    "keras3: auto is mixed_bfloat16 on a GPU or TPU, else "
                    "float32.")
  flags.DEFINE_bool("dry_run", False, "Print the plan; build, train and "
                    "write nothing.")


def default_face() -> Tuple[str, str]:
  """(face, why): keras3 where TensorFlow is not importable or JAX sees an
  accelerator (a GPU machine has JAX and no TensorFlow), else tf_keras."""
  if importlib.util.find_spec("tensorflow") is None:
    return "keras3", "TensorFlow is not importable"
  if importlib.util.find_spec("jax") is None:
    return "tf_keras", "JAX is not installed"
  import jax  # pylint: disable=g-import-not-at-top (only to choose).
  platform = jax.default_backend()
  if platform != "cpu":
    return "keras3", f"JAX sees a {platform.upper()}"
  return "tf_keras", "TensorFlow is importable and JAX sees no accelerator"


def options_from_flags(face: str) -> plan_lib.Options:
  names = {f.name for f in dataclasses.fields(plan_lib.Options)}
  values = {n: FLAGS[n].value for n in names - {"face"} if n in FLAGS}
  values = {k: tuple(v) if isinstance(v, list) else v
            for k, v in values.items()}
  if values["glue_dir"] is None:
    values["glue_dir"] = corpus_text.default_data_dir() + "/glue"
  return plan_lib.Options(face=face, config_files=tuple(FLAGS.config_file or
                                                        ()), **values)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  name, why = (FLAGS.face, "--face") if FLAGS.face else default_face()
  print(f"Face: {name} ({why}).", flush=True)
  if name == "keras3":  # It trains on JAX: Keras' backend unless the caller
    os.environ.setdefault("KERAS_BACKEND", "jax")  # named another (refused).
  face = plan_lib.load_face(name)
  try:
    plan = plan_lib.make_plan(options_from_flags(name), face)
    print(run.describe(plan), flush=True)
    if not FLAGS.dry_run:
      run.execute(plan)
  except face.REFUSALS as e:  # pylint: disable=catching-non-exception
    cli.print_refusal(e)  # Its message alone, the last line.
    sys.exit(1)


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["output_dir"])
  # A signal stops the run at its next step, saved (exit 143/130).
  process_exit.run_and_exit(main)
