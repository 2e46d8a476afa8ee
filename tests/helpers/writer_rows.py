"""The kill suite's table of real writers (tests/core/writer_suite_test.py):
each row writes version 1 or 2 of its output into `<tmp>/out` from tiny
inputs, through the writer's public entry point, and reads it back whole.

`write(tmp, version)` writes; `read(tmp)` is the version whole at `out`
(None: nothing yet) and raises (AssertionError, ValueError) for a mix, as
the output's readers do; `targets` are its paths relative to `out`, each
refused when a user's file is there (a folder's, ending in "/": when a user's
file is in it); `flag` is the option that allows
replacing such a file, where there is one.
"""

import dataclasses
import functools
import json
import os
import zipfile
from typing import Any, Callable, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from realformer_tf.analysis import decoder_paths
from realformer_tf.analysis import output_files
from realformer_tf.checkpoints import keras3_bridge
from realformer_tf.checkpoints import run_directory
from realformer_tf.configs import experiments
from realformer_tf.core import writes
from realformer_tf.data import create_pretraining_data
from realformer_tf.data import glue
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import squad
from realformer_tf.data import tokenization
from realformer_tf.data import translation
from realformer_tf.keras3 import backbone as keras3_backbone
try:
  from realformer_tf.data import beam_pretraining_data
except ImportError:  # apache_beam is an extra: its row is skipped.
  beam_pretraining_data = None
from realformer_tf.reproduce import keras3_data
from realformer_tf.reproduce import keras3_face
from realformer_tf.reproduce import plan as keras3_plan
from realformer_tf.reproduce import report as keras3_report
from realformer_tf.training import train_lib
from tests.helpers import keras3_encoders
from tests.helpers import shared_data
from tests.helpers import squad as squad_inputs

OWN = "foreign files: branch own"  # Fixed by another branch (xfail there).
# `core.ownership.refuse_foreign`'s message, without a flag.
MOVE_IT = ("{path} exists and no manifest of realformer_tf lists it (not "
           "written by us), so nothing was written: move it away, or write "
           "elsewhere.")


@dataclasses.dataclass(frozen=True)
class Row:
  name: str
  write: Callable[[str, int], Any]
  read: Callable[[str], Optional[int]]
  targets: Sequence[str]
  flag: Optional[str] = None
  foreign_xfail: Sequence[str] = ()  # Targets the branch `own` fixes.
  kill_xfail: Optional[str] = None  # Why a kill leaves a mix (a finding).
  refusal: Optional[str] = None  # The message, with {path}, word for word.
  skip: Optional[str] = None  # Why the row cannot run here.


def out_dir(tmp: str) -> str:
  return os.path.join(tmp, "out")


