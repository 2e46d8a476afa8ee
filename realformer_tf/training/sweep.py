r"""The paper's GLUE protocol: a learning-rate x epochs grid, N seeds, best median.

  python -m realformer_tf.training.sweep --task=mrpc --model_dir_root=/runs/glue \
    --data_dir=/data/glue_tfrecords --seeds=5 [--dry_run]

Each grid point and seed is one run under `<model_dir_root>/<task>/` (skipped
when finished); `glue_summary.json` keeps each task's best median grid point
and GLUE's overall score.
"""

import dataclasses
import itertools
import os
from typing import ClassVar, Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import train_utils
from realformer_tf import utils
from realformer_tf.configs import finetuning
from realformer_tf.configs import recipe
from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import glue as glue_data
from realformer_tf.data import glue_tasks
from realformer_tf.tasks import sentence_prediction as rf_sp
from realformer_tf.training import plan_facts
from realformer_tf.training import plan_rules
from realformer_tf.training import process_exit
from realformer_tf.training import run_plan
from realformer_tf.training import runs
from realformer_tf.training import seed_stats
from realformer_tf.training import train_lib

RESULT_FILE = "glue_result.json"
SUMMARY_FILE = "glue_summary.json"


@dataclasses.dataclass(kw_only=True)
class GlueRun(runs.RunSpec):
  """One grid point and seed of a sweep."""
  task: str
  epochs: float
  learning_rate: float

  RESULT_FILE: ClassVar[str] = RESULT_FILE

  def details(self) -> str:
    trainer = self.config.trainer
    return (f"steps={trainer.train_steps} warmup="
            f"{trainer.optimizer_config.warmup.polynomial.warmup_steps} "
            f"lr={self.learning_rate:g} seed={self.seed}")

  def make_result(self, output: Dict, seconds: float) -> Dict:
    """The task's metrics (one per validation split, if it has several)."""
    del seconds  # glue_result.json records steps, not time.
    eval_logs = output["eval_logs"]
    task = self.config.task
    spec_metrics = [rf_sp.split_metric_name(m, s)
                    for s in task.validation_data.split_names or [""]
                    for m in glue_tasks.get_task(task.glue_task).metrics]
    missing = [m for m in spec_metrics if m not in eval_logs]
    if missing:
      raise ValueError(f"{self.model_dir}: the evaluation reported no "
                       f"{missing} (got {sorted(eval_logs)}).")
    trainer = self.config.trainer
    return dict(
        task=self.task, epochs=self.epochs, learning_rate=self.learning_rate,
        seed=self.seed, train_steps=trainer.train_steps,
        warmup_steps=trainer.optimizer_config.warmup.polynomial.warmup_steps,
        global_step=output.get("global_step"),
        metrics={m: eval_logs[m] for m in spec_metrics}, eval_logs=eval_logs)


def replace_data_dir(config: cfg.ExperimentConfig, data_dir: str) -> None:
  """Replaces the YAML placeholder in the data paths with `data_dir`."""
  for data in (config.task.train_data, config.task.validation_data):
    if isinstance(data.input_path, str):
      data.input_path = data.input_path.replace(
          rf_sp.DATA_DIR_PLACEHOLDER, data_dir.rstrip("/"))


def base_config(task: str, config_files: Sequence[str] = (),
                params_override: str = "", data_dir: Optional[str] = None
               ) -> Tuple[cfg.ExperimentConfig, run_plan.ExplicitKeys]:
  """The task's config parsed as train.py parses `--experiment=realformer/glue`
  with the task's YAML first, and the keys the sources set."""
  config, explicit = train_lib.parse_configuration_and_sources(
      train_utils.ParseConfigOptions(
          experiment=finetuning.GLUE, tpu=None,
          config_file=[finetuning.glue_yaml_path(task), *config_files],
          params_override=params_override))
  finetuning.check_glue_task(config, task)
  if data_dir:
    replace_data_dir(config, data_dir)
  rf_sp.check_data_paths(config.task)
  return config, explicit


