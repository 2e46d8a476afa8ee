"""Checkpoints and run directories: TF1 RealFormer/BERT and Model Garden TF2
BERT checkpoints, a run directory's files (`run_directory`), and the weight
bridge to the Keras 3 face (`keras3_bridge`, `keras3_weight_map`).

The names below load their (TensorFlow) modules on first access, so that
`errors` and `keras3_weight_map` import without TensorFlow (the Keras 3
weight map raises its `CheckpointMismatchError` on JAX or PyTorch too).
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
