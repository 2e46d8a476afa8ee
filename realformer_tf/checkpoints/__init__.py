"""Checkpoint interop: TF1 RealFormer/BERT and Model Garden TF2 BERT checkpoints."""
from realformer_tf.checkpoints.errors import CheckpointMismatchError
from realformer_tf.checkpoints.tf1_checkpoint import encoder_from_tf1_checkpoint
from realformer_tf.checkpoints.tf1_checkpoint import pretrainer_from_tf1_checkpoint
from realformer_tf.checkpoints.tf1_checkpoint import read_bert_config
from realformer_tf.checkpoints.tf2_checkpoint import encoder_from_tf2_checkpoint
