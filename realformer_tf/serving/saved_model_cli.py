r"""`saved_model_cli` with the tensorflow-text ops registered.

TensorFlow's `saved_model_cli` does not import tensorflow-text, so it cannot
load a SavedModel whose graph holds its ops (the `serve_text` signatures):
"Op type not registered 'CaseFoldUTF8'". This runs the same tool after
`import tensorflow_text`, with the same arguments:

  python -m realformer_tf.serving.saved_model_cli show --dir=OUT --all
  python -m realformer_tf.serving.saved_model_cli run --dir=OUT \
      --tag_set=serve --signature_def=serve_text \
      --input_exprs='text=["the movie was great"]'
"""

import tensorflow_text  # pylint: disable=unused-import  # Registers the ops.
from tensorflow.python.tools import saved_model_cli


if __name__ == "__main__":
  saved_model_cli.main()
