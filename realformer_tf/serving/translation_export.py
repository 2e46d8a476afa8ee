r"""Exports a `realformer/translation` run as a SavedModel with `translate`.

  python -m realformer_tf.serving.translation_export --model_dir=/runs/ende \
      --export_dir=/serving/ende/1

`translate`: raw source `text` to `translations`, tokenization, beam search
and detokenization in the graph; bad input fails naming `text`.
"""

from typing import Dict, Optional

from absl import flags
import tensorflow as tf

from official.nlp.serving import serving_modules as mg_serving_modules
from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.serving import export
from realformer_tf.serving import text_processing
from realformer_tf.tasks import translation as rf_translation

SIGNATURE = "translate"


class TranslationModule(mg_serving_modules.Translation):
  """Model Garden's translation export module, with checked inputs."""

  def __init__(self, params, model, max_source_length: int):
    super().__init__(params, model)
    self._max_source_length = int(max_source_length)

  @tf.function
  def serve_text(self, text: tf.Tensor) -> Dict[str, tf.Tensor]:
    with tf.control_dependencies([
        text_processing.assert_valid_utf8(text, "text")]):
      tokens = self._sp_tokenizer.tokenize(text)     # ragged, ends with EOS
    lengths = tokens.row_lengths()
    checks = [
        tf.debugging.assert_greater(
            lengths, tf.constant(1, lengths.dtype),
            message="text: an input sentence is empty (no tokens besides "
            "EOS)"),
        tf.debugging.assert_less_equal(
            lengths, tf.constant(self._max_source_length, lengths.dtype),
            message=f"text: an input sentence is longer than the model "
            f"maximum, {self._max_source_length} tokens (EOS included)"),
    ]
    with tf.control_dependencies(checks):
      ids = tf.identity(tokens.to_tensor(0))
    outputs = self.serve({"inputs": ids})["outputs"]
    # Beam search pads after EOS; keep only what precedes the first EOS.
    after_eos = tf.cumsum(tf.cast(tf.equal(outputs, self._eos_id), tf.int32),
                          axis=1) > 0
    outputs = tf.where(after_eos, tf.zeros_like(outputs), outputs)
    return {"translations": self._sp_tokenizer.detokenize(outputs)}


def export_translation(model_dir: str,
                       export_dir: str,
                       checkpoint_path: Optional[str] = None,
                       max_source_length: Optional[int] = None,
                       overwrite: bool = False) -> str:
  """Builds, restores and exports a translation run (before anything is
  written, a ValueError for another run, no checkpoint or an unusable
  `export_dir`); returns `export_dir`."""
  config, checkpoint = export.run_to_export(model_dir, export_dir,
                                            checkpoint_path, overwrite)
  if not isinstance(config.task, rf_translation.RealFormerTranslationConfig):
    raise ValueError(f"{model_dir!r} holds a {config.task.name!r} run, not "
                     "realformer/translation.")
  if max_source_length is None:
    max_source_length = config.task.validation_data.max_seq_length
  if max_source_length < 2:
    raise ValueError(f"max_source_length={max_source_length} must be >= 2.")
  ones = tf.ones([1, 2], tf.int32)
  model = export.build_model(config.task, checkpoint,
                             {"inputs": ones, "targets": ones})
  module = TranslationModule(
      TranslationModule.Params(
          sentencepiece_model_path=config.task.sentencepiece_model_path),
      model, max_source_length)
  export.write_saved_model(module, {"serve_text": SIGNATURE}, export_dir)
  return export_dir


def define_flags():
  export.define_run_flags()
  flags.DEFINE_integer("max_source_length", None,
                       "Longest accepted source in tokens (EOS included); "
                       "default: task.validation_data.max_seq_length.")


main = utils.flags_main(export_translation, lambda export_dir: {
    "export_dir": export_dir, "signatures": [SIGNATURE]})


if __name__ == "__main__":
  define_flags()
  cli.run(main)