def _text(tmp: str, name: str, text: str) -> str:
  path = os.path.join(tmp, "inputs", name)
  if not os.path.exists(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  return path


def _corpus(tmp: str, version: int) -> str:
  words = ("dog cat runs sleeps", "zebra quokka digs swims")[version - 1]
  a, b, c, d = words.split()
  return _text(tmp, f"corpus{version}.txt", "".join(
      f"The {a} {c} number {i} of {n}.\nA {b} {d} here {i}.\n"
      f"Another {a} line {i}.\n\n" for n in range(6) for i in range(3)))


def _by_reference(tmp: str, write: Callable, name: str) -> Optional[int]:
  """The version whose `name` (written again into a reference folder beside
  `out`, by `write(tmp, version, folder)`) has the bytes of `out/name`."""
  path = os.path.join(out_dir(tmp), name)
  if not os.path.exists(path):
    return None
  with open(path, "rb") as f:
    data = f.read()
  for version in (1, 2):
    reference = os.path.join(tmp, f"reference{version}")
    if not os.path.exists(os.path.join(reference, name)):
      write(tmp, version, reference)
    with open(os.path.join(reference, name), "rb") as f:
      if f.read() == data:
        return version
  raise AssertionError(f"{path} is neither version whole")


def _set_version(manifest_path: str, key: str, versions: dict
                 ) -> Optional[int]:
  """The version (by `manifest[key]`) of the whole set of `manifest_path`;
  None when neither it nor a file of the set exists."""
  manifest = output_sets.read_manifest(manifest_path)
  if manifest is None:
    assert not os.path.exists(manifest_path), manifest_path
    return None
  output_sets.check_set(manifest_path, manifest)
  return versions[manifest[key]]


# --- train.py's params.yaml ---

def _params(tmp, version):
  params = experiments.realformer_quickstart()
  params.trainer.train_steps = 10 * version
  train_lib.write_params_yaml(params, out_dir(tmp))


def _read_params(tmp):
  if not os.path.exists(os.path.join(out_dir(tmp), "params.yaml")):
    return None
  steps = run_directory.load_experiment_config(out_dir(tmp)).trainer
  return {10: 1, 20: 2}[steps.train_steps]


# --- The converters ---

GLUE_ROWS = ("0\tA dog runs.\tAn animal moves.\tentailment\n"
             "1\tA cat sleeps.\tThe cat runs.\tnot_entailment\n")


def _glue(tmp, version):
  glue_dir = os.path.join(tmp, "inputs", "glue")
  for split in ("train", "dev"):
    _text(tmp, os.path.join("glue", "RTE", f"{split}.tsv"),
          "index\tsentence1\tsentence2\tlabel\n" + GLUE_ROWS)
  glue.convert("rte", shared_data.vocab_file(), out_dir(tmp),
               max_seq_length=8 * (version + 1), glue_dir=glue_dir)


def _read_glue(tmp):
  return _set_version(glue.meta_data_path(out_dir(tmp), "rte"),
                      "max_seq_length", {16: 1, 24: 2})


def _squad(tmp, version):
  source = os.path.join(tmp, "inputs", "v2.json")
  if not os.path.exists(source):
    os.makedirs(os.path.dirname(source), exist_ok=True)
    squad_inputs.write_json(squad_inputs.v2_dataset(), source)
  squad.convert(input_json=source, vocab_file=squad_inputs.vocab_file(),
                output_dir=out_dir(tmp), is_training=True,
                version_2_with_negative=True,
                max_seq_length=(48, 40)[version - 1], doc_stride=16,
                max_query_length=16, epochs=2, train_batch_size=4)


def _read_squad(tmp):
  return _set_version(os.path.join(out_dir(tmp), squad.TRAIN_META),
                      "max_seq_length", {48: 1, 40: 2})


def _translation(tmp, version):
  tsv = _text(tmp, "pairs.tsv", "".join(
      f"red house {i}\tdas rote haus {i}\n" for i in range(40)))
  translation.convert([tsv], out_dir(tmp), dev_files=[tsv],
                      vocab_size=(26, 30)[version - 1])


def _read_translation(tmp):
  meta = os.path.join(out_dir(tmp), translation.META_DATA)
  if output_sets.read_manifest(meta) is None:
    return _set_version(meta, "writer", {})
  output_sets.check_set(meta, output_sets.read_manifest(meta))
  with open(os.path.join(out_dir(tmp), "sentencepiece.vocab")) as f:
    return {26: 1, 30: 2}[len(f.readlines())]


def _pretraining(tmp, version, num_shards=0):
  create_pretraining_data.run(
      input_files=[_corpus(tmp, version)],
      output_file=os.path.join(out_dir(tmp), "train.tfrecord"),
      vocab_file=None, vocab_size=100, do_lower_case=True,
      max_seq_length=32, max_predictions_per_seq=4, masked_lm_prob=0.15,
      dupe_factor=1, short_seq_prob=0.1, random_seed=version,
      num_shards=num_shards)


def _read_pretraining(tmp):
  return _set_version(pretraining_data.meta_data_path(
      os.path.join(out_dir(tmp), "train.tfrecord")), "random_seed",
                      {1: 1, 2: 2})


BEAM_PREFIX = "train"


def _beam(tmp, version):
  beam_pretraining_data.run(
      input_files=[_corpus(tmp, version)],
      output_prefix=os.path.join(out_dir(tmp), BEAM_PREFIX), vocab_file=None,
      vocab_size=64, vocab_sample_documents=6, num_shards=2,
      do_lower_case=True, max_seq_length=32, max_predictions_per_seq=4,
      masked_lm_prob=0.15, dupe_factor=1, short_seq_prob=0.1,
      random_seed=version, pipeline_args=["--runner=DirectRunner"])


def _read_beam(tmp):
  return _set_version(os.path.join(
      out_dir(tmp), f"{BEAM_PREFIX}_pretraining_meta_data.json"),
                      "random_seed", {1: 1, 2: 2})


def _quickstart(tmp, version):
  quickstart_corpus.prepare_quickstart_data(
      out_dir(tmp), input_files=[_corpus(tmp, version)], vocab_size=60,
      max_seq_length=16, max_predictions_per_seq=2, seed=version)


def _read_quickstart(tmp):
  manifest = os.path.join(out_dir(tmp), quickstart_corpus.MANIFEST)
  found = output_sets.read_manifest(manifest)
  if found is None:
    return _set_version(manifest, "key", {})
  output_sets.check_set(manifest, found)
  return found["key"]["seed"]


# --- The Keras 3 reproduction ---

def _keras3_data(tmp, version, folder=None):
  keras3_data.prepare(folder or out_dir(tmp), [_corpus(tmp, version)],
                      vocab_size=40, seq_length=8, seed=0)


def _read_keras3_data(tmp):
  vocab = os.path.join(out_dir(tmp), keras3_data.VOCAB_FILE)
  sequences = os.path.join(out_dir(tmp), keras3_data.SEQUENCES_FILE)
  if not os.path.exists(vocab):
    assert not os.path.exists(sequences)
    return None
  with open(vocab, encoding="utf-8") as f:
    tokens = f.read().splitlines()
  with np.load(sequences) as found:
    assert json.loads(bytes(found["vocab"])) == tokens  # One version.
  return _by_reference(tmp, _keras3_data, keras3_data.VOCAB_FILE)


def _keras3_report(tmp, version):
  plan = keras3_plan.make_plan(keras3_plan.Options(
      output_dir=os.path.join(tmp, "planned"), size="tiny", seeds=1),
                               keras3_face)
  plan.options.output_dir = out_dir(tmp)  # Planned elsewhere: written here.
  plan.data.update(source="handmade", vocab_size=30,
                   sequences=keras3_data.Sequences(
                       train=np.zeros((20, 8), np.int32),
                       eval=np.zeros((4, 8), np.int32), vocab=["x"] * 30,
                       source="handmade"))
  results = {run.run_dir: {"arch": run.arch, "seed": 0, "seconds": 1.0,
                           "batch_digest": "0" * 64, "device": "cpu",
                           "dtype_policy": "float32",
                           "eval_logs": {"masked_lm_accuracy": version / 10,
                                         "lm_example_loss": 1.0},
                           "curves": {"train": [[1, 0.1]],
                                      "validation": [[2, version / 10]]}}
             for run in plan.pretrain}
  keras3_report.write_results(plan, results, {})


def _read_keras3_report(tmp):
  path = lambda name: os.path.join(out_dir(tmp), name)
  if not os.path.exists(path(keras3_plan.RESULTS_JSON)):
    assert not os.path.exists(path(keras3_plan.RESULTS_MD))
    return None
  with open(path(keras3_plan.RESULTS_JSON)) as f:
    summary = json.load(f)
  assert summary["writer"] == keras3_plan.WRITER
  for name, fingerprint in summary["files"].items():
    assert writes.size_of(path(name)) == fingerprint, name
  version = round(10 * summary["pretraining_runs"]["post_ln"][0][
      "eval_logs"]["masked_lm_accuracy"])
  with open(path(keras3_plan.RESULTS_MD)) as f:
    assert f"| {10 * version:.2f}" in f.read().replace(" ± ", "| ")
  return version


# --- The analysis ---

def _analysis(tmp, version):
  def draw(name):
    def fill(path):
      with open(path, "w") as f:
        f.write(f"{name} v{version}")
    return fill
  output_files.write_set(out_dir(tmp), {"version": version},
                         {name: draw(name)
                          for name in output_files.FIGURE_FILES})


def _read_analysis(tmp):
  summary = os.path.join(out_dir(tmp), output_files.SUMMARY_FILE)
  version = _set_version(summary, "version", {1: 1, 2: 2})
  for name in output_files.FIGURE_FILES:
    if version:
      with open(os.path.join(out_dir(tmp), name)) as f:
        assert f.read() == f"{name} v{version}"
  return version


def _decoder_paths(tmp, version, folder=None):
  heads = [np.linspace(0, version, 8), np.linspace(1, version + 1, 8)]
  decoder_paths.write_path_figures(
      {"self": {"entropy": [heads], "jsd": []}}, folder or out_dir(tmp))


def _read_decoder_paths(tmp):
  return _by_reference(tmp, _decoder_paths, "self_entropy.png")


# --- Keras 3 models and the bridge to the tf_keras face ---

def _backbone(version, **kwargs):
  keras.utils.set_random_seed(version)
  return keras3_backbone.RealFormerBackbone(
      **keras3_encoders.TINY, name=f"version{version}", **kwargs)


def _keras_file(tmp, version):
  os.makedirs(out_dir(tmp), exist_ok=True)
  _backbone(version).save(os.path.join(out_dir(tmp), "model.keras"))


def _read_keras_file(tmp):
  path = os.path.join(out_dir(tmp), "model.keras")
  if not os.path.exists(path):
    return None
  with zipfile.ZipFile(path) as archive:
    assert archive.testzip() is None
    name = json.loads(archive.read("config.json"))["config"]["name"]
  return {"version1": 1, "version2": 2}[name]


PRESET_FILES = ["config.json", "metadata.json", "model.weights.h5"]


def _preset(tmp, version):
  _backbone(version).save_to_preset(os.path.join(out_dir(tmp), "preset"))


def _missing(path: str, load: Callable[[str], Any], error: type) -> None:
  """`path` is missing: if a killed swap set it aside, `load` names the
  backup that holds it (and writes nothing)."""
  backup = writes.interrupted_swap(path, writes.OS_OPS)
  if backup:
    try:
      load(path)
    except error as e:
      assert f"{backup} holds" in str(e), e
    else:
      raise AssertionError(f"{path} loaded while missing")


def _read_preset(tmp):
  path = os.path.join(out_dir(tmp), "preset")
  if not os.path.exists(path):
    return _missing(path, keras3_backbone.RealFormerBackbone.from_preset,
                    FileNotFoundError)
  with open(os.path.join(path, "config.json")) as f:
    name = json.load(f)["config"]["name"]
  assert sorted(os.listdir(path)) == PRESET_FILES, os.listdir(path)
  return {"version1": 1, "version2": 2}[name]


def _save_run(tmp, version):
  keras3_bridge.save_run(
      _backbone(version, residual_attention=("none", "mean")[version - 1]),
      os.path.join(out_dir(tmp), "k3"), overwrite=True)


def _read_save_run(tmp):
  path = os.path.join(out_dir(tmp), "k3")
  if not os.path.exists(path):
    return _missing(path, keras3_bridge.load_run, ValueError)
  assert tf.train.list_variables(os.path.join(path, "ckpt-1"))  # Whole.
  with open(os.path.join(path, run_directory.ENCODER_YAML)) as f:
    text = f.read()
  return 1 if "residual_attention: none" in text else 2


ROWS = [
    Row("params_yaml", _params, _read_params, ["params.yaml"]),
    Row("glue", _glue, _read_glue,
        ["rte_train.tf_record", "rte_dev.tf_record", "rte_meta_data.json"],
        refusal=MOVE_IT),
    Row("squad", _squad, _read_squad,
        [squad.TRAIN_RECORD, squad.TRAIN_META, squad.TRAIN_SCHEDULE],
        refusal=MOVE_IT),
    Row("translation", _translation, _read_translation,
        ["sentencepiece.model", "sentencepiece.vocab", "train.tf_record",
         "dev.tf_record", translation.META_DATA],
        refusal=MOVE_IT),
    Row("create_pretraining_data", _pretraining, _read_pretraining,
        ["train.tfrecord", "train_pretraining_meta_data.json", "vocab.txt"],
        flag="--overwrite"),
    Row("create_pretraining_data_shards",
        functools.partial(_pretraining, num_shards=2), _read_pretraining,
        ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord",
         "train_pretraining_meta_data.json", "vocab.txt"],
        flag="--overwrite"),
    Row("beam_pretraining_data", _beam, _read_beam,
        [f"{BEAM_PREFIX}-00000-of-00002.tfrecord",
         f"{BEAM_PREFIX}-00001-of-00002.tfrecord",
         f"{BEAM_PREFIX}_pretraining_meta_data.json", "vocab.txt"],
        flag="--overwrite",
        skip=None if beam_pretraining_data else "apache_beam is not installed"),
    Row("quickstart_corpus", _quickstart, _read_quickstart,
        [quickstart_corpus.MANIFEST, "corpus_train.txt", "corpus_eval.txt",
         "vocab.txt", "train.tfrecord", "eval.tfrecord"],
        refusal=MOVE_IT),
    Row("keras3_data", _keras3_data, _read_keras3_data,
        [keras3_data.VOCAB_FILE, keras3_data.SEQUENCES_FILE]),
    Row("keras3_report", _keras3_report, _read_keras3_report,
        list(keras3_plan.REPORT[:3])),  # attention.png: the tf_keras face's.
    Row("analysis", _analysis, _read_analysis, list(output_files.OUTPUT_FILES)),
    Row("decoder_paths", _decoder_paths, _read_decoder_paths,
        ["self_entropy.png"],
        refusal=MOVE_IT),
    Row("keras3_save_model", _keras_file, _read_keras_file,
        ["model.keras", "model.keras/"]),
    Row("keras3_preset", _preset, _read_preset, ["preset/"]),
    Row("keras3_bridge_save_run", _save_run, _read_save_run, ["k3/"],
        flag="--overwrite"),
]