def num_train_examples(config: cfg.ExperimentConfig,
                       meta_data_file: Optional[str] = None) -> int:
  """Train size from the converter's meta data (next to the train file)."""
  task = config.task.glue_task
  if not meta_data_file:
    train_files = rf_sp.split_input_paths(config.task.train_data.input_path)
    if len(train_files) != 1:
      raise ValueError(
          f"task.train_data.input_path={config.task.train_data.input_path!r}:"
          " cannot find the meta data of several files; pass "
          "--meta_data_file.")
    meta_data_file = glue_data.meta_data_path(
        os.path.dirname(train_files[0]), task)
  meta = glue_data.read_meta_data(meta_data_file)
  if meta.get("task") != task:
    raise ValueError(f"{meta_data_file}: meta data of task "
                     f"{meta.get('task')!r}, not {task!r}.")
  return meta["train_data_size"]


# What the grid sets in each run (`recipe.apply_paper_schedule`, the seed).
GRID_KEYS = ("trainer.train_steps",
             "trainer.optimizer_config.learning_rate.polynomial.decay_steps",
             "trainer.optimizer_config.learning_rate.polynomial."
             "initial_learning_rate",
             "trainer.optimizer_config.warmup.polynomial.warmup_steps",
             "task.train_data.seed")


def plan_runs(task: str, model_dir_root: str, epochs: Sequence[float],
              learning_rates: Sequence[float], seeds: Sequence[int],
              config: cfg.ExperimentConfig, train_size: int,
              explicit: Optional[run_plan.ExplicitKeys] = None
             ) -> List[GlueRun]:
  """Every (epochs, learning rate, seed) run with its own config; only the
  task's YAML (source 0 of `explicit`) may set the grid's keys."""
  explicit = dict(explicit or {})
  set_by_user = [f"{key} (set by {explicit[key][1]})" for key in GRID_KEYS
                 if explicit.get(key, (0,))[0] > 0]
  if set_by_user:
    one = len(set_by_user) == 1
    raise ValueError(
        f"{', '.join(set_by_user)}: the sweep sets {'it' if one else 'them'} "
        "for each run from --epochs, --learning_rates and --seeds; drop the "
        "setting and choose the grid with those flags.")
  if not seeds:
    raise ValueError("--seeds must be at least 1, got no seed.")
  if not epochs or not learning_rates:
    raise ValueError("The grid needs at least one epoch count and one "
                     "learning rate.")
  planned = []
  for e, lr, seed in itertools.product(epochs, learning_rates, seeds):
    run_config = config.replace()
    recipe.apply_paper_schedule(run_config, train_size, e, lr)
    run_config.task.train_data.seed = seed
    model_dir = os.path.join(model_dir_root, glue_tasks.get_task(task).name,
                             f"ep{e:g}_lr{lr:g}", f"seed{seed}")
    planned.append(GlueRun(task=task, epochs=e, learning_rate=lr, seed=seed,
                           model_dir=model_dir, config=run_config,
                           explicit=explicit))
  return planned


def check_runs(planned: Sequence[GlueRun]) -> None:
  """Checks each run's plan as train.py will (one `Reader`: each file read
  once in all); writes nothing."""
  reader = plan_facts.Reader()
  for run in planned:
    plan_rules.check(run_plan.derive(run.config, run.MODE, run.model_dir,
                                     explicit=run.explicit, reader=reader))


def init_warning(config: cfg.ExperimentConfig) -> Optional[str]:
  """A warning when the runs fine-tune a random encoder, else None."""
  if config.task.init_checkpoint:
    return None
  encoder = config.task.model.encoder.get()
  return (f"WARNING: no task.init_checkpoint: every run fine-tunes a randomly "
          f"initialised encoder ({encoder.num_layers} layers, hidden "
          f"{encoder.hidden_size}), not a pre-trained one, and its scores "
          "say nothing about pre-training. Pass --params_override="
          "task.init_checkpoint=DIR (a pre-training run or a converted "
          "checkpoint, README's Checkpoints).")


def load_results(model_dir_root: str) -> Dict[str, List[Dict]]:
  """{task: [result, ...]} for every `glue_result.json` under the root."""
  by_task = {}
  pattern = os.path.join(model_dir_root, "*", "ep*_lr*", "seed*", RESULT_FILE)
  for path in sorted(tf.io.gfile.glob(pattern)):
    result = runs.read_result(path)
    by_task.setdefault(result["task"], []).append(result)
  return by_task


