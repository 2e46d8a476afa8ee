"""Put this folder first on PYTHONPATH and TensorFlow, tensorflow-text,
tf_keras and Model Garden cannot be imported in that Python: as on a GPU
machine that has JAX and Keras only (`import tensorflow` raises
ModuleNotFoundError, as an uninstalled package does)."""
import sys

for _name in ("tensorflow", "tensorflow_text", "tf_keras", "official"):
  sys.modules[_name] = None
