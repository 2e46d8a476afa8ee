"""GLUE TSV/TFDS -> TFRecord conversion (realformer_tf.data.glue)."""
import collections
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import sentence_prediction_dataloader as sp_loader
from realformer_tf.data import output_sets
from realformer_tf.data import glue
from realformer_tf.data import glue_tasks
from realformer_tf.data import record_facts
from realformer_tf.data import tokenization
from tests.helpers import numpy_reference
from tests.helpers import shared_data


def _vocab_ids(vocab_file):
  with open(vocab_file, encoding="utf-8") as f:
    return {token: i for i, token in enumerate(f.read().split("\n"))}


def _write(path, text, bom=False):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8-sig" if bom else "utf-8") as f:
    f.write(text)


def _real_glue(task_dir, file_name):
  """A shared GLUE file; skips the test, naming it, when it is absent."""
  return shared_data.real(os.path.join("glue", task_dir, file_name))


def _slice_tsv(task_dir, file_name, rows, out_dir, header=True):
  """The first `rows` data rows of a shared GLUE file, byte-for-byte."""
  with open(_real_glue(task_dir, file_name), "rb") as f:
    lines = f.read().split(b"\n")
  keep = lines[:rows + (1 if header else 0)]
  os.makedirs(os.path.join(out_dir, task_dir), exist_ok=True)
  with open(os.path.join(out_dir, task_dir, file_name), "wb") as f:
    f.write(b"\n".join(keep) + b"\n")


def _load(path, seq_length, label_type="int"):
  loader = sp_loader.SentencePredictionDataLoader(
      sp_loader.SentencePredictionDataConfig(
          input_path=path, seq_length=seq_length, global_batch_size=1000,
          is_training=False, drop_remainder=False, label_type=label_type,
          include_example_id=True))
  batches = list(loader.load().as_numpy_iterator())
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_pair_truncation_matches_bert_loop():
  """`pack_inputs` keeps the pair lengths of BERT's truncate_seq_pair."""
  rng = random.Random(0)
  cases = [(rng.randrange(0, 60), rng.randrange(0, 60), rng.randrange(1, 70))
           for _ in range(3000)]
  cases += [(10, 10, 9), (10, 10, 10), (3, 20, 9), (20, 3, 9), (5, 5, 11)]
  by_room = collections.defaultdict(list)
  for case in cases:
    by_room[case[2]].append(case)
  for room, group in by_room.items():
    a, b = (tf.ragged.range([case[i] for case in group]) + 10 for i in (0, 1))
    features = tokenization.pack_inputs([a, b], room + 3, 2, 3)
    types = features["input_type_ids"].numpy().sum(axis=1)
    tokens = features["input_mask"].numpy().sum(axis=1)
    kept = list(zip((tokens - types - 2).tolist(), (types - 1).tolist()))
    assert kept == [numpy_reference.truncated_lengths(*case) for case in group], room
    assert kept == [numpy_reference.truncated_lengths(*case) for case in group], room


@pytest.mark.parametrize("task,counts,labels", [
    ("mrpc", {"train": 3668, "dev": 408}, None),
    ("cola", {"train": 8551, "dev": 1043}, None),
    ("stsb", {"train": 5749, "dev": 1500}, None),
    ("qnli", {"dev": 5463}, {"entailment": 2702, "not_entailment": 2761}),
    ("sst2", {"dev": 872}, None),
])
def test_reads_the_shared_glue_files(task, counts, labels):
  spec = glue_tasks.get_task(task)
  files = dict(spec.split_files)
  for split, count in counts.items():
    path = _real_glue(spec.dir_name, files[split])
    examples = glue_tasks.read_tsv_examples(spec, path)
    assert len(examples) == count
    if labels:
      found = {name: sum(e.label == spec.labels.index(name) for e in examples)
               for name in labels}
      assert found == labels
  if task == "mrpc":  # The BOM is not part of the first header name.
    first = glue_tasks.read_tsv_examples(
        spec, _real_glue("MRPC", "train.tsv"))[0]
    assert first.label == 1 and first.text_a.startswith("Amrozi accused")
    assert first.source.endswith("train.tsv:2")
  if task == "stsb":
    first = glue_tasks.read_tsv_examples(
        spec, _real_glue("STS-B", "dev.tsv"))[0]
    assert first.label == 5.0 and first.text_b == (
        "A man wearing a hard hat is dancing.")


