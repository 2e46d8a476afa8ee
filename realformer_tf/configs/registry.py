"""Registers every `realformer/*` experiment with Model Garden's `exp_factory`.

Import this module wherever an experiment is looked up by name (train.py,
export, analysis, `experiments.load_experiment_config`).
"""

# pylint: disable=unused-import
from realformer_tf.configs import experiments  # realformer/{pretraining,quickstart}
from realformer_tf.configs import finetuning  # realformer/glue
from realformer_tf.configs import squad  # realformer/squad
from realformer_tf.configs import translation  # realformer/translation
