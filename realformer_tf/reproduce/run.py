"""The reproduction's execution: data once, every run, the report; each step
skipped when its output is there (data manifest, result file, summary.json).
"""

import os
from typing import Callable, Dict

from absl import logging
import tensorflow as tf

from realformer_tf.analysis import runner as analysis_runner
from realformer_tf.data import glue as glue_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import wikitext
from realformer_tf.reproduce import plan as plan_lib
from realformer_tf.reproduce import report
from realformer_tf.training import runs


def prepare_data(options: plan_lib.Options,
                 scale: plan_lib.Scale) -> Dict[str, object]:
  """Builds (or reuses) the records and vocabulary every run shares."""
  if options.train_data:
    return plan_lib.expected_data(options, scale)
  data_dir = os.path.join(options.output_dir, "data")
  corpus = plan_lib.corpus_files(options)
  source = plan_lib.corpus_source(corpus)
  if corpus and not options.corpus:
    # WikiText is not in BERT's one-sentence-per-line format: rewrite it.
    corpus = [wikitext.write_bert_corpus(corpus, data_dir)]
  data = quickstart_corpus.prepare_quickstart_data(
      data_dir, input_files=corpus or None, vocab_size=scale.vocab_size,
      max_seq_length=scale.seq_length,
      max_predictions_per_seq=scale.max_predictions)
  return dict(data, source=source)


def convert_glue(options: plan_lib.Options, scale: plan_lib.Scale,
                 vocab_file: str) -> None:
  """GLUE TSVs -> records with the pre-training vocabulary (once per task)."""
  out_dir = plan_lib.glue_records_dir(options.output_dir)
  present = plan_lib.glue_tasks_present(options.glue_dir, options.glue_tasks)
  for task, why in present.items():
    if why is None and not tf.io.gfile.exists(
        glue_data.meta_data_path(out_dir, task)):
      glue_data.convert(task, vocab_file, out_dir,
                        max_seq_length=scale.glue_seq_length,
                        glue_dir=options.glue_dir)


def prepare(options: plan_lib.Options) -> plan_lib.Plan:
  """Checks the options, builds the data and GLUE records, plans the runs."""
  scale = plan_lib.check_options(options)  # Before anything is written.
  data = prepare_data(options, scale)
  convert_glue(options, scale, data["vocab_file"])
  return plan_lib.make_plan(options, data)


def execute(plan: plan_lib.Plan, runner: runs.Runner = runs.train_run,
            analyse: Callable[..., Dict] = analysis_runner.run_analysis
            ) -> Dict:
  """Runs every run of `prepare`'s plan not done yet; writes the outputs."""
  results = dict(zip((r.model_dir for r in plan.all_runs),
                     runs.execute(plan.all_runs, runner)))
  pretrain_results, glue_results = {}, {}
  for run in plan.pretrain:
    pretrain_results.setdefault(run.arch, []).append(results[run.model_dir])
    for spec in plan.finetune[run.model_dir]:
      glue_results.setdefault(run.arch, {}).setdefault(spec.task, []).append(
          results[spec.model_dir])
  analyses = {}
  for arch in plan.options.archs:
    out_dir = os.path.join(plan.options.output_dir, "analysis", arch)
    # summary.json is renamed in last: if it is there, the set is whole.
    finished = tf.io.gfile.exists(os.path.join(out_dir, "summary.json"))
    line = f"attention analysis of {arch} seed 0: " + (
        "done" if finished else f"{plan.scale.analysis_examples} examples")
    logging.info(line)
    print(line, flush=True)
    if not finished:
      analyse(model_dir=plan_lib.pretrain_dir(plan.options.output_dir, arch, 0),
              output_dir=out_dir, num_examples=plan.scale.analysis_examples)
    analyses[arch] = out_dir
  return report.write_results(plan, pretrain_results, glue_results, analyses)