def test_convert_sst2_and_mrpc_slices(tmp_path):
  glue_dir = str(tmp_path / "glue")
  _slice_tsv("SST-2", "dev.tsv", 20, glue_dir)
  os.replace(os.path.join(glue_dir, "SST-2", "dev.tsv"),
             os.path.join(glue_dir, "SST-2", "train.tsv"))
  _slice_tsv("SST-2", "dev.tsv", 6, glue_dir)
  # BERT's own ids and token counts (truncation, 30522): the real vocabulary.
  vocab_file = shared_data.real(shared_data.BERT_VOCAB)
  out = str(tmp_path / "out")
  meta = glue.convert("sst2", vocab_file, out, max_seq_length=16,
                      glue_dir=glue_dir)
  assert meta["train_data_size"] == 20
  assert meta["eval_data_size"] == {"dev": 6}
  assert meta["label_list"] == ["0", "1"] and meta["num_labels"] == 2
  # The vocabulary, so that fine-tuning can name a mismatch with its model.
  assert meta["vocab_file"] == os.path.abspath(vocab_file)
  assert meta["vocab_size"] == 30522
  assert meta["vocab_sha256"] == output_sets.file_sha256(vocab_file)
  with open(os.path.join(out, "sst2_meta_data.json")) as f:
    assert json.load(f) == meta
  assert sorted(os.listdir(out)) == [
      "sst2_dev.tf_record", "sst2_meta_data.json", "sst2_train.tf_record"]
  # What a read of every record proves, written with them (`record_facts`).
  train_facts = meta["records"]["sst2_train.tf_record"]
  assert train_facts == record_facts.scan(
      os.path.join(out, "sst2_train.tf_record")).as_dict()
  assert train_facts["count"] == 20 and meta["records"]["sst2_dev.tf_record"][
      "count"] == 6
  assert train_facts["lengths"]["input_ids"] == 16
  assert 1000 < train_facts["max"]["input_ids"] < 30522
  assert train_facts["min"]["input_ids"] == 0  # Padding.

  data = _load(os.path.join(out, "sst2_train.tf_record"), 16)
  vocab = _vocab_ids(vocab_file)
  # "it 's a charming and often affecting journey . \t1"
  words = "it ' s a charming and often affecting journey .".split()
  expected = ([vocab["[CLS]"]] + [vocab[w] for w in words] +
              [vocab["[SEP]"]])
  assert list(data["input_word_ids"][0][:len(expected)]) == expected
  assert list(data["input_mask"][0]) == [1] * 12 + [0] * 4
  assert not data["input_type_ids"].any()  # Single sentences: segment 0.
  assert data["label_ids"][0] == 1
  assert list(data["example_id"]) == list(range(20))
  # Every row ends with [SEP] at its last unpadded position.
  lengths = data["input_mask"].sum(axis=1)
  assert (data["input_word_ids"][np.arange(20), lengths - 1]
          == vocab["[SEP]"]).all()

  _slice_tsv("MRPC", "train.tsv", 8, glue_dir)
  _slice_tsv("MRPC", "dev.tsv", 4, glue_dir)
  meta = glue.convert("mrpc", vocab_file, out, max_seq_length=24,
                      glue_dir=glue_dir)
  assert meta["splits"]["train"]["num_truncated"] == 8  # Long pairs, seq 24.
  data = _load(os.path.join(out, "mrpc_train.tf_record"), 24)
  assert data["input_mask"].all()  # Truncated to exactly 24 tokens.
  ids, types = data["input_word_ids"], data["input_type_ids"]
  sep = vocab["[SEP]"]
  for row, segment in zip(ids, types):
    seps = list(np.flatnonzero(row == sep))
    assert len(seps) == 2 and seps[1] == 23
    # Segment 0 through the first [SEP], then 1; halves of 21 are 11 / 10.
    assert list(segment) == [0] * (seps[0] + 1) + [1] * (23 - seps[0])
    assert (seps[0] - 1, 23 - seps[0] - 1) == (11, 10)
  assert list(data["label_ids"]) == [1, 0, 1, 0, 1, 1, 0, 1]


