"""`python -m realformer_tf.reproduce`: flags -> plan -> run (see `__init__`)."""

import dataclasses
import os

from absl import app
from absl import flags

from realformer_tf.data import corpus_text
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from realformer_tf.reproduce import run
from realformer_tf.training import process_exit
from realformer_tf.training import train_lib

FLAGS = flags.FLAGS


def define_flags():
  """The flags of `plan.Options` (see the package docstring), and --dry_run."""
  flags.DEFINE_string("output_dir", None, "Where every run and result goes.")
  flags.DEFINE_enum("scale", "tiny", list(plan_lib.SCALES), "Size and budget.")
  flags.DEFINE_list("archs", list(plan_lib.DEFAULT_ARCHS),
                    f"Architectures, some of {', '.join(plan_lib.ARCHS)}.")
  flags.DEFINE_integer("seeds", 3, "Pre-training seeds per architecture.")
  flags.DEFINE_list("corpus", [], "BERT-format text files to pre-train on; "
                    "default: WikiText-2 from the shared data dir, else the "
                    "quickstart's stdlib corpus.")
  flags.DEFINE_string("train_data", "", "Pre-training TFRecords (glob).")
  flags.DEFINE_string("validation_data", "", "Held-out TFRecords (glob).")
  flags.DEFINE_string("vocab_file", "", "The vocabulary of --train_data.")
  flags.DEFINE_list("glue_tasks", list(plan_lib.DEFAULT_GLUE_TASKS),
                    "GLUE tasks to fine-tune on (those in --glue_dir).")
  flags.DEFINE_string("glue_dir", None, "GLUE TSVs, one directory per task; "
                      "default: <data dir>/glue.")
  flags.DEFINE_integer("train_steps", None, "Pre-training steps.")
  flags.DEFINE_multi_string("config_file", None, "More YAML for every "
                            "pre-training run (e.g. a runtime file).")
  flags.DEFINE_string("params_override", "", "Pre-training overrides.")
  flags.DEFINE_bool("dry_run", False, "Print the plan and its estimated "
                    "time; build, train and write nothing.")


def options_from_flags() -> plan_lib.Options:
  """The flags of the `Options` fields (`config_files`: `--config_file`)."""
  values = {f.name: FLAGS[f.name].value for f in
            dataclasses.fields(plan_lib.Options) if f.name in FLAGS}
  values = {k: tuple(v) if isinstance(v, list) else v
            for k, v in values.items()}
  if values["glue_dir"] is None:
    values["glue_dir"] = os.path.join(corpus_text.default_data_dir(),
                                      "glue")
  return plan_lib.Options(config_files=tuple(FLAGS.config_file or ()),
                          **values)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  options = options_from_flags()
  if FLAGS.dry_run:
    print(report.describe(plan_lib.make_plan(options)))
    return
  run.execute(run.prepare(options))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["output_dir"])
  # A signal stops the run at its next step, saved (exit 143/130).
  process_exit.run_and_exit(main, train_lib.REFUSALS)
