r"""Attention entropy / adjacent-head JSD analysis of trained RealFormer models.

  python -m realformer_tf.analysis --model_dir=runs/realformer \
      --compare_model_dir=runs/bert --output_dir=/tmp/attention

Writes `entropy.png` (nats), `jsd.png` (bits, in [0, 1]) and `summary.json`.
"""

from absl import app
from absl import flags

from realformer_tf import cli
from realformer_tf.analysis import runner
from realformer_tf.analysis import stats

# Each flag is the `runner.run_analysis` argument of the same name.
_FLAGS = (
    flags.DEFINE_string("model_dir", None, "Model dir written by train.py "
                        "(params.yaml + checkpoints).", required=True),
    flags.DEFINE_string("output_dir", None, "Where to write entropy.png, "
                        "jsd.png, summary.json.", required=True),
    flags.DEFINE_string("compare_model_dir", None, "Optional second model dir "
                        "(e.g. a BERT baseline), analysed on the same examples "
                        "and plotted side by side."),
    flags.DEFINE_integer("num_examples", 8192, "Number of held-out examples "
                         "to analyse (fewer if the data runs out)."),
    flags.DEFINE_integer("batch_size", 32, "Examples per batch."),
    flags.DEFINE_string("input_data", None, "TFRecord glob (same format as "
                        "the run's task.validation_data) replacing its "
                        "input_path."),
    flags.DEFINE_string("input_text", None, "Plain-text file, one example per "
                        "non-empty line, tokenized with tensorflow-text's "
                        "BertTokenizer (needs --vocab_file)."),
    flags.DEFINE_string("vocab_file", None,
                        "WordPiece vocab.txt for --input_text."),
    flags.DEFINE_integer("seq_length", None, "Sequence length for --input_text "
                         "(default: the validation data's seq_length, capped "
                         "by max_position_embeddings)."),
    flags.DEFINE_boolean("lower_case", True,
                         "Lower-case --input_text (uncased vocab)."),
    flags.DEFINE_integer("reservoir_size", stats.DEFAULT_CAPACITY,
                         "Values kept per (layer, head) for quantiles and "
                         "violins (uniform reservoir sample; exact counts and "
                         "means are kept regardless)."),
    flags.DEFINE_integer("seed", 0, "Seed of the reservoir samplers."),
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  runner.run_analysis(**{flag.name: flag.value for flag in _FLAGS})


if __name__ == "__main__":
  cli.run(main)