def test_stsb_float_labels(tmp_path):
  glue_dir = str(tmp_path / "glue")
  _slice_tsv("STS-B", "train.tsv", 5, glue_dir)
  _slice_tsv("STS-B", "dev.tsv", 3, glue_dir)
  out = str(tmp_path / "out")
  meta = glue.convert("stsb", shared_data.vocab_file(), out, max_seq_length=32,
                      glue_dir=glue_dir)
  assert meta["label_type"] == "float" and meta["label_list"] is None
  data = _load(os.path.join(out, "stsb_dev.tf_record"), 32,
               label_type="float")
  np.testing.assert_allclose(data["label_ids"], [5.0, 4.75, 5.0])


def _tiny_rte(glue_dir, train_rows, dev_rows):
  header = "index\tsentence1\tsentence2\tlabel\n"
  _write(os.path.join(glue_dir, "RTE", "train.tsv"), header + train_rows)
  _write(os.path.join(glue_dir, "RTE", "dev.tsv"), header + dev_rows)


GOOD_ROWS = ("0\tA dog runs.\tAn animal moves.\tentailment\n"
             "1\tA cat sleeps.\tThe cat runs.\tnot_entailment\n")


@pytest.mark.parametrize("dev_rows,message", [
    (GOOD_ROWS + "2\tOnly one sentence.\n",
     r"dev\.tsv:4: 2 column\(s\).*missing column"),
    (GOOD_ROWS + "\n3\tA.\tB.\tcontradiction\n",
     r"dev\.tsv:5: label 'contradiction' is not one of the rte labels"),
    # A tab inside sentence 2: its tail would have become the label column.
    (GOOD_ROWS + "2\tA dog.\tAn\tanimal.\tentailment\n",
     r"dev\.tsv:4: 5 columns, but the rte format has 4: a tab inside"),
    (GOOD_ROWS + "2\tA dog.\t \tentailment\n",
     r"dev\.tsv:4: empty sentence in column 'sentence2'"),
])
def test_bad_rows_fail_before_writing(tmp_path, dev_rows, message):
  glue_dir = str(tmp_path / "glue")
  _tiny_rte(glue_dir, GOOD_ROWS, dev_rows)
  out = tmp_path / "out"
  with pytest.raises(ValueError, match=message):
    glue.convert("rte", shared_data.vocab_file(), str(out), max_seq_length=16,
                 glue_dir=glue_dir)
  assert not out.exists()  # Nothing written, not even the directory.


def _files(directory):
  """The set's files, without a killed writer's temps and journal."""
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in os.listdir(directory)
          if ".tmp-" not in name and ".pending-" not in name}


def test_headerless_cola_row_with_a_tab_in_the_sentence(tmp_path):
  path = str(tmp_path / "CoLA" / "dev.tsv")
  _write(path, "gj04\t1\t\tThe sailors rode the breeze.\n"
               "gj04\t0\t*\tThe sailors\trode breeze the.\n")
  with pytest.raises(ValueError, match=r"dev\.tsv:2: 5 columns, but the "
                     r"cola format has 4"):
    glue_tasks.read_tsv_examples(glue_tasks.get_task("cola"), path)


def test_bad_header_and_scores(tmp_path):
  spec = glue_tasks.get_task("rte")
  path = str(tmp_path / "x.tsv")
  _write(path, "index\tsentence1\tlabel\n0\tA.\tentailment\n")
  with pytest.raises(ValueError, match=r"x\.tsv:1: the header lacks column"
                     r"\(s\) \['sentence2'\]"):
    glue_tasks.read_tsv_examples(spec, path)
  stsb = glue_tasks.get_task("stsb")
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
            "sentence1\tsentence2\tscore\n")
  _write(path, header + "0\tg\tf\ty\t0\tn\tn\tA.\tB.\t5.5\n")
  with pytest.raises(ValueError, match=r"x\.tsv:2: stsb label '5.5' is not "
                     r"a number in \[0, 5\]"):
    glue_tasks.read_tsv_examples(stsb, path)
  cola = glue_tasks.get_task("cola")
  _write(path, "src\t1\t\tFine.\nsrc\t2\t\tBad label.\n")
  with pytest.raises(ValueError, match=r"x\.tsv:2: label '2'"):
    glue_tasks.read_tsv_examples(cola, path)
  with pytest.raises(ValueError, match="Unknown GLUE task 'wnli'"):
    glue_tasks.get_task("wnli")
  with pytest.raises(ValueError, match="exactly one of --glue_dir"):
    glue.convert("rte", shared_data.vocab_file(), str(tmp_path / "o"),
                 glue_dir=str(tmp_path),
                 tfds_data_dir=str(tmp_path))


