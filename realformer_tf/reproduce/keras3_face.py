"""The reproduction's Keras 3 face, on JAX, without TensorFlow: pre-training
in a jitted multi-step loop of Keras' stateless API (not `fit`: keras-hub's
`Task.fit` needs TensorFlow or grain for its data), held-out evaluation, and
checkpoints of every model, optimizer and RNG value for an exact resume;
every architecture on the same batches from the same initial weights where
shapes allow."""

import json
import os
import time
from typing import Dict, List, Tuple

import jax
import keras
import numpy as np

from realformer_tf import cli
from realformer_tf import keras3 as realformer_keras3
from realformer_tf.core import ownership
from realformer_tf.core import run_lock
from realformer_tf.core import writes
from realformer_tf.data import glue_tasks
from realformer_tf.reproduce import keras3_analysis
from realformer_tf.reproduce import keras3_data as data_lib
from realformer_tf.reproduce import keras3_glue
from realformer_tf.reproduce import keras3_squad
from realformer_tf.reproduce import plan as plan_lib

OPS = writes.OS_OPS
fingerprint = writes.size_of
open_file = open
REFUSALS = cli.REFUSALS + (run_lock.ModelDirBusyError,)
CHECKPOINT_FILE = "checkpoint.npz"
# The reference initialisation every architecture copies where shapes allow.
REFERENCE_ARCH = "post_ln"


def resolve_policy(name: str) -> str:
  """"auto": mixed bfloat16 on a GPU or TPU, float32 on a CPU."""
  if name != "auto":
    return name
  return "float32" if jax.devices()[0].platform == "cpu" else "mixed_bfloat16"


def build_model(size: plan_lib.Size, arch: str, vocab_size: int,
                policy: str, seed: int
                ) -> realformer_keras3.RealFormerMaskedLM:
  """The masked LM of `arch` (no preprocessor: it takes the batches)."""
  keras.utils.set_random_seed(seed)
  return realformer_keras3.RealFormerMaskedLM(
      realformer_keras3.RealFormerBackbone(
          vocabulary_size=vocab_size, num_layers=size.num_layers,
          num_heads=size.num_heads, hidden_dim=size.hidden_dim,
          intermediate_dim=size.intermediate_dim, dropout=size.dropout,
          max_sequence_length=size.max_positions, dtype=policy,
          **plan_lib.ARCHS[arch].backbone))


def build_models(size: plan_lib.Size, arch: str, vocab_size: int, policy: str,
                 seed: int) -> Tuple[keras.Model, Dict[str, List[str]]]:
  """(`arch`'s model, {"shared": paths copied, "own": paths not}): values of
  a fresh `REFERENCE_ARCH` model of this seed copied by variable path where
  shapes allow; the rest keep their own initialisation."""
  model = build_model(size, arch, vocab_size, policy, seed)
  # Not the dropout RNG states (their paths are numbered per process).
  weights = lambda m: [v for v in m.weights if "seed_generator" not in v.path]
  reference = {v.path: v for v in weights(build_model(
      size, REFERENCE_ARCH, vocab_size, policy, seed))}
  copied = {"shared": [], "own": []}
  for v in weights(model):
    source = reference.get(v.path)
    if source is not None and tuple(source.shape) == tuple(v.shape):
      v.assign(source.value)
      copied["shared"].append(v.path)
    else:
      copied["own"].append(v.path)
  return model, copied


def learning_rate(size: plan_lib.Size, train_steps: int, multiplier=1.0
                  ) -> keras.optimizers.schedules.LearningRateSchedule:
  """Linear warm-up to the peak (`plan.warmup_steps`), then Keras' cosine
  decay to 0."""
  warmup = plan_lib.warmup_steps(size, train_steps)
  return keras.optimizers.schedules.CosineDecay(
      initial_learning_rate=0.0, decay_steps=max(train_steps - warmup, 1),
      warmup_target=size.learning_rate * multiplier, warmup_steps=warmup)


