"""Calls SavedModel signatures in a fresh process (no Keras model in memory).

  python -m tests.helpers.saved_model_runner REQUESTS.pkl RESULTS.pkl

REQUESTS is a pickled list of (export_dir, name, signature_key, {input name:
numpy array}) or, for a `saved_model_cli run`, (export_dir, name,
signature_key, {"input_exprs" or "input_examples": the flag's string},
outdir); RESULTS a pickled {name: {output key: numpy array}} ({} for a
`saved_model_cli run`, whose outputs are its .npy files in outdir) or
{name: {"error": "<exception type>: <message>"}}. Each SavedModel is loaded
once with `tf.saved_model.load`, after `import tensorflow_text` (which a
process serving the text signatures needs); the `saved_model_cli run`s call
the functions its command line calls (`realformer_tf.serving.saved_model_cli`
is that tool after the same import), so several share one process.
"""

import pickle
import sys

import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  # Registers the ops.
from tensorflow.python.tools import saved_model_cli


def run_cli(export_dir, signature, inputs, outdir):
  """`saved_model_cli run --dir export_dir --tag_set serve --signature_def
  signature --outdir outdir --overwrite --input_exprs/--input_examples ...`."""
  feed = saved_model_cli.load_inputs_from_input_arg_string(
      "", inputs.get("input_exprs", ""), inputs.get("input_examples", ""))
  saved_model_cli.run_saved_model_with_feed_dict(
      export_dir, "serve", signature, feed, outdir, True)
  return {}


def main(argv):
  with open(argv[1], "rb") as f:
    requests = pickle.load(f)
  loaded = {}
  results = {}
  for export_dir, name, signature, inputs, *outdir in requests:
    try:
      if outdir:
        results[name] = run_cli(export_dir, signature, inputs, outdir[0])
        continue
      if export_dir not in loaded:
        loaded[export_dir] = tf.saved_model.load(export_dir)
      function = loaded[export_dir].signatures[signature]
      outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
      results[name] = {k: v.numpy() for k, v in outputs.items()}
    except Exception as e:  # pylint: disable=broad-except
      results[name] = {"error": f"{type(e).__name__}: {e}"}
  with open(argv[2], "wb") as f:
    pickle.dump(results, f)


if __name__ == "__main__":
  main(sys.argv)
