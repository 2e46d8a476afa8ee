"""Fine-tuning from a run of ours (run_plan.derive, plan_rules): encoder
config inherited, checks before writing."""

import json
import os
import tempfile

from absl.testing import parameterized
import tensorflow as tf

from official.core import exp_factory
from official.core import train_utils
from realformer_tf.checkpoints import errors
from realformer_tf.configs import experiments
from realformer_tf.configs import finetuning
from realformer_tf.data import glue
from realformer_tf.data import pretraining_data
from realformer_tf.data import tokenization
from realformer_tf.training import plan_facts
from realformer_tf.training import plan_rules
from realformer_tf.training import run_plan
from realformer_tf.training import sweep
from realformer_tf.training import train_lib
from tests.helpers import shared_data
from tests.helpers import train_runs as utils

_ENCODER = dict(vocab_size=utils.TINY_VOCAB_SIZE, hidden_size=16,
                num_layers=1, num_attention_heads=2, intermediate_size=32,
                max_position_embeddings=32, residual_attention="mean",
                norm_first=True)


def _write_run(run_dir, vocab_file, with_nsp=True, nsp_width=16):
  """A model dir as train.py writes it: params.yaml + a checkpoint."""
  params = exp_factory.get_exp_config(experiments.PRETRAINING)
  params.override({"task": {"vocab_file": vocab_file,
                            "model": {"encoder": {"any": _ENCODER}}}})
  params.task.model.cls_heads[0].inner_dim = nsp_width
  if not with_nsp:
    params.task.model.cls_heads = []
  os.makedirs(run_dir, exist_ok=True)
  train_utils.serialize_config(params, run_dir)
  return utils.save_encoder_checkpoint(run_dir, 7, **_ENCODER)


def _glue_records(directory, seq_length=16):
  """A valid GLUE (MRPC) record file of the tiny vocabulary: the checks of
  the data sets, which run first, pass it."""
  path = os.path.join(directory, "mrpc_train.tf_record")
  ids = [2] + [7] * (seq_length - 2) + [3]
  feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(
      value=value)) for name, value in (
          ("input_ids", ids), ("input_mask", [1] * seq_length),
          ("segment_ids", [0] * seq_length), ("label_ids", [1]))}
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(tf.train.Example(features=tf.train.Features(
        feature=feature)).SerializeToString())
  return path


def _glue_flags(init_checkpoint, extra=""):
  override = f"task.init_checkpoint={init_checkpoint}"
  return train_utils.ParseConfigOptions(
      experiment=finetuning.GLUE,
      config_file=[finetuning.glue_yaml_path("mrpc")],
      params_override=override + extra, tpu=None)


def _checked(params, mode, model_dir):
  """The checked run's locked config (every rule, the data built)."""
  with train_lib.checked_run(params, mode, model_dir) as run:
    return run.plan.params


class InitFromRunTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.vocab = utils.write_vocab(os.path.join(self.tmp, "vocab.txt"))
    self.run_dir = os.path.join(self.tmp, "pretrain")

  def _parse(self, init_checkpoint, extra=""):
    return train_lib.parse_configuration_and_sources(
        _glue_flags(init_checkpoint, extra))

  def _derive(self, init_checkpoint, extra="", mode="train"):
    params, explicit = self._parse(init_checkpoint, extra)
    return run_plan.derive(params, mode, os.path.join(self.tmp, "mrpc"),
                           explicit=explicit)

  @parameterized.named_parameters(("model_dir", False), ("ckpt_prefix", True))
  def test_encoder_config_comes_from_the_run(self, use_prefix):
    prefix = _write_run(self.run_dir, self.vocab, with_nsp=False)
    plan = self._derive(prefix if use_prefix else self.run_dir)
    self.assertIn("is a realformer/pretraining run: its encoder config",
                  plan.derived[0])
    params = plan.params
    encoder = params.task.model.encoder.any
    for key, value in _ENCODER.items():
      self.assertEqual(getattr(encoder, key), value, key)
    self.assertEqual(encoder.dropout_rate, finetuning.PAPER_DROPOUT)
    # No NSP head in the run: no pooler to restore.
    self.assertFalse(params.task.init_cls_pooler)
    self.assertEqual(plan.init.prefix, prefix)
    self.assertEqual(params.task.init_checkpoint, prefix)

  def test_nsp_pooler_of_another_width_is_not_restored(self):
    # The quickstart's NSP head can be wider than a resized encoder; GLUE's
    # pooler is hidden_size wide, so restoring it would fail mid-build.
    _write_run(self.run_dir, self.vocab, nsp_width=128)
    plan = self._derive(self.run_dir)  # Inherits the run's encoder.
    self.assertFalse(plan.params.task.init_cls_pooler)
    with self.assertRaisesRegex(ValueError, "init_cls_pooler=true .* width "
                                "128, not the encoder's hidden_size=16"):
      plan_rules.check(self._derive(self.run_dir, ",task.init_cls_pooler=true"),
                       (plan_rules.derivation,))

  def test_explicit_conflicting_size_names_both_values(self):
    _write_run(self.run_dir, self.vocab)
    with self.assertRaisesRegex(ValueError, r"hidden_size=32 .*--params_override"
                                r".*run has hidden_size=16"):
      plan_rules.check(
          self._derive(self.run_dir, ",task.model.encoder.any.hidden_size=32"),
          (plan_rules.derivation,))

  def test_the_sweep_refuses_what_train_py_refuses(self):
    """Issue 46: the sweep's runs carry the keys the user set, so an encoder
    setting that contradicts the init run is refused, not replaced."""
    _write_run(self.run_dir, self.vocab)
    train = _glue_records(self.tmp)
    records = os.path.dirname(train)
    tf.io.gfile.copy(train, os.path.join(records, "mrpc_dev.tf_record"))

    def planned(extra):
      config, explicit = sweep.base_config(
          "mrpc", data_dir=records,
          params_override=f"task.init_checkpoint={self.run_dir},"
          "task.train_data.seq_length=16,task.validation_data.seq_length=16"
          + extra)
      return sweep.plan_runs("mrpc", os.path.join(self.tmp, "runs"), [1],
                             [2e-5], [0], config, 1, explicit)

    runs = planned("")
    sweep.check_runs(runs)  # The run's encoder, inherited.
    self.assertEqual(runs[0].explicit["task.init_checkpoint"][0], 1)
    with self.assertRaisesRegex(ValueError, r"hidden_size=32 \(set by "
                                r"--params_override=.*run has hidden_size=16"):
      sweep.check_runs(planned(",task.model.encoder.any.hidden_size=32"))
    with self.assertRaisesRegex(ValueError, r"^trainer.train_steps \(set by "
                                r"--params_override=.*\): the sweep sets it"):
      planned(",trainer.train_steps=5")
    self.assertFalse(os.path.exists(os.path.join(self.tmp, "runs")))

  def test_shape_mismatch_named_before_building(self):
    # A checkpoint outside a model dir: the configured encoder is used as is.
    prefix = _write_run(self.run_dir, self.vocab)
    other = os.path.join(self.tmp, "bare")
    os.makedirs(other)
    for name in tf.io.gfile.glob(prefix + "*"):
      tf.io.gfile.copy(name, os.path.join(other, os.path.basename(name)))
    plan = self._derive(
        os.path.join(other, os.path.basename(prefix)),
        ",task.model.encoder.any.hidden_size=16,"
        "task.model.encoder.any.num_layers=1,"
        "task.model.encoder.any.num_attention_heads=2,"
        f"task.model.encoder.any.vocab_size={utils.TINY_VOCAB_SIZE},"
        "task.model.encoder.any.intermediate_size=48,"
        "task.model.encoder.any.max_position_embeddings=32,"
        "task.model.encoder.any.norm_first=true,"
        "task.model.encoder.any.residual_attention=mean")
    self.assertEqual(plan.derived, ())  # Not a run of ours.
    with self.assertRaises(errors.CheckpointMismatchError) as e:
      plan_rules.check(plan, (plan_rules.init_checkpoint,))
    message = str(e.exception)
    self.assertIn("task.init_checkpoint", message)
    self.assertIn("intermediate", message)
    self.assertIn("checkpoint [16, 32], model [16, 48]", message)

  def test_unreadable_checkpoint_is_named(self):
    prefix = _write_run(self.run_dir, self.vocab)
    data = tf.io.gfile.glob(prefix + ".data-*")[0]
    with open(data, "r+b") as f:
      f.truncate(10)
    with self.assertRaisesRegex(ValueError, "task.init_checkpoint"):
      plan_rules.check(self._derive(self.run_dir),
                       (plan_rules.init_checkpoint,))

  def test_a_damaged_newest_checkpoint_is_skipped_and_the_older_used(self):
    """A run directory's newest checkpoint whose encoder fails its checksum:
    the checks fall back to the older one, with a warning naming the newer,
    and `task.init_checkpoint` becomes that prefix, so the task restores
    what was checked (Model Garden would take the directory's newest)."""
    older = _write_run(self.run_dir, self.vocab, with_nsp=False)
    newer = os.path.join(self.run_dir, "ckpt-8")
    for path in tf.io.gfile.glob(older + ".*"):
      tf.io.gfile.copy(path, newer + path[len(older):])
    with open(os.path.join(self.run_dir, "checkpoint"), "w") as f:
      f.write('model_checkpoint_path: "ckpt-8"\n'
              'all_model_checkpoint_paths: "ckpt-7"\n'
              'all_model_checkpoint_paths: "ckpt-8"\n')
    data = newer + ".data-00000-of-00001"
    with open(data, "r+b") as f:
      f.seek(os.path.getsize(data) // 2)
      f.write(b"\xff" * 16)  # Same size: only the tensors' checksums fail.
    params, _ = self._parse(
        self.run_dir, ",task.train_data.seq_length=16,"
        f"task.train_data.input_path={_glue_records(self.tmp)}")
    with self.assertLogs(level="WARNING") as logs:
      checked = _checked(params, "train", os.path.join(self.tmp, "mrpc"))
    self.assertEqual(checked.task.init_checkpoint, older)
    self.assertIn(f"{newer}: ", "\n".join(logs.output))

  def test_records_converted_with_another_vocabulary(self):
    _write_run(self.run_dir, self.vocab)
    data_dir = os.path.join(self.tmp, "glue")
    os.makedirs(data_dir)
    other_vocab = utils.write_vocab(os.path.join(self.tmp, "other.txt"),
                                    size=40)
    for split in ("train", "dev"):
      with open(os.path.join(data_dir, f"mrpc_{split}.tf_record"), "wb") as f:
        f.write(b"x")
    meta = dict(tokenization.vocab_meta(other_vocab), task="mrpc",
                splits={"train": {"file": "mrpc_train.tf_record"},
                        "dev": {"file": "mrpc_dev.tf_record"}})
    with open(os.path.join(data_dir, "mrpc_meta_data.json"), "w") as f:
      json.dump(meta, f)
    overrides = (
        f",task.train_data.input_path={data_dir}/mrpc_train.tf_record"
        f",task.validation_data.input_path={data_dir}/mrpc_dev.tf_record")
    with self.assertRaisesRegex(
        ValueError, r"mrpc_train.tf_record.*other.txt \(40 tokens.*"
        r"mrpc_meta_data.json.*vocab.txt \(64 tokens.*--vocab_file="):
      plan_rules.check(self._derive(self.run_dir, overrides),
                       (plan_rules.records_vocabulary,))
    # Same vocabulary: fine.
    with open(os.path.join(data_dir, "mrpc_meta_data.json"), "w") as f:
      json.dump(dict(meta, **tokenization.vocab_meta(self.vocab)), f)
    plan_rules.check(self._derive(self.run_dir, overrides),
                     (plan_rules.records_vocabulary,))

  def test_prepare_and_validate_writes_nothing_on_mismatch(self):
    prefix = _write_run(self.run_dir, self.vocab)
    os.remove(os.path.join(self.run_dir, "params.yaml"))  # a bare checkpoint
    params, _ = self._parse(
        prefix, ",task.model.encoder.any.hidden_size=32,"
        "task.model.encoder.any.num_attention_heads=2,"
        "task.init_cls_pooler=false,task.train_data.seq_length=16,"
        f"task.train_data.input_path={_glue_records(self.tmp)}")
    model_dir = os.path.join(self.tmp, "mrpc")
    with self.assertRaisesRegex(errors.CheckpointMismatchError,
                                "checkpoint .*, model .*32"):
      _checked(params, "train", model_dir)
    self.assertFalse(os.path.exists(model_dir))

  def test_vocabulary_of_another_size_than_the_embedding_is_refused(self):
    """Issue 30 item 0: a run whose vocab.txt was rebuilt (40 tokens) beside
    its checkpoint (64 embedding rows); records converted with that
    vocabulary passed every check and fine-tuned to rc 0 on ids that do not
    match the checkpoint. Now refused before the model dir is created."""
    rebuilt = utils.write_vocab(os.path.join(self.tmp, "rebuilt.txt"),
                                size=40)
    _write_run(self.run_dir, rebuilt)
    records = _glue_records(self.tmp)
    with open(os.path.join(self.tmp, "mrpc_meta_data.json"), "w") as f:
      json.dump(dict(tokenization.vocab_meta(rebuilt), task="mrpc",
                     splits={"train": {"file": "mrpc_train.tf_record"}}), f)
    params, _ = self._parse(
        self.run_dir, f",task.train_data.seq_length=16,"
        f"task.train_data.input_path={records}")
    model_dir = os.path.join(self.tmp, "mrpc")
    with self.assertRaisesRegex(
        ValueError, r"mrpc_train.tf_record.*rebuilt.txt' of 40 tokens \(see "
        r".*mrpc_meta_data.json\), but the word embedding of "
        r"task.init_checkpoint=.*pretrain.*ckpt-7.*has 64 rows"):
      _checked(params, "train", model_dir)
    self.assertFalse(os.path.exists(model_dir))
    params.task.validation_data.input_path = records
    params.task.validation_data.seq_length = 16
    # The run's own vocabulary (64 tokens) fits.
    params.task.validation_data.vocab_file = self.vocab
    with open(os.path.join(self.tmp, "mrpc_meta_data.json"), "w") as f:
      json.dump(dict(tokenization.vocab_meta(self.vocab), task="mrpc",
                     splits={"train": {"file": "mrpc_train.tf_record"}}), f)
    plan_rules.check(run_plan.derive(params, "train_and_eval", model_dir),
                     (plan_rules.init_checkpoint,))

  def test_mixed_record_set_is_refused_before_writing(self):
    """Issue 23: new --nolower_case train records beside the old dev records
    and meta data (what a conversion killed mid-swap leaves) trained to rc 0;
    now refused, naming the file, before the model dir is created."""
    glue_dir = os.path.join(shared_data.FIXTURE_DIR, "glue")
    data_dir, other_dir = (os.path.join(self.tmp, d) for d in ("glue", "nlc"))
    for output_dir, lower_case in ((data_dir, True), (other_dir, False)):
      glue.convert("mrpc", shared_data.vocab_file(), output_dir,
                   max_seq_length=128, glue_dir=glue_dir,
                   lower_case=lower_case)
    params, _ = train_lib.parse_configuration_and_sources(
        train_utils.ParseConfigOptions(
            experiment=finetuning.GLUE,
            config_file=[finetuning.glue_yaml_path("mrpc")],
            params_override=(
                f"task.train_data.input_path={data_dir}/mrpc_train.tf_record,"
                "task.validation_data.input_path="
                f"{data_dir}/mrpc_dev.tf_record"), tpu=None))
    plan_rules.check(run_plan.derive(params, "train", self.tmp),
                     (plan_rules.data_sets,))  # A whole set.

    train = glue.record_path(data_dir, "mrpc", "train")
    other = glue.record_path(other_dir, "mrpc", "train")
    with open(train, "rb") as f, open(other, "rb") as g:
      self.assertNotEqual(f.read(), g.read())
    os.replace(other, train)
    model_dir = os.path.join(self.tmp, "mrpc_run")
    with self.assertRaisesRegex(
        ValueError, "task.train_data.input_path=.*: " + train +
        " has .*mrpc_meta_data.json.*python -m realformer_tf.data.glue"):
      _checked(params, "train", model_dir)
    self.assertFalse(os.path.exists(model_dir))

  def test_pretraining_records_find_their_set_manifest(self):
    record = os.path.join(self.tmp, "pre", "train.tfrecord")
    os.makedirs(os.path.dirname(record))
    with open(record, "wb") as f:
      f.write(b"x")
    meta_path = pretraining_data.meta_data_path(record)
    with open(meta_path, "w") as f:
      json.dump({"files": {"train.tfrecord": {}}}, f)
    self.assertEqual(plan_facts.Reader().meta_data(record)[0], meta_path)


if __name__ == "__main__":
  tf.test.main()
