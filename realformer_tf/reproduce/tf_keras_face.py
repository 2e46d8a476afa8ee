"""The reproduction's tf_keras face: Model Garden's train.py machinery for
its data (MLM + NSP records, GLUE records with that vocabulary), pre-training
and GLUE runs (`training.runs`, `training.sweep`), TensorBoard curves and the
attention analysis. Files through `tf.io.gfile`: the output dir may be remote.
"""

import os
from typing import Dict, List, Tuple

import tensorflow as tf
from tqdm import auto as tqdm

from tensorboard.backend.event_processing import event_accumulator
from official.core import config_definitions as cfg
from official.core import exp_factory
from official.modeling import hyperparams
from realformer_tf import utils
from realformer_tf.analysis import runner as analysis_runner
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.configs import registry  # pylint: disable=unused-import
from realformer_tf.data import glue as glue_data
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import wikitext
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.training import runs
from realformer_tf.training import sweep
from realformer_tf.training import train_lib

OPS = utils.GFILE_OPS
fingerprint = output_sets.fingerprint
open_file = tf.io.gfile.GFile
REFUSALS = train_lib.REFUSALS
# Measured seconds of this face's parts on 2 loaded CPU cores (`--size=mini`,
# its 490 s run predicted as 488 s); / 3.5 on 2 free cores.
CPU_COST = dict(data=110.0, pretrain_start=55.0, pretrain_step=0.32,
                finetune_start=90.0, finetune_step=0.18, analysis=75.0)
FREE_MACHINE_SPEEDUP = 3.5
# official_configs/experiments and official_configs/models.
_EXPERIMENTS_DIR = os.path.dirname(finetuning.GLUE_YAML_DIR)
_MODELS_DIR = os.path.join(os.path.dirname(_EXPERIMENTS_DIR), "models")


def check_options(options: plan_lib.Options) -> None:
  """Raises a ValueError naming the flag of a bad option of this face."""
  keras3 = [f for f in ("checkpoint_steps", "steps_per_execution")
            if getattr(options, f) is not None]
  if keras3 or options.dtype_policy != "auto":
    raise ValueError(f"--{(keras3 or ['dtype_policy'])[0]} is the keras3 "
                     "face's (tf_keras: --params_override, --config_file).")
  records = [options.train_data, options.validation_data]
  if any(records) and not all(records):
    raise ValueError("--train_data and --validation_data go together.")
  if all(records):
    if options.corpus:
      raise ValueError("Give --corpus or --train_data, not both.")
    if not options.vocab_file:
      raise ValueError("--train_data needs --vocab_file (the vocabulary the "
                       "records were made with; GLUE is converted with it).")
    for flag in ("train_data", "validation_data", "vocab_file"):
      if not tf.io.gfile.glob(getattr(options, flag)):
        raise ValueError(f"--{flag}={getattr(options, flag)}: no such file.")
  elif options.vocab_file:
    raise ValueError("--vocab_file is only used with --train_data (with "
                     "--corpus the vocabulary is learned).")
  for path in options.corpus:
    if not tf.io.gfile.exists(path):
      raise ValueError(f"--corpus: {path} does not exist.")


def glue_records_dir(output_dir: str) -> str:
  return os.path.join(output_dir, "glue_data")


def glue_sizes(options: plan_lib.Options, size: plan_lib.Size):
  del size
  return plan_lib.glue_sizes(options, tf.io.gfile.exists, tf.io.gfile.GFile)


def squad_size(options: plan_lib.Options, size: plan_lib.Size
               ) -> Tuple[int, str]:
  """(0, why): this face fine-tunes SQuAD with train.py, not here."""
  del size
  files, why = plan_lib.squad_files(options, tf.io.gfile.exists)
  return 0, why or (
      "the tf_keras face does not fine-tune SQuAD in the reproduction: "
      "--face=keras3 does, or train.py --experiment=realformer/squad on a "
      "pre-training run's checkpoint (docs/finetuning.md)")


def _vocab_size(vocab_file: str) -> int:
  return sum(1 for line in pretraining_data.read_lines(vocab_file)
             if line.strip())


def _corpus(options: plan_lib.Options) -> List[str]:
  """--corpus, else WikiText-2 from the data dir, else [] (stdlib corpus)."""
  return list(options.corpus) or wikitext.default_files()


def expected_data(options: plan_lib.Options, size: plan_lib.Size) -> Dict:
  """`prepare_data`'s result, unbuilt: the records given, or the paths
  `prepare_quickstart_data` writes under `OUT/data` (the vocabulary size:
  the size's target until it is learned)."""
  if options.train_data:
    return dict(train_file=options.train_data,
                eval_file=options.validation_data,
                vocab_file=options.vocab_file,
                vocab_size=_vocab_size(options.vocab_file),
                source=f"records {options.train_data}")
  data_dir = os.path.join(options.output_dir, "data")
  vocab_file = os.path.join(data_dir, "vocab.txt")
  built = tf.io.gfile.exists(vocab_file)
  return dict(train_file=os.path.join(data_dir, "train.tfrecord"),
              eval_file=os.path.join(data_dir, "eval.tfrecord"),
              vocab_file=vocab_file,
              vocab_size=_vocab_size(vocab_file) if built else size.vocab_size,
              source=(", ".join(_corpus(options)) or
                      "the quickstart's stdlib corpus") + (
                          "" if built else "; vocabulary not learned yet"))