def make_optimizer(size: plan_lib.Size, train_steps: int, multiplier=1.0
                   ) -> keras.optimizers.Optimizer:
  """AdamW (BERT's: weight decay 0.01 but not on LayerNorm or biases,
  epsilon 1e-6, global norm clipped at 1) on `learning_rate`."""
  optimizer = keras.optimizers.AdamW(
      learning_rate=learning_rate(size, train_steps, multiplier),
      weight_decay=0.01,
      epsilon=1e-6, global_clipnorm=1.0)
  optimizer.exclude_from_weight_decay(
      var_names=list(keras3_glue.NO_WEIGHT_DECAY))
  return optimizer


def _masked_lm(model, trainable, non_trainable, batch, training):
  """(weighted loss sum, correct, weight) of one batch, and the new
  non-trainable values (dropout RNG state)."""
  inputs = {k: batch[k] for k in ("token_ids", "segment_ids", "padding_mask",
                                  "mask_positions")}
  logits, non_trainable = model.stateless_call(
      trainable, non_trainable, inputs, training=training)
  logits = logits.astype("float32")
  labels, weights = batch["mask_ids"], batch["mask_weights"]
  losses = keras.losses.sparse_categorical_crossentropy(labels, logits,
                                                        from_logits=True)
  correct = (keras.ops.argmax(logits, axis=-1) == labels).astype("float32")
  return ((losses * weights).sum(), (correct * weights).sum(),
          weights.sum()), non_trainable


class Steps:
  """The jitted device loop and evaluation of one model and optimizer."""

  def __init__(self, model: keras.Model, optimizer):
    self.model, self.optimizer = model, optimizer
    optimizer.build(model.trainable_variables)

    def step(state, batch):
      trainable, non_trainable, opt = state

      def loss_fn(trainable, non_trainable):
        (loss, correct, weight), non_trainable = _masked_lm(
            model, trainable, non_trainable, batch, training=True)
        weight = jax.numpy.maximum(weight, 1.0)
        return loss / weight, (correct / weight, non_trainable)

      (loss, (accuracy, non_trainable)), grads = jax.value_and_grad(
          loss_fn, has_aux=True)(trainable, non_trainable)
      trainable, opt = optimizer.stateless_apply(opt, grads, trainable)
      return (trainable, non_trainable, opt), (loss, accuracy)

    # `train(state, batches)`: (state, (losses, accuracies)), dispatched, not
    # waited for; the state is donated, so updated in place on the device.
    self.train = jax.jit(lambda state, batches: jax.lax.scan(
        step, state, batches), donate_argnums=0)
    self._eval = jax.jit(lambda state, batch: _masked_lm(
        model, state[0], state[1], batch, training=False)[0])

  def state(self):
    return ([v.value for v in self.model.trainable_variables],
            [v.value for v in self.model.non_trainable_variables],
            [v.value for v in self.optimizer.variables])

  def evaluate(self, state, batches) -> Dict[str, float]:
    sums = np.zeros(3)
    for batch in batches:
      sums += np.asarray(self._eval(state, batch), np.float64)
    return {"masked_lm_accuracy": float(sums[1] / sums[2]),
            "lm_example_loss": float(sums[0] / sums[2])}


def save_checkpoint(path: str, state, meta: Dict) -> None:
  """Every value of `state` and `meta` (step, curves, digest) in one npz."""
  arrays = {f"{group}{i}": np.asarray(value)
            for group, values in zip("tno", state)
            for i, value in enumerate(values)}
  arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
  arrays["writer"] = np.frombuffer(plan_lib.WRITER.encode("utf-8"), np.uint8)
  with writes.staged(path, writes.OS_OPS) as tmp, open(tmp, "wb") as f:
    np.savez(f, **arrays)


def check_checkpoint(path: str) -> None:
  """Refuses (before anything is written) a file at `path` that is not a
  checkpoint of ours (`save_checkpoint` records its writer in it)."""
  try:
    with np.load(path) as npz:
      ours = bytes(npz["writer"]).decode("utf-8") == plan_lib.WRITER
  except (OSError, ValueError, KeyError, TypeError):
    ours = not os.path.exists(path)
  if not ours:
    ownership.refuse_foreign([path])