def format_summary(summary: Dict) -> str:
  """The summary as text, numbers x100."""
  lines = []
  for task, s in summary["tasks"].items():
    best = s["best"]
    seed_counts = sorted({p["num_seeds"] for p in s["grid"]})
    lines.append(
        f"{task}: best epochs={best['epochs']:g} lr={best['learning_rate']:g}"
        f" by median {s['main_metric']} ({best['num_seeds']} seeds; grid "
        f"points: {len(s['grid'])}, seeds per point: {seed_counts})")
    for name, m in best["metrics"].items():
      # A std over one seed is 0 by construction: say so instead.
      spread = (f"std {100 * m['std']:.2f}" if best["num_seeds"] > 1
                else "1 seed")
      lines.append(f"  {name:>22s}: {100 * m['median']:6.2f} ({spread})")
    lines.append(f"  {'task score':>22s}: {100 * s['score']:6.2f}")
  if summary["tasks"]:
    note = "" if summary["complete"] else " (not all 8 tasks)"
    lines.append(f"GLUE Overall over {', '.join(summary['overall_tasks'])}"
                 f"{note}: {100 * summary['overall']:.2f}")
  return "\n".join(lines)


def write_summary(model_dir_root: str) -> Dict:
  summary = seed_stats.summarize(load_results(model_dir_root))
  if summary["tasks"]:
    writes.publish_json(os.path.join(model_dir_root, SUMMARY_FILE), summary,
                        __name__, utils.GFILE_OPS)
  return summary


FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_enum("task", None, list(glue_tasks.GLUE_TASKS), "GLUE task.")
  flags.DEFINE_string("model_dir_root", None,
                      "Root of the run directories (<root>/<task>/...).")
  flags.DEFINE_integer("seeds", finetuning.PAPER_NUM_SEEDS,
                       "Seeds per grid point (0 .. seeds-1).", lower_bound=1)
  flags.DEFINE_list("epochs", [f"{e:g}" for e in finetuning.PAPER_EPOCHS],
                    "Epoch counts of the grid.")
  flags.DEFINE_list("learning_rates",
                    [f"{lr:g}" for lr in finetuning.PAPER_LEARNING_RATES],
                    "Peak learning rates of the grid.")
  flags.DEFINE_multi_string("config_file", None,
                            "More YAML overrides after the task's YAML.")
  flags.DEFINE_string("params_override", "", "Overrides after the config "
                      "files (Model Garden's --params_override syntax).")
  flags.DEFINE_string("data_dir", None, "Replaces GLUE_DATA_DIR in the data "
                      "paths: realformer_tf.data.glue's --output_dir.")
  flags.DEFINE_string("meta_data_file", None, "<task>_meta_data.json; "
                      "default: next to the train file.")
  flags.DEFINE_bool("dry_run", False, "Check the runs as they would check "
                    "themselves, then list them and their state only.")
  flags.DEFINE_bool("summarize_only", False, "Only print the summary of the "
                    "results under --model_dir_root.")


def _floats(flag: str) -> List[float]:
  """A list flag's numbers; `recipe.apply_paper_schedule` checks their sign."""
  try:
    return [float(value) for value in FLAGS[flag].value]
  except ValueError as e:
    raise app.UsageError(f"--{flag}: {e}") from None


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if FLAGS.summarize_only:
    print(format_summary(write_summary(FLAGS.model_dir_root)))
    return
  if not FLAGS.task:
    raise app.UsageError("--task is required.")
  config, explicit = base_config(FLAGS.task, FLAGS.config_file or (),
                                 FLAGS.params_override, FLAGS.data_dir)
  train_size = num_train_examples(config, FLAGS.meta_data_file)
  planned = plan_runs(FLAGS.task, FLAGS.model_dir_root, _floats("epochs"),
                      _floats("learning_rates"), range(FLAGS.seeds), config,
                      train_size, explicit)
  check_runs(planned)
  # A user's glue_summary.json is refused before a run starts.
  ownership.check_ours((), os.path.join(FLAGS.model_dir_root, SUMMARY_FILE),
                       utils.GFILE_OPS)
  warning = init_warning(config)
  if warning:
    print(warning, flush=True)
  if FLAGS.dry_run:  # Lists the plan; touches nothing.
    print("\n".join(runs.plan_lines(planned)))
    steps_left = sum(r.train_steps for r in planned if runs.status(r) != "done")
    print(f"{len(planned)} runs ({train_size} train examples, batch "
          f"{config.task.train_data.global_batch_size}); {steps_left} training "
          "steps left to run.")
    return
  runs.execute(planned)
  print(format_summary(write_summary(FLAGS.model_dir_root)))


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["model_dir_root"])
  # A signal stops the run at its next step, saved (exit 143/130).
  process_exit.run_and_exit(main, train_lib.REFUSALS)