def check_writes(plan: plan_lib.Plan) -> None:
  del plan  # Each run's train.py machinery checks its own directory.


def prepare_data(plan: plan_lib.Plan) -> Dict:
  """Builds (or reuses) the records and vocabulary every run shares, and
  the GLUE records with that vocabulary (once per task)."""
  o, s = plan.options, plan.size
  data = expected_data(o, s)
  if not o.train_data:
    data_dir = os.path.join(o.output_dir, "data")
    corpus = _corpus(o)
    if corpus and not o.corpus:
      # WikiText is not in BERT's one-sentence-per-line format: rewrite it.
      corpus = [wikitext.write_bert_corpus(corpus, data_dir)]
    data.update(quickstart_corpus.prepare_quickstart_data(
        data_dir, input_files=corpus or None, vocab_size=s.vocab_size,
        max_seq_length=s.seq_length, max_predictions_per_seq=s.max_predictions),
                source=data["source"].split(";")[0])
  out_dir = glue_records_dir(o.output_dir)
  for task in plan.glue_sizes:
    if not tf.io.gfile.exists(glue_data.meta_data_path(out_dir, task)):
      glue_data.convert(task, data["vocab_file"], out_dir,
                        max_seq_length=s.glue_seq_length, glue_dir=o.glue_dir)
  return data


def has_checkpoint(run) -> bool:
  return bool(run_directory.newest_checkpoint(run.run_dir))


def run_config(plan: plan_lib.Plan) -> Dict:
  return dict(config_files=list(plan.options.config_files),
              params_override=plan.options.params_override)