def load_checkpoint(path: str, state) -> Tuple[list, Dict]:
  """`state`'s structure filled from the checkpoint at `path`, and its meta;
  a ValueError naming the first value that does not fit this model."""
  with np.load(path) as npz:
    meta = json.loads(bytes(npz["meta"]).decode("utf-8"))
    values = []
    for group, current in zip("tno", state):
      loaded = []
      for i, value in enumerate(current):
        name = f"{group}{i}"
        if name not in npz or npz[name].shape != tuple(value.shape):
          raise ValueError(
              f"{path}: value {name} is "
              f"{npz[name].shape if name in npz else 'missing'}, the model "
              f"needs {tuple(value.shape)}: a checkpoint of another run; "
              "move it away or use another --output_dir.")
        loaded.append(jax.numpy.asarray(npz[name], dtype=value.dtype))
      values.append(loaded)
  return tuple(values), meta


def run_config(plan: plan_lib.Plan) -> Dict:
  return dict(dtype_policy=resolve_policy(plan.options.dtype_policy))


def check_options(options: plan_lib.Options) -> None:
  """Raises a ValueError naming a tf_keras face's flag, or a bad corpus."""
  for flag in ("train_data", "validation_data", "vocab_file", "config_files",
               "params_override"):
    if getattr(options, flag):
      raise ValueError(f"--{flag.rstrip('s')} is the tf_keras face's; the "
                       "keras3 face learns its vocabulary from --corpus.")
  for path in options.corpus:
    if not os.path.isfile(path):
      raise ValueError(f"--corpus: {path} is not a file.")


def glue_sizes(options: plan_lib.Options, size: plan_lib.Size):
  del size
  return plan_lib.glue_sizes(options, read_train=lambda spec: keras3_glue.
                             read_task(options.glue_dir, spec.name,
                                       open_file)["train"])


def squad_size(options: plan_lib.Options, size: plan_lib.Size
               ) -> Tuple[int, str]:
  """(training questions of --squad_dir's SQuAD v1.1, ""), or (0, why not);
  a malformed file is refused (ValueError)."""
  del size
  files, why = plan_lib.squad_files(options)
  if why:
    return 0, why
  questions = len(keras3_squad.read(files["train"], True))
  return questions, ("" if questions else
                     f"{files['train']} has no usable training question")


def expected_data(options: plan_lib.Options, size: plan_lib.Size) -> Dict:
  return dict(source=", ".join(options.corpus) or
              "the quickstart's stdlib corpus",
              vocab_size=f"up to {size.vocab_size}")


def check_writes(plan: plan_lib.Plan) -> None:
  """Refuses, before a write, a user's file at our data and checkpoint
  paths, and a Keras backend that is not JAX."""
  data_lib.check(os.path.join(plan.options.output_dir, "data"))
  for run in plan.pretrain:
    check_checkpoint(os.path.join(run.run_dir, CHECKPOINT_FILE))
  for arch in plan.options.archs:
    ownership.check_ours((), keras3_analysis.summary_path(plan, arch), OPS)
  keras3_glue.check_backend()


def prepare_data(plan: plan_lib.Plan) -> Dict:
  s = plan.size
  sequences = data_lib.prepare(os.path.join(plan.options.output_dir, "data"),
                               plan.options.corpus, s.vocab_size, s.seq_length)
  return dict(source=sequences.source, vocab_size=sequences.vocab_size,
              train_sequences=len(sequences.train),
              eval_sequences=len(sequences.eval), sequences=sequences)


def has_checkpoint(run) -> bool:
  return os.path.exists(os.path.join(run.run_dir, CHECKPOINT_FILE))


