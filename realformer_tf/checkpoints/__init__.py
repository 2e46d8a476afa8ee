"""Checkpoints and run directories: TF1/TF2 BERT checkpoints, a run's files,
and the weight bridge to the Keras 3 face. Names load on first access, so
`errors` and `keras3_weight_map` import without TensorFlow.
"""
import importlib

_LAZY_NAMES = {
    "CheckpointMismatchError": "errors",
    "encoder_from_tf1_checkpoint": "tf1_checkpoint",
    "pretrainer_from_tf1_checkpoint": "tf1_checkpoint",
    "read_bert_config": "tf1_checkpoint",
    "encoder_from_tf2_checkpoint": "tf2_checkpoint",
}


def __getattr__(name):
  if name in _LAZY_NAMES:
    module = importlib.import_module(
        f"realformer_tf.checkpoints.{_LAZY_NAMES[name]}")
    return getattr(module, name)
  raise AttributeError(
      f"module 'realformer_tf.checkpoints' has no attribute {name!r}")
