"""The rules a run plan must pass: functions of the plan yielding problems.

Every rule runs; `check` raises one refusal listing every problem (a lone
one as it is). Rules read no file, so train.py, the sweep and export judge
the same facts the same way.
"""

import os
from typing import Iterator, Optional, Tuple, Union

from absl import logging

from realformer_tf import utils
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.core import ownership
from realformer_tf.training import plan_facts
from realformer_tf.training import run_plan
from realformer_tf.training import value_checks

Problem = Union[str, Exception]
INIT_KEY = plan_facts.INIT_KEY


def values(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """Config values (`value_checks`)."""
  params, mode = plan.params, plan.mode
  for check in (lambda: value_checks.validate_config(params, mode),
                lambda: value_checks.validate_model(params),
                lambda: value_checks.validate_batch_sizes(
                    params, mode, plan.num_replicas)):
    try:
      check()
    except ValueError as e:
      yield e


def derivation(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """What `derive` could not derive."""
  yield from plan.problems


def _describe_key(key: Optional[dict]) -> str:
  if not key:
    return "unknown inputs"
  if key.get("inputs"):
    return "files " + ", ".join(
        f"{f['path']} (sha256 {f['sha256'][:12]})" for f in key["inputs"])
  return f"the Python {key.get('python')} standard library's docstrings"


def quickstart(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """A quickstart run's data belongs to it: not a run of another experiment,
  and once it has a checkpoint, only data built from the same inputs."""
  data, model_dir = plan.quickstart, plan.model_dir
  name = experiments.QUICKSTART
  if data is None:
    return
  if plan.previous is not None and plan.previous.task.name != name:
    yield (
        f"--model_dir={model_dir!r} holds a run of another experiment "
        f"(task.name={plan.previous.task.name!r} in "
        f"{run_directory.params_path(model_dir)}), not a {name} run: "
        "nothing was written. Run it with its own --experiment, or use a new "
        "--model_dir for the quickstart.")
    return
  old, key, checkpoint = data.recorded, data.key, plan.resume
  if not checkpoint or old == key:
    return
  if old is None:
    yield (
        f"--model_dir={model_dir!r} holds a quickstart run (checkpoint "
        f"{checkpoint}) but no readable {data.manifest_path}: which corpus "
        "and vocabulary it was trained on cannot be told, so its data is not "
        "built again over it. Use a new --model_dir.")
    return
  changed = [f"{field}: {old.get(field)!r} in {data.manifest_path}, "
             f"{key.get(field)!r} now"
             for field in sorted(set(old) | set(key))
             if old.get(field) != key.get(field) and field != "inputs"]
  if old.get("inputs") != key.get("inputs"):
    changed.insert(0, f"corpus: {_describe_key(old)} in {data.manifest_path}"
                   f", {_describe_key(key)} now")
  yield (
      f"--model_dir={model_dir!r} holds a quickstart run (checkpoint "
      f"{checkpoint}) whose data {data.data_dir} (its vocabulary and records) "
      "was built from other inputs than this command's: " +
      "; ".join(changed) + ". Its data is kept as it is. Rerun with the "
      "run's inputs (--quickstart_input_files, the same Python, the same "
      "config) to resume, or use a new --model_dir.")


def data_sets(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """Each split's files, records and manifest; each vocabulary."""
  for split in plan.splits:
    yield from split.problems
  yield from (vocab.problem for vocab in plan.vocabs if vocab.problem)


def _describe(path: str, size, sha: str) -> str:
  return f"{path} ({size} tokens, sha256 {sha[:12]})"


def records_vocabulary(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """Records and vocabularies of another vocabulary than the init run's."""
  run_vocab = plan.init.vocab if plan.init else None
  if not run_vocab or not run_vocab.tokens:
    return
  run_sha, run_size = run_vocab.sha256, len(run_vocab.tokens)
  init_value = plan.init.value
  vocabs = {vocab.key: vocab for vocab in plan.vocabs}
  for split in plan.splits:
    if not split.files:
      continue
    vocab = vocabs.get(f"{split.key}.vocab_file")
    if vocab and vocab.sha256 and vocab.sha256 != run_sha:
      yield (f"{vocab.key}={vocab.path!r} is not the vocabulary of the run "
             f"{init_value!r}, {_describe(run_vocab.path, run_size, run_sha)}"
             f": use --params_override={vocab.key}={run_vocab.path}.")
    for path, meta in split.meta:
      sha = meta[1].get("vocab_sha256") if meta else None
      if sha and sha != run_sha:
        records_vocab = _describe(meta[1].get("vocab_file"),
                                  meta[1].get("vocab_size"), sha)
        yield (
            f"{split.key}.input_path: {path!r} was converted with vocabulary "
            f"{records_vocab}"
            f" (see {meta[0]}), but {INIT_KEY}={init_value!r} was trained "
            f"with {_describe(run_vocab.path, run_size, run_sha)}: convert "
            f"the data again with --vocab_file={run_vocab.path}.")
        break
    if split.unlisted:
      yield split.unlisted


def vocab_fit_problem(vocab: plan_facts.Vocab, checkpoint: str,
                      checkpoint_key: str,
                      embedding: Optional[Tuple[str, int, str]],
                      trained_sha256: Optional[str]) -> Optional[str]:
  """Why `vocab` does not fit `checkpoint`'s word `embedding`, or None: one
  token per row, or fewer for the vocabulary it was trained with (padded)."""
  if embedding is None:
    logging.warning("%s=%s: no word embedding found among its variables; "
                    "its size is not compared with %s=%s.", checkpoint_key,
                    checkpoint, vocab.key, vocab.path)
    return None
  path, rows, key = embedding
  size = len(vocab.tokens)
  if size < rows and trained_sha256 and vocab.sha256 == trained_sha256:
    logging.info("%s=%s: %d tokens for %d embedding rows, the vocabulary "
                 "the checkpoint was trained with (a padded embedding).",
                 vocab.key, vocab.path, size, rows)
    return None
  if size == rows:
    return None
  return (
      f"{vocab.key}={vocab.path!r} has {size} tokens, but the word "
      f"embedding of {checkpoint_key}={checkpoint!r} ({path}: {key}) has "
      f"{rows} rows: the token ids would not match what the model learned. "
      "Use the vocabulary the checkpoint was trained with (and data "
      "converted with it).")


def init_checkpoint(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """The init checkpoint restores, and every vocabulary and record set has a
  token per row of its word embedding."""
  init = plan.init
  if init is None or not (init.prefix or init.problem):
    return
  if init.problem:
    yield init.problem
    return
  for vocab in plan.vocabs:
    if vocab.tokens:
      problem = vocab_fit_problem(vocab, init.prefix, INIT_KEY, init.embedding,
                                  init.trained_sha256)
      if problem:
        yield problem
  if init.embedding is None:
    return
  checkpoint, rows, variable = init.embedding
  for split in plan.splits:
    for path, meta in split.meta:
      meta_path, meta = meta or (None, {})
      size = meta.get("vocab_size")
      padded = (isinstance(size, int) and size < rows and init.trained_sha256
                and meta.get("vocab_sha256") == init.trained_sha256)
      if isinstance(size, int) and size != rows and not padded:
        yield (
            f"{split.key}.input_path: {path!r} was converted with vocabulary "
            f"{meta.get('vocab_file')!r} of {size} tokens (see {meta_path}), "
            f"but the word embedding of {INIT_KEY}={init.prefix!r} "
            f"({checkpoint}: {variable}) has {rows} rows: convert the data "
            "again with the checkpoint's vocabulary.")
        break


def model_dir(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """`--mode=eval` needs a checkpoint; an eval mode can write its summaries;
  a resumed run has `params.yaml`'s `task.name` and `task.model`."""
  mode, directory = plan.mode, plan.model_dir
  if mode == "eval" and not plan.resume and not plan.problems:
    yield (f"--mode=eval: no checkpoint in --model_dir={directory!r}, so "
           "there is no trained model to evaluate. Train first "
           "(--mode=train), or point --model_dir at a run's directory.")
  if not plan.trains:
    yield from _eval_writes(plan)
  if (not plan.trains or not plan.resume or plan.previous is None or
      plan.builds or (plan.quickstart and plan.previous.task.name !=
                      experiments.QUICKSTART)):
    # Rebuilt data has its vocabulary's size only once built: compared then.
    return
  old, new = (run_plan.dotted_items({"task": {"name": p.task.name,
                                              "model": p.task.model.as_dict()}})
              for p in (plan.previous, plan.params))
  changed = [f"{key}: {old.get(key)!r} in params.yaml, {new.get(key)!r} now"
             for key in sorted(set(old) | set(new))
             if old.get(key) != new.get(key)]
  if changed:
    yield (f"--model_dir={directory!r} holds checkpoints of another model "
           f"({run_directory.params_path(directory)}): " + "; ".join(changed)
           + ". Use a new --model_dir, or the same model config to resume.")


def _eval_writes(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """An eval mode can write its summaries and operative config (local paths
  only: object stores have no `os.access`)."""
  mode, directory = plan.mode, plan.model_dir
  summaries = os.path.join(directory,
                           plan.params.trainer.validation_summary_subdir)
  for target in dict.fromkeys((directory, summaries)):
    path = None if "://" in target else utils.existing_ancestor(target)
    if path is None or os.access(path, os.W_OK):
      continue
    way_out = ("evaluate a copy of the run in a writable folder" if
               target == directory else
               "send them elsewhere with --params_override=trainer."
               "validation_summary_subdir=/a/writable/folder")
    yield (f"--mode={mode} writes its summaries to {summaries} and "
           f"operative_config.{mode}.gin to --model_dir={directory!r}, but "
           f"{path} is not writable (a read-only file system or permissions):"
           f" nothing was run. To evaluate it, {way_out}.")
    return


def own_files(plan: run_plan.RunPlan) -> Iterator[Problem]:
  """A user's file at a path the run writes (`run_plan.foreign_outputs`)."""
  try:
    ownership.refuse_foreign(plan.foreign)
  except FileExistsError as e:
    yield e


RULES = (values, derivation, quickstart, data_sets, records_vocabulary,
         init_checkpoint, model_dir, own_files)


def problems(plan: run_plan.RunPlan, rules=RULES) -> list:
  """Every problem `rules` find in `plan`, in their order."""
  return [problem for rule in rules for problem in rule(plan)]


def check(plan: run_plan.RunPlan, rules=RULES) -> None:
  """Raises the lone problem in `plan`, or one ValueError listing them all."""
  found = problems(plan, rules)
  if len(found) == 1:
    raise (found[0] if isinstance(found[0], Exception) else
           ValueError(found[0]))
  if found:
    raise ValueError(
        f"{len(found)} problems; nothing was run or written:\n" +
        "\n".join(f"- {problem}" for problem in found))
