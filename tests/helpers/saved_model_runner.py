"""Calls SavedModel signatures in a fresh process (no Keras model in memory).

  python -m tests.helpers.saved_model_runner REQUESTS.pkl RESULTS.pkl

REQUESTS is a pickled list of (export_dir, name, signature_key, {input name:
numpy array}); RESULTS a pickled {name: {output key: numpy array}} or
{name: {"error": "<exception type>: <message>"}}. Each SavedModel is loaded
once with `tf.saved_model.load`, after `import tensorflow_text` (which a
process serving the text signatures needs).
"""

import pickle
import sys

import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  # Registers the ops.


def main(argv):
  with open(argv[1], "rb") as f:
    requests = pickle.load(f)
  loaded = {}
  results = {}
  for export_dir, name, signature, inputs in requests:
    if export_dir not in loaded:
      loaded[export_dir] = tf.saved_model.load(export_dir)
    function = loaded[export_dir].signatures[signature]
    try:
      outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
      results[name] = {k: v.numpy() for k, v in outputs.items()}
    except Exception as e:  # pylint: disable=broad-except
      results[name] = {"error": f"{type(e).__name__}: {e}"}
  with open(argv[2], "wb") as f:
    pickle.dump(results, f)


if __name__ == "__main__":
  main(sys.argv)