def pretraining_config(plan: plan_lib.Plan, arch: str, seed: int
                       ) -> cfg.ExperimentConfig:
  """`realformer/pretraining` for one (architecture, seed) of the plan."""
  o, s, data = plan.options, plan.size, plan.data
  config = exp_factory.get_exp_config(experiments.PRETRAINING)
  files = [os.path.join(_MODELS_DIR, s.size_yaml)] if s.size_yaml else []
  if s.recipe_yaml:
    files.append(os.path.join(_EXPERIMENTS_DIR, s.recipe_yaml))
  files.append(os.path.join(_MODELS_DIR, plan_lib.ARCHS[arch].models_yaml))
  for path in files:
    config = hyperparams.override_params_dict(config, path, is_strict=True)
  steps = plan.train_steps
  encoder = dict(num_layers=s.num_layers, hidden_size=s.hidden_dim,
                 num_attention_heads=s.num_heads,
                 intermediate_size=s.intermediate_dim,
                 max_position_embeddings=s.max_positions,
                 vocab_size=int(data["vocab_size"]))
  data_shape = dict(seq_length=s.seq_length,
                    max_predictions_per_seq=s.max_predictions,
                    global_batch_size=s.batch_size, seed=seed)
  per_eval = max(steps // s.evals, 1)
  config.override({
      "task": {
          "vocab_file": data["vocab_file"],
          "model": {"encoder": {"any": encoder},
                    "cls_heads": [{"inner_dim": s.hidden_dim, "num_classes": 2,
                                   "dropout_rate": 0.1,
                                   "name": "next_sentence"}]},
          "train_data": dict(data_shape, input_path=data["train_file"]),
          "validation_data": dict(data_shape, input_path=data["eval_file"],
                                  drop_remainder=False),
      },
      "trainer": {
          "train_steps": steps, "validation_interval": per_eval,
          "validation_steps": -1, "checkpoint_interval": per_eval,
          "steps_per_loop": min(per_eval, 1000),
          "summary_interval": min(per_eval, 1000),
          "optimizer_config": {
              "learning_rate": {"polynomial": {
                  "initial_learning_rate": (
                      s.learning_rate * plan_lib.ARCHS[arch].lr_multiplier),
                  "decay_steps": steps}},
              "warmup": {"polynomial": {"warmup_steps": plan_lib.warmup_steps(
                  s, steps)}},
          },
      },
  }, is_strict=True)
  if s.cpu:
    config.runtime.distribution_strategy = "one_device"
  for path in o.config_files:
    config = hyperparams.override_params_dict(config, path, is_strict=True)
  if o.params_override:
    config = hyperparams.override_params_dict(config, o.params_override,
                                              is_strict=True)
  config.validate()
  return config


def read_curves(model_dir: str, tag: str = "masked_lm_accuracy"
                ) -> Dict[str, List[List[float]]]:
  """{"train": [[step, value], ...], "validation": [...]} from TensorBoard;
  one point per step, the last written (by wall time) wins: a resumed run
  may log a step again."""
  curves = {}
  for split in ("train", "validation"):
    path, by_step = os.path.join(model_dir, split), {}
    if tf.io.gfile.isdir(path):
      events = event_accumulator.EventAccumulator(
          path, size_guidance=event_accumulator.STORE_EVERYTHING_SIZE_GUIDANCE,
          purge_orphaned_data=False).Reload()
      # TF2 summaries (Orbit's) are tensors.
      for e in sorted(events.Tensors(tag) if tag in events.Tags()["tensors"]
                      else [], key=lambda e: e.wall_time):
        by_step[e.step] = float(tf.make_ndarray(e.tensor_proto))
    curves[split] = [[step, value] for step, value in sorted(by_step.items())]
  return curves


def pretrain(plan: plan_lib.Plan, run: plan_lib.PretrainRun) -> Dict:
  """Pre-trains `run` (train.py's machinery resumes it), evaluating
  `Size.evals` times; the result with its TensorBoard curves."""
  output = runs.train_and_evaluate(pretraining_config(plan, run.arch, run.seed),
                                   run.run_dir, run.seed, "train_and_eval")
  return {"arch": run.arch, "seed": run.seed, "train_steps": run.train_steps,
          "global_step": output.get("global_step"),
          "eval_logs": output["eval_logs"], "curves": read_curves(run.run_dir)}


def finetune(plan: plan_lib.Plan, run: plan_lib.FinetuneRun) -> Dict:
  """One GLUE run as the sweep runs it, from the pre-trained run's
  checkpoint; the sweep's result (the task's dev metrics)."""
  pre = pretraining_config(plan, run.arch, run.seed)
  config, _ = sweep.base_config(
      run.task, data_dir=glue_records_dir(plan.options.output_dir))
  config.override({"task": {
      "init_checkpoint": run.pretrained,
      "model": {"encoder": pre.task.model.encoder.as_dict()},
      "train_data": {"seq_length": run.max_seq_length,
                     "global_batch_size": run.batch_size},
      "validation_data": {"seq_length": run.max_seq_length},
  }}, is_strict=True)
  config.runtime.distribution_strategy = pre.runtime.distribution_strategy
  root = os.path.dirname(os.path.dirname(os.path.dirname(run.run_dir)))
  glue_run, = sweep.plan_runs(run.task, root, [run.epochs],
                              [run.learning_rate], [run.seed], config,
                              plan.glue_sizes[run.task])
  assert glue_run.model_dir == run.run_dir, (glue_run.model_dir, run.run_dir)
  return glue_run.make_result(runs.train_run(glue_run), 0.0)


def analyse(plan: plan_lib.Plan) -> Dict[str, str]:
  # summary.json is renamed in last: if it is there, the set is whole.
  return plan_lib.analyse_seed0(
      plan, lambda run, out_dir: tf.io.gfile.exists(
          os.path.join(out_dir, "summary.json")),
      lambda run, out_dir: analysis_runner.run_analysis(
          model_dir=run.run_dir, output_dir=out_dir,
          num_examples=plan.size.analysis_examples))


def estimate_seconds(plan: plan_lib.Plan) -> float:
  """The whole reproduction's seconds on 2 shared CPU cores (`CPU_COST`):
  the data, each run's start and steps, each architecture's analysis."""
  c = CPU_COST
  return c["data"] + c["analysis"] * len(plan.options.archs) + sum(
      c["pretrain_start"] + c["pretrain_step"] * r.train_steps
      if isinstance(r, plan_lib.PretrainRun) else
      c["finetune_start"] + c["finetune_step"] * r.train_steps
      for r in plan.all_runs)


def describe_lines(plan: plan_lib.Plan) -> List[str]:
  """The analysis and the estimated time, for `--dry_run`."""
  lines = [f"Attention analysis: seed 0 of {', '.join(plan.options.archs)}, "
           f"{plan.size.analysis_examples} examples."]
  if not plan.size.cpu:
    return lines + ["Estimated time: no estimate at this size "
                    "(accelerator-sized)."]
  estimate = estimate_seconds(plan)
  low, high = (tqdm.tqdm.format_interval(round(t))  # tqdm's [h:]mm:ss.
               for t in (estimate / FREE_MACHINE_SPEEDUP, estimate))
  return lines + [
      f"Estimated time: {low} to {high} "
      f"({'h:min:s' if estimate >= 3600 else 'min:s'}) on 2 CPU cores, free "
      "to heavily shared (data, runs and analysis, runs already done "
      "included; measured rates, reproduce/tf_keras_face.py CPU_COST)."]


def report_lines(plan: plan_lib.Plan, pretrain_runs) -> List[str]:
  del plan, pretrain_runs
  return ["Model: Model Garden's BERT pre-trainer (masked LM + next "
          "sentence), train.py's machinery per run."]


def figure_notes(plan: plan_lib.Plan) -> List[str]:
  del plan
  return []
