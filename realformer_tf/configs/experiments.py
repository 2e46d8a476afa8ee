"""Registered RealFormer experiments (`--experiment=realformer/...`).

Each factory returns a Model Garden `ExperimentConfig` whose encoder is the
RealFormer config in the `type: any` slot, and records its own name in
`task.name`. Model Garden writes the whole config to `model_dir/params.yaml`,
so `load_experiment_config(model_dir)` can rebuild it through the registered
factory (plain YAML loading would lose the `any` encoder's builder).

Experiments:
  realformer/pretraining  BERT pre-training (MLM + NSP), BERT-Base sized
                          RealFormer, the paper's AdamW. Bring your own data
                          (`official_configs/experiments/pretrain_paper.yaml`).
  realformer/quickstart   A tiny RealFormer pre-trained on a corpus built on
                          the fly (`prepare_data` below), minutes on a CPU.
"""

import dataclasses
import os
from typing import Optional, Sequence

from absl import logging

from official.core import config_definitions as cfg
from official.core import exp_factory
from official.core import task_factory
from official.modeling import hyperparams
from official.modeling import optimization
from official.nlp.configs import bert
from official.nlp.data import pretrain_dataloader
from official.nlp.tasks import masked_lm
from realformer_tf.configs import encoders
from realformer_tf.tasks import masked_lm as rf_masked_lm

PRETRAINING = "realformer/pretraining"
QUICKSTART = "realformer/quickstart"

# `prepare_data` builds the quickstart corpus in this subfolder of model_dir.
QUICKSTART_DATA_SUBDIR = "data"


@dataclasses.dataclass
class RealFormerMaskedLMConfig(masked_lm.MaskedLMConfig):
  """Model Garden's `MaskedLMConfig` plus the vocabulary the data was made with.

  Attributes:
    vocab_file: The WordPiece vocabulary the pre-training records were
      tokenized with. Not read by training (the records hold token ids), but
      checked before training starts (a valid vocabulary whose size equals
      `model.encoder.*.vocab_size`) and recorded in `params.yaml` for
      fine-tuning. Empty: not checked.
  """
  vocab_file: str = ""


# The task is Model Garden's plus float16 loss scaling (tasks/masked_lm.py).
task_factory.register_task_cls(RealFormerMaskedLMConfig)(
    rf_masked_lm.MaskedLMTask)


def paper_optimizer(learning_rate: float = 1e-4,
                    warmup_steps: int = 10000,
                    decay_steps: int = 1000000
                    ) -> optimization.OptimizationConfig:
  """The paper's AdamW: decay 0.01 (not on LayerNorm or bias), warm-up, linear decay to 0.

  Args:
    learning_rate: Peak learning rate (reached after the warm-up).
    warmup_steps: Linear warm-up steps.
    decay_steps: Steps over which the rate decays linearly to 0; set it to
      `trainer.train_steps` (Model Garden's polynomial schedule needs it).

  Returns:
    An `OptimizationConfig`.
  """
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
              "decay_steps": decay_steps,
              "end_learning_rate": 0.0,
              "power": 1.0,
          },
      },
      "warmup": {
          "type": "polynomial",
          "polynomial": {"warmup_steps": warmup_steps, "power": 1.0},
      },
  })


def _pretraining_task(name: str, hidden_size: int, **encoder_kwargs
                      ) -> RealFormerMaskedLMConfig:
  """MLM + NSP task whose NSP head's inner_dim equals the encoder width."""
  return RealFormerMaskedLMConfig(
      name=name,
      model=bert.PretrainerConfig(
          encoder=encoders.encoder_config(hidden_size=hidden_size,
                                          **encoder_kwargs),
          cls_heads=[
              bert.ClsHeadConfig(inner_dim=hidden_size, num_classes=2,
                                 dropout_rate=0.1, name="next_sentence")
          ]),
      train_data=pretrain_dataloader.BertPretrainDataConfig(),
      validation_data=pretrain_dataloader.BertPretrainDataConfig(
          is_training=False))


@exp_factory.register_config_factory(PRETRAINING)
def realformer_pretraining() -> cfg.ExperimentConfig:
  """BERT pre-training (MLM + NSP) with a RealFormer encoder (BERT-Base size)."""
  return cfg.ExperimentConfig(
      task=_pretraining_task(PRETRAINING, hidden_size=768),
      trainer=cfg.TrainerConfig(
          train_steps=1000000,
          optimizer_config=paper_optimizer()),
      restrictions=[
          "task.train_data.is_training != None",
          "task.validation_data.is_training != None",
      ])


# Quickstart size and schedule (see README for measured times): 2 layers,
# hidden 128, seq 64, batch 32, 1500 steps = ~10 passes over the ~5k
# stdlib-docstring sequences. The train records hold `_QUICKSTART_DUPE_FACTOR`
# copies of the text, each masked anew, so every pass sees fresh masks:
# with one static copy and 20 passes the model memorised the masks (train MLM
# accuracy 0.20, held-out 0.14). Dropout 0: with fresh masks and ~10 passes
# the tiny model underfits rather than overfits.
_QUICKSTART_STEPS = 1500
_QUICKSTART_DUPE_FACTOR = 10
_QUICKSTART_LEARNING_RATE = 2e-3
# Target size of the learned WordPiece vocabulary (the real size is set from
# the data: ~1k on the stdlib corpus, which has ~250k WordPieces).
_QUICKSTART_VOCAB_SIZE = 1000


