r"""`saved_model_cli` with the tensorflow-text ops registered (`serve_text`).

  python -m realformer_tf.serving.saved_model_cli show --dir=OUT --all
"""

import tensorflow_text  # pylint: disable=unused-import  # Registers the ops.
from tensorflow.python.tools import saved_model_cli


if __name__ == "__main__":
  saved_model_cli.main()