def test_tfds_not_prepared(tmp_path):
  with pytest.raises(ValueError, match=r"glue/mrpc is not prepared under"):
    glue.read_tfds(glue_tasks.get_task("mrpc"), str(tmp_path))


def test_tfds_labels_are_mapped_by_name(tmp_path):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  # TFDS MNLI ids: 0 entailment, 1 neutral, 2 contradiction.
  rows = {"premise": [b"A man sleeps.", b"A dog barks loudly."],
          "hypothesis": [b"Someone rests.", b"A cat meows."],
          "label": np.array([0, 2], np.int64),
          "idx": np.array([0, 1], np.int32)}

  def fake_as_dataset(self, split, **kwargs):
    del self, split, kwargs
    return tf.data.Dataset.from_tensor_slices(rows)

  vocab_file = shared_data.vocab_file()
  out = str(tmp_path / "out")
  with tfds.testing.mock_data(as_dataset_fn=fake_as_dataset):
    meta = glue.convert("mnli", vocab_file, out, max_seq_length=16,
                        tfds_data_dir=str(tmp_path / "tfds"))
  assert meta["source"].startswith("tfds:glue/mnli@")
  assert set(meta["splits"]) == {"train", "dev_matched", "dev_mismatched"}
  data = _load(os.path.join(out, "mnli_dev_mismatched.tf_record"), 16)
  labels = glue_tasks.get_task("mnli").labels
  assert [labels[i] for i in data["label_ids"]] == [
      "entailment", "contradiction"]
  vocab = _vocab_ids(vocab_file)  # Each word is one piece in either vocab.
  assert list(data["input_word_ids"][0][:8]) == [
      vocab[t] for t in ("[CLS]", "a", "man", "sleeps", ".", "[SEP]",
                         "someone", "rests")]


def test_row_the_tsv_reader_cannot_split(tmp_path):
  """A carriage return inside a row is no row of GLUE's `csv.reader`."""
  path = str(tmp_path / "x.tsv")
  _write(path, "gj04\t1\t\tThe sailors rode the breeze.\n"
               "gj04\t0\t*\tThe sailors\rrode breeze the.\n")
  with pytest.raises(ValueError, match=r"x\.tsv:2: not a tab-separated row "
                     r"\(new-line character seen"):
    glue_tasks.read_tsv_examples(glue_tasks.get_task("cola"), path)


def test_users_look_alike_files_are_kept_and_a_file_output_dir_named(
    tmp_path):
  """38.4: files of the user's named like our temporaries (a dated copy
  `rte_train.tf_record.tmp-20240102`, `notes.tmp-1` of a dead or live pid)
  survive a conversion into their folder. 38.11: --output_dir naming a file
  is a ValueError naming it, not TensorFlow's FailedPreconditionError."""
  glue_dir = str(tmp_path / "glue")
  _tiny_rte(glue_dir, GOOD_ROWS, GOOD_ROWS)
  out = tmp_path / "out"
  out.mkdir()
  users = {"rte_train.tf_record.tmp-20240102": b"dated copy",
           "notes.tmp-1": b"pid 1's name", "mine.tmp-99999": b"mine"}
  for name, data in users.items():
    (out / name).write_bytes(data)
  glue.convert("rte", shared_data.vocab_file(), str(out), max_seq_length=16,
               glue_dir=glue_dir)
  assert {name: (out / name).read_bytes() for name in users} == users
  assert sorted(os.listdir(out)) == sorted(
      list(users) + ["rte_dev.tf_record", "rte_meta_data.json",
                     "rte_train.tf_record"])
  a_file = tmp_path / "a_file"
  a_file.write_bytes(b"x")
  with pytest.raises(ValueError, match=rf"--output_dir='{a_file}' is a file, "
                     r"not a directory: pass the directory to write "
                     r"rte_meta_data.json"):
    glue.convert("rte", shared_data.vocab_file(), str(a_file),
                 max_seq_length=16, glue_dir=glue_dir)
  # Under a file: TensorFlow's makedirs raised a bare
  # FailedPreconditionError.
  with pytest.raises(ValueError, match=rf"--output_dir='{a_file}/sub' is "
                     rf"under '{a_file}', which is a file"):
    glue.convert("rte", shared_data.vocab_file(), str(a_file / "sub"),
                 max_seq_length=16, glue_dir=glue_dir)
  assert a_file.read_bytes() == b"x"