def pretrain(plan: plan_lib.Plan, run: plan_lib.PretrainRun) -> Dict:
  """Pre-trains `run` (resuming from its checkpoint), returns its result."""
  size, policy = plan.size, resolve_policy(plan.options.dtype_policy)
  sequences = plan.data["sequences"]
  model, init = build_models(size, run.arch, sequences.vocab_size, policy,
                             run.seed)
  steps = Steps(model, make_optimizer(
      size, plan.train_steps, plan_lib.ARCHS[run.arch].lr_multiplier))
  batches = data_lib.Batches(sequences, size.batch_size,
                             size.max_predictions, run.seed)
  eval_batches = batches.eval_batches(size.eval_sequences)
  checkpoint = os.path.join(run.run_dir, CHECKPOINT_FILE)
  os.makedirs(run.run_dir, exist_ok=True)
  state = steps.state()
  config = plan.config_of(run)
  meta = dict(step=0, digest="", train=[], validation=[], seconds=0.0,
              config=config)
  if os.path.exists(checkpoint):
    state, meta = load_checkpoint(checkpoint, state)
    if meta.get("config") != config:
      raise ValueError(
          f"{checkpoint} is a checkpoint of another run ({meta.get('config')}"
          f"; this one: {config}): move it away or use another "
          "--output_dir.")
    print(f"{run.arch} seed {run.seed}: resuming at step {meta['step']} "
          f"from {checkpoint}", flush=True)
  start, step = time.time(), meta["step"]
  boundaries = [b for b in plan.boundaries() if b > step]
  chunk = lambda s: min(plan.steps_per_execution,
                        next(b for b in boundaries if b > s) - s)
  pending = batches.train_batches(step, chunk(step)) if boundaries else None
  while step < plan.train_steps:
    count = chunk(step)
    for i in range(count):
      meta["digest"] = data_lib.digest(
          meta["digest"], {k: v[i] for k, v in pending.items()})
    state, (losses, accuracies) = steps.train(state, pending)
    step += count
    pending = (batches.train_batches(step, chunk(step))
               if step < plan.train_steps else None)  # While the device runs.
    meta["train"].append([step, float(np.mean(accuracies))])
    line = (f"{run.arch} seed {run.seed}: step {step}/{plan.train_steps}, "
            f"train loss {float(np.mean(losses)):.3f}")
    if step in plan.eval_steps():
      logs = steps.evaluate(state, eval_batches)
      meta["validation"].append([step, logs["masked_lm_accuracy"]])
      meta["eval_logs"] = logs
      line += (f", held-out MLM accuracy {100 * logs['masked_lm_accuracy']:.2f}"
               f"%, loss {logs['lm_example_loss']:.3f}")
    print(line, flush=True)
    if step % plan.checkpoint_steps == 0 or step == plan.train_steps:
      meta.update(step=step, seconds=meta["seconds"] + time.time() - start)
      start = time.time()
      save_checkpoint(checkpoint, state, meta)
  return {"arch": run.arch, "seed": run.seed, "train_steps": plan.train_steps,
          "global_step": meta["step"], "seconds": meta["seconds"],
          "eval_logs": meta["eval_logs"], "batch_digest": meta["digest"],
          "dtype_policy": policy, "device": jax.devices()[0].device_kind,
          "initialization": init,
          "curves": {"train": meta["train"],
                     "validation": meta["validation"]}}


_LOADED = {}  # {(checkpoint, mtime, arch, seed): backbone}: the latest only.


def pretrained_backbone(plan: plan_lib.Plan, arch: str, seed: int,
                        run_dir: str):
  """The pre-training run's backbone, its checkpoint's values (built as
  `pretrain` built it, so the values line up); read once for all its
  fine-tuning runs, which copy its values, never write them."""
  path = os.path.join(run_dir, CHECKPOINT_FILE)
  key = (path, os.path.getmtime(path), arch, seed)
  if key not in _LOADED:
    _LOADED.clear()
    model = build_model(plan.size, arch, plan.data["vocab_size"],
                        resolve_policy(plan.options.dtype_policy), seed)
    variables = model.trainable_variables + model.non_trainable_variables
    (trained, other, _), _ = load_checkpoint(path, (
        model.trainable_variables, model.non_trainable_variables, []))
    for variable, value in zip(variables, trained + other):
      variable.assign(value)
    _LOADED[key] = model.backbone
  return _LOADED[key]