@exp_factory.register_config_factory(QUICKSTART)
def realformer_quickstart() -> cfg.ExperimentConfig:
  """A tiny RealFormer pre-trained (MLM + NSP) on a corpus built on the fly.

  The input paths are left empty: `prepare_data` (called by train.py) builds
  the stdlib-docstring corpus (or `--quickstart_input_files`) in
  `model_dir/data`, then fills in the paths, `task.vocab_file` and the real
  vocabulary size. Sequence length and predictions per sequence are read
  from this config, so overriding them builds matching data.
  """
  task = _pretraining_task(
      QUICKSTART, hidden_size=128, num_layers=2, num_attention_heads=4,
      intermediate_size=512, vocab_size=_QUICKSTART_VOCAB_SIZE,
      max_position_embeddings=64, dropout_rate=0.0,
      attention_dropout_rate=0.0)
  for data in (task.train_data, task.validation_data):
    data.seq_length = 64
    data.max_predictions_per_seq = 10
  task.train_data.global_batch_size = 32
  task.validation_data.global_batch_size = 64
  # The eval split is small: keep its last partial batch.
  task.validation_data.drop_remainder = False
  return cfg.ExperimentConfig(
      task=task,
      runtime=cfg.RuntimeConfig(distribution_strategy="one_device"),
      trainer=cfg.TrainerConfig(
          train_steps=_QUICKSTART_STEPS,
          steps_per_loop=100,
          summary_interval=100,
          checkpoint_interval=500,
          max_to_keep=3,
          validation_interval=_QUICKSTART_STEPS // 2,
          validation_steps=-1,
          optimizer_config=paper_optimizer(
              learning_rate=_QUICKSTART_LEARNING_RATE, warmup_steps=100,
              decay_steps=_QUICKSTART_STEPS)),
      restrictions=[
          "task.train_data.is_training != None",
          "task.validation_data.is_training != None",
      ])


def prepare_data(params: cfg.ExperimentConfig,
                 model_dir: str,
                 input_files: Optional[Sequence[str]] = None) -> Optional[dict]:
  """Builds the data an experiment makes for itself, and points `params` at it.

  Only `realformer/quickstart` makes its own data: when both of its input
  paths are empty, the stdlib-docstring corpus (or `input_files`, BERT-format
  text) becomes a WordPiece vocabulary and MLM/NSP records in
  `model_dir/data` (cached there: a rerun reuses them), built with the
  config's `seq_length` and `max_predictions_per_seq`. The config then gets
  the record paths, `task.vocab_file` and the real vocabulary size.

  Args:
    params: The parsed experiment config, not locked; changed in place.
    model_dir: The run's model directory.
    input_files: Text files for the quickstart corpus
      (`--quickstart_input_files`).

  Returns:
    The `prepare_quickstart_data` result, or None when nothing was built.

  Raises:
    ValueError: If `input_files` is given to another experiment or next to
      explicit input paths, only one of the two input paths is set, or the
      train and validation data disagree on the record shapes.
  """
  task = params.task
  if task.name != QUICKSTART:
    if input_files:
      raise ValueError(
          "--quickstart_input_files only applies to "
          f"--experiment={QUICKSTART}, not to task.name={task.name!r}.")
    return None
  paths = {"task.train_data.input_path": task.train_data.input_path,
           "task.validation_data.input_path": task.validation_data.input_path}
  if all(paths.values()):
    if input_files:
      raise ValueError(
          "--quickstart_input_files cannot be combined with explicit "
          f"{' and '.join(paths)} ({paths}); drop one or the other.")
    return None
  if any(paths.values()):
    given = [k for k, v in paths.items() if v]
    missing = [k for k, v in paths.items() if not v]
    raise ValueError(
        f"{QUICKSTART}: {given[0]} is set but {missing[0]} is empty; set both "
        "(your own records) or neither (built in model_dir/data).")
  for key in ("seq_length", "max_predictions_per_seq"):
    train_value = getattr(task.train_data, key)
    eval_value = getattr(task.validation_data, key)
    if train_value != eval_value:
      raise ValueError(
          f"{QUICKSTART} builds one set of records, but "
          f"task.train_data.{key}={train_value} != "
          f"task.validation_data.{key}={eval_value}.")
  if not model_dir:
    raise ValueError(f"{QUICKSTART} needs --model_dir to build its data in.")

  # Imported here: the data pipeline (tensorflow-text) is only needed when
  # the quickstart builds its corpus.
  from realformer_tf.data import quickstart_corpus  # pylint: disable=g-import-not-at-top
  encoder = task.model.encoder.get()
  data_dir = os.path.join(model_dir, QUICKSTART_DATA_SUBDIR)
  logging.info("Preparing the %s data in %s.", QUICKSTART, data_dir)
  data = quickstart_corpus.prepare_quickstart_data(
      data_dir,
      input_files=list(input_files) if input_files else None,
      vocab_size=encoder.vocab_size,
      max_seq_length=task.train_data.seq_length,
      max_predictions_per_seq=task.train_data.max_predictions_per_seq,
      dupe_factor=_QUICKSTART_DUPE_FACTOR)
  task.train_data.input_path = data["train_file"]
  task.validation_data.input_path = data["eval_file"]
  task.vocab_file = data["vocab_file"]
  encoder.vocab_size = int(data["vocab_size"])
  logging.info(
      "%s data: %d train / %d eval examples, vocabulary of %d tokens (%s).",
      QUICKSTART, data["num_train_examples"], data["num_eval_examples"],
      data["vocab_size"], data["vocab_file"])
  return data


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
  # Deferred import: the fine-tuning modules import this one.
  from realformer_tf.configs import registry  # pylint: disable=g-import-not-at-top,unused-import
  config = exp_factory.get_exp_config(name)
  config.override(params_dict, is_strict=True)
  config.validate()
  return config
