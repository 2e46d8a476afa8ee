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
  """The flags of `plan.Options` (`config_file`: its `config_files`), and
  --dry_run. A face's own flag is refused by the other face."""
  f = flags
  f.DEFINE_string("output_dir", None, "Where the data, runs and results go.")
  f.DEFINE_enum("face", None, list(plan_lib.FACES), "Default: keras3 where "
                "TensorFlow is not importable or JAX sees an accelerator.")
  f.DEFINE_enum("size", "tiny", list(plan_lib.SIZES), "tiny: a CPU test; "
                "mini: an hour on a CPU; small: BERT-Small on one GPU.")
  f.DEFINE_list("archs", list(plan_lib.DEFAULT_ARCHS),
                f"Some of {', '.join(plan_lib.ARCHS)}.")
  f.DEFINE_integer("seeds", 3, "Pre-training seeds per architecture.")
  f.DEFINE_list("corpus", [], "BERT-format text files; default: WikiText-2 "
                "(tf_keras, if there), else the quickstart's stdlib corpus.")
  f.DEFINE_list("glue_tasks", list(plan_lib.DEFAULT_GLUE_TASKS),
                "GLUE tasks to fine-tune on (those in --glue_dir).")
  f.DEFINE_string("glue_dir", None, "GLUE TSVs; default: <data dir>/glue.")
  f.DEFINE_string("squad_dir", None, "SQuAD v1.1's train-v1.1.json and "
                  "dev-v1.1.json (keras3); default: <data dir>/squad.")
  f.DEFINE_integer("train_steps", None, "Pre-training steps.")
  for name, what in (("train_data", "pre-training TFRecords"),
                     ("validation_data", "held-out TFRecords"),
                     ("vocab_file", "--train_data's vocabulary"),
                     ("params_override", "pre-training overrides")):
    f.DEFINE_string(name, "", f"tf_keras: {what}.")
  f.DEFINE_multi_string("config_file", None, "tf_keras: more YAML for every "
                        "pre-training run (e.g. a runtime file).")
  for name, what in (("checkpoint_steps", "steps between checkpoints"),
                     ("steps_per_execution", "steps per device call")):
    f.DEFINE_integer(name, None, f"keras3: {what}.")
  f.DEFINE_enum("dtype_policy", "auto", list(plan_lib.DTYPE_POLICIES),
                "keras3: auto is mixed_bfloat16 on a GPU, else float32.")
  f.DEFINE_bool("dry_run", False, "Print the plan; write nothing.")


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
  for name in ("glue", "squad"):
    if values[f"{name}_dir"] is None:
      values[f"{name}_dir"] = f"{corpus_text.default_data_dir()}/{name}"
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