def finetune(plan: plan_lib.Plan, run: plan_lib.FinetuneRun) -> Dict:
  """Fine-tunes `run.pretrained`'s backbone on `run.task` (`keras3_glue`,
  `keras3_squad`): the paper's dev metrics in "metrics", all the fine-tune
  measured in "eval_logs" (as `seed_stats.summarize` reads them)."""
  backbone = pretrained_backbone(plan, run.arch, run.seed, run.pretrained)
  vocab = tuple(plan.data["sequences"].vocab)
  if run.task == plan_lib.SQUAD:
    output = keras3_squad.finetune(
        backbone, plan_lib.squad_files(plan.options)[0], vocab,
        plan_lib.squad_lengths(plan.size), learning_rate=run.learning_rate,
        train_steps=run.train_steps, batch_size=run.batch_size, seed=run.seed)
    names = ["exact_match", "f1"]
  else:
    output, names = _finetune_glue(plan, run, backbone, vocab)
  return dict(task=run.task, epochs=run.epochs,
              learning_rate=run.learning_rate, seed=run.seed,
              train_steps=run.train_steps,
              metrics={name: output[name] for name in names},
              eval_logs=output)


def _finetune_glue(plan, run, backbone, vocab):
  """(`keras3_glue.finetune`'s output, its paper metrics' names)."""
  splits = keras3_glue.packed(plan.options.glue_dir, run.task,
                              run.max_seq_length, vocab, open_file)
  dev = {split: arrays for split, arrays in splits.items() if split != "train"}
  output = keras3_glue.finetune(
      backbone, splits["train"], dev, task=run.task,
      learning_rate=run.learning_rate, train_steps=run.train_steps,
      batch_size=run.batch_size, seed=run.seed)
  return output, [m + keras3_glue.metric_suffix(split) for split in dev
                  for m in glue_tasks.get_task(run.task).metrics]


def analyse(plan: plan_lib.Plan) -> Dict[str, str]:
  return keras3_analysis.analyse(plan, pretrained_backbone)


def describe_lines(plan: plan_lib.Plan) -> List[str]:
  return [f"Training: AdamW, a checkpoint every {plan.checkpoint_steps} "
          f"steps, {plan.steps_per_execution} steps per device call, dtype "
          f"policy {plan.options.dtype_policy}."]


def batches_line(results: Dict[str, List[Dict]]) -> str:
  """Whether every architecture of a seed saw the same batches (their
  running SHA-256, `keras3_data.digest`)."""
  by_seed = {}
  for runs in results.values():
    for r in runs:
      by_seed.setdefault(r["seed"], set()).add(r["batch_digest"])
  if all(len(d) == 1 for d in by_seed.values()):
    return ("Batches: the same for every architecture (SHA-256 of the "
            "masked batches, " + ", ".join(
                f"seed {seed}: `{next(iter(d))[:12]}`"
                for seed, d in sorted(by_seed.items())) + ").")
  return ("Batches: NOT the same for every architecture (seeds " + ", ".join(
      str(seed) for seed, d in sorted(by_seed.items()) if len(d) > 1) +
          "): the comparison is not like for like.")


def report_lines(plan: plan_lib.Plan, results: Dict[str, List[Dict]]
                 ) -> List[str]:
  """How this face trained: model, batches, passes, held-out set, device."""
  s, sequences = plan.size, plan.data["sequences"]
  first = next(iter(results.values()))[0]
  return [
      "Model: `RealFormerBackbone` + keras-hub's masked LM head, masked LM "
      "only, on Keras 3 (JAX); initial weights the same for every "
      "architecture where shapes allow.", batches_line(results),
      data_lib.passes_line(plan, sequences),
      f"Held-out: {len(sequences.eval)} sequences of held-out documents "
      f"(at most {s.eval_sequences} evaluated), masked once.",
      f"Ran on {first['device']} ({first['dtype_policy']})."]


def figure_notes(plan: plan_lib.Plan) -> List[str]:
  sequences = plan.data["sequences"]
  n = data_lib.passes(plan, sequences)
  return [f"{n:.0f} passes over {len(sequences.train)} training sequences: "
          "a small corpus, memorized"] if n > 2 else []
