r"""RealFormer training driver, on TF Model Garden (mirrors official/nlp/train.py).

Pre-train the quickstart model (builds its own data in DIR/data):

  python train.py --experiment=realformer/quickstart --mode=train_and_eval \
      --model_dir=/tmp/realformer_quickstart

Paper recipe (BERT-Base RealFormer on TPU):

  python train.py --experiment=realformer/pretraining --mode=train \
      --model_dir=gs://bucket/realformer_base \
      --config_file=official_configs/models/bert_base.yaml \
      --config_file=official_configs/experiments/pretrain_paper.yaml \
      --config_file=official_configs/runtime/tpu.yaml --tpu=my-tpu \
      --params_override=task.train_data.input_path=gs://bucket/wiki/train-*

Flags are Model Garden's (`official.common.flags`): --experiment, --mode
(train, eval, train_and_eval, continuous_eval, train_and_post_eval),
--model_dir, --config_file (repeatable; later files override earlier ones),
--params_override (applied last), --tpu, --gin_file, --gin_params; plus
--quickstart_input_files, --enable_async_checkpointing,
--cluster_start_timeout_s and --dry_run (print
the run's plan, `training/run_plan.py`, check it, and write nothing).

A rerun of the same command resumes from the latest checkpoint in
--model_dir and stops at trainer.train_steps. SIGTERM or SIGINT ends a run
at its next step with one line ("stopped at step N by SIGTERM; latest
checkpoint: ...") and exit status 143 (SIGINT: 130), its lock released; a
second signal ends it at once.

A refusal (a bad value, file or run directory, found before anything is
written) prints its message alone and exits with status 1; --traceback adds
the Python traceback.

A quickstart run pins its CPU numerics (oneDNN, threads) before TensorFlow
loads, so it prints the same numbers on every x86-64 CPU with the same L1
data cache (realformer_tf/training/cpu_numerics.py).
"""

import sys

from realformer_tf.training import cpu_noise
from realformer_tf.training import cpu_numerics

# Before TensorFlow loads (oneDNN reads its settings once, at import): the
# quickstart's numbers are the same on every CPU of one L1 size; a machine without
# a GPU driver is spared TensorFlow's start-up notices.
cpu_numerics.pin(sys.argv[1:])
cpu_noise.quiet()

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import flags
from absl import logging
import gin

from official.common import flags as tfm_flags
from official.core import train_utils
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.training import multi_worker
from realformer_tf.training import process_exit
from realformer_tf.training import train_lib
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS

flags.DEFINE_list(
    "quickstart_input_files", None,
    "realformer/quickstart only: BERT-format text files (one sentence per "
    "line, blank line between documents) to build the corpus from, instead "
    "of the Python standard library docstrings.")
flags.DEFINE_bool(
    "dry_run", False,
    "Print the run's plan (mode, files per split, vocabularies, init and "
    "resumed checkpoints, derived settings), check it, and write nothing.")
flags.DEFINE_integer(
    "cluster_start_timeout_s", multi_worker.START_TIMEOUT_S,
    "A multi-worker run whose peers (TF_CONFIG) have not all joined within "
    "this many seconds ends on one line naming them; 0: wait for ever.",
    lower_bound=0)
flags.DEFINE_bool(
    "enable_async_checkpointing", True,
    "Save checkpoints in a background thread (as official/nlp/train.py).")


def main(_):
  logging.set_verbosity(logging.INFO)
  gin.parse_config_files_and_bindings(FLAGS.gin_file, FLAGS.gin_params)
  if FLAGS.dry_run:
    train_lib.dry_run(FLAGS)
    return
  train_lib.run(FLAGS)
  train_utils.save_gin_config(FLAGS.mode, FLAGS.model_dir)


if __name__ == "__main__":
  tfm_flags.define_flags()
  flags.mark_flags_as_required(["experiment", "mode", "model_dir"])
  # Ends with the closing summary, without Python's finalization, which
  # could sit idle for a minute (training/process_exit.py); a refusal is
  # its message alone, --traceback (realformer_tf/cli.py) adds where.
  process_exit.run_and_exit(main, train_lib.REFUSALS)
