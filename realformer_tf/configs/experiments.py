"""Registered RealFormer experiments (`--experiment=realformer/...`).

Each factory returns a Model Garden `ExperimentConfig` whose encoder is the
RealFormer config in the `type: any` slot, and records its own name in
`task.name`. Model Garden writes the whole config to `model_dir/params.yaml`,
so `load_experiment_config(model_dir)` can rebuild it through the registered
factory (plain YAML loading would lose the `any` encoder's builder).
"""

import os

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from official.modeling import optimization
from official.nlp.configs import bert
from official.nlp.data import pretrain_dataloader
from official.nlp.tasks import masked_lm
from realformer_tf.configs import encoders

PRETRAINING = "realformer/pretraining"


def paper_optimizer(learning_rate: float = 1e-4,
                    warmup_steps: int = 10000) -> optimization.OptimizationConfig:
  """The paper's AdamW: decay 0.01 (not on LayerNorm or bias), warm-up, linear decay to 0."""
  return optimization.OptimizationConfig({
      "optimizer": {
          "type": "adamw",
          "adamw": {
              "weight_decay_rate": 0.01,
              "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"],
          },
      },
      "learning_rate": {
          "type": "polynomial",
          "polynomial": {
              "initial_learning_rate": learning_rate,
              "end_learning_rate": 0.0,
              "power": 1.0,
          },
      },
      "warmup": {
          "type": "polynomial",
          "polynomial": {"warmup_steps": warmup_steps, "power": 1.0},
      },
  })


@exp_factory.register_config_factory(PRETRAINING)
def realformer_pretraining() -> cfg.ExperimentConfig:
  """BERT pre-training (MLM + NSP) with a RealFormer encoder (BERT-Base size)."""
  return cfg.ExperimentConfig(
      task=masked_lm.MaskedLMConfig(
          name=PRETRAINING,
          model=bert.PretrainerConfig(
              encoder=encoders.encoder_config(),
              cls_heads=[
                  bert.ClsHeadConfig(inner_dim=768, num_classes=2,
                                     dropout_rate=0.1, name="next_sentence")
              ]),
          train_data=pretrain_dataloader.BertPretrainDataConfig(),
          validation_data=pretrain_dataloader.BertPretrainDataConfig(
              is_training=False)),
      trainer=cfg.TrainerConfig(
          train_steps=1000000,
          optimizer_config=paper_optimizer()),
      restrictions=[
          "task.train_data.is_training != None",
          "task.validation_data.is_training != None",
      ])


def load_experiment_config(model_dir: str) -> cfg.ExperimentConfig:
  """Rebuilds the experiment config a run recorded in `model_dir/params.yaml`.

  The registered factory named by `task.name` supplies the config classes
  (including the bound RealFormer encoder); the YAML supplies the values.
  """
  path = os.path.join(model_dir, "params.yaml")
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"{path} not found: is {model_dir!r} a model_dir written by train.py?")
  params_dict = hyperparams.read_yaml_to_params_dict(path).as_dict()
  name = (params_dict.get("task") or {}).get("name")
  if not name:
    raise ValueError(
        f"{path} has no task.name, so the experiment that wrote it is unknown.")
  config = exp_factory.get_exp_config(name)
  config.override(params_dict, is_strict=True)
  config.validate()
  return config
