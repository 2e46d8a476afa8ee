"""Tests for the BERT MLM/NSP record writer, read back with Model Garden."""
import bz2
import gzip
import logging
import lzma
import os
import random
import re
import sys

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import pretrain_dataloader
from realformer_tf.data import create_pretraining_data as cli
from realformer_tf.data import output_sets
from realformer_tf.data import pretraining_data
from realformer_tf.data import tokenization
from tests.helpers import file_trees
from tests.helpers import shared_data
from tests.helpers import watchdog

SEQ_LEN = 32
MAX_PRED = 5
NUM_DOCS = 8
WORDS_PER_DOC = 12
RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Every document has its own words, so a span of tokens tells its document.
DOC_WORDS = [[f"d{d}w{k}" for k in range(WORDS_PER_DOC)]
             for d in range(NUM_DOCS)]
VOCAB = RESERVED + [w for words in DOC_WORDS for w in words] + ["##ing", "."]
ID = {t: i for i, t in enumerate(VOCAB)}
PAD, CLS, SEP, MASK = ID["[PAD]"], ID["[CLS]"], ID["[SEP]"], ID["[MASK]"]


def make_corpus():
  """Handmade BERT-format text and the ids each document must tokenize to.

  Words ending in "ing" are not in the vocabulary and must split into
  `word` + `##ing`; capitals must be lower-cased.
  """
  rng = random.Random(7)
  lines, doc_ids = [], []
  for d in range(NUM_DOCS):
    ids = []
    for _ in range(rng.randint(5, 9)):
      words = [rng.choice(DOC_WORDS[d]) for _ in range(rng.randint(3, 9))]
      text = []
      for w in words:
        if rng.random() < 0.2:
          text.append(w + "ing")
          ids.extend([ID[w], ID["##ing"]])
        else:
          text.append(w.upper() if rng.random() < 0.2 else w)
          ids.append(ID[w])
      ids.append(ID["."])
      lines.append(" ".join(text) + ".")
    lines.append("")
    doc_ids.append(ids)
  return lines, doc_ids


LINES, DOC_IDS = make_corpus()


def occurrences(span, doc):
  n = len(span)
  return [i for i in range(len(doc) - n + 1) if doc[i:i + n] == span]


def docs_containing(span):
  return {d for d, doc in enumerate(DOC_IDS) if occurrences(span, doc)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  root = tmp_path_factory.mktemp("pretraining")
  half = LINES.index("", len(LINES) // 2) + 1
  corpus_a = root / "a.txt"
  corpus_b = root / "b.txt"
  corpus_a.write_text("\n".join(LINES[:half]) + "\n", encoding="utf-8")
  corpus_b.write_text("\n".join(LINES[half:]) + "\n", encoding="utf-8")
  vocab = root / "vocab.txt"
  vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  return dict(root=root, inputs=[str(corpus_a), str(corpus_b)],
              vocab=str(vocab))


@pytest.fixture(scope="module")
def records(files):
  output = str(files["root"] / "out" / "train.tfrecord")
  count = pretraining_data.create_pretraining_data(
      files["inputs"], files["vocab"], output, max_seq_length=SEQ_LEN,
      max_predictions_per_seq=MAX_PRED, dupe_factor=10, random_seed=3)
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=output, seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PRED,
      global_batch_size=2, is_training=False, drop_remainder=False)
  batches = list(pretrain_dataloader.BertPretrainDataLoader(config).load())
  return dict(output=output, count=count, batches=batches)


def examples(batches):
  for batch in batches:
    batch = {k: v.numpy() for k, v in batch.items()}
    for i in range(batch["input_word_ids"].shape[0]):
      yield {k: v[i] for k, v in batch.items()}


def test_read_documents_matches_handmade_tokenization(files):
  tokenizer = tokenization.make_tokenizer(files["vocab"])
  docs = pretraining_data.read_documents(files["inputs"], tokenizer)
  assert [sum(d, []) for d in docs] == DOC_IDS


def test_lines_longer_than_a_sequence_are_counted_in_a_warning(
    files, tmp_path, caplog):
  tokenizer = tokenization.make_tokenizer(files["vocab"])
  with open(files["inputs"][0], encoding="utf-8") as f:
    lines = f.read().splitlines()
  sentences = [l for l in lines if l]
  long_text = tmp_path / "long.txt"
  long_text.write_text("\n".join(
      [" ".join(sentences * 30), sentences[0], " ".join(sentences * 40)]) +
                       "\n", encoding="utf-8")
  caplog.set_level(logging.WARNING)
  docs = pretraining_data.read_documents([str(long_text)], tokenizer,
                                         max_tokens=SEQ_LEN)
  assert len(docs) == 1 and len(docs[0]) == 3
  (message,) = [r.getMessage() for r in caplog.records
                if "line(s) have more than" in r.getMessage()]
  assert message.startswith(
      f"{long_text}: 2 line(s) have more than {SEQ_LEN} tokens (longest: "
      f"{len(docs[0][2])})")


def test_model_garden_loader_reads_every_record_with_bert_shapes(records):
  assert records["count"] > 100
  first = records["batches"][0]
  assert first["input_word_ids"].shape == (2, SEQ_LEN)
  assert first["input_mask"].shape == (2, SEQ_LEN)
  assert first["input_type_ids"].shape == (2, SEQ_LEN)
  assert first["masked_lm_positions"].shape == (2, MAX_PRED)
  assert first["masked_lm_ids"].shape == (2, MAX_PRED)
  assert first["masked_lm_weights"].dtype == tf.float32
  assert first["next_sentence_labels"].shape == (2, 1)
  assert sum(len(list(examples([b]))) for b in records["batches"]) == (
      records["count"])


def test_layout_masking_and_reconstruction(records):
  num_masked = kept = replaced_by_mask = 0
  labels = []
  for ex in examples(records["batches"]):
    ids, mask, seg = (ex["input_word_ids"], ex["input_mask"],
                      ex["input_type_ids"])
    length = int(mask.sum())
    assert 5 <= length <= SEQ_LEN
    np.testing.assert_array_equal(mask, [1] * length + [0] * (SEQ_LEN - length))
    assert (ids[length:] == PAD).all() and (seg[length:] == 0).all()

    k = int(ex["masked_lm_weights"].sum())
    assert k == min(MAX_PRED, max(1, round(length * 0.15)))
    np.testing.assert_array_equal(ex["masked_lm_weights"],
                                  [1.0] * k + [0.0] * (MAX_PRED - k))
    positions = ex["masked_lm_positions"][:k]
    originals = ex["masked_lm_ids"][:k]
    assert (ex["masked_lm_positions"][k:] == 0).all()
    assert (ex["masked_lm_ids"][k:] == 0).all()
    assert (np.diff(positions) > 0).all()

    # Put the original tokens back.
    restored = ids[:length].copy()
    restored[positions] = originals
    a_len = int((seg[:length] == 0).sum()) - 2
    assert a_len >= 1 and length - a_len - 3 >= 1
    np.testing.assert_array_equal(
        seg[:length], [0] * (a_len + 2) + [1] * (length - a_len - 2))
    assert restored[0] == CLS
    assert list(np.flatnonzero(restored == SEP)) == [a_len + 1, length - 1]
    assert not set(positions) & {0, a_len + 1, length - 1}
    # Outside masked positions, the input ids are the original ones.
    unmasked = np.setdiff1d(np.arange(length), positions)
    np.testing.assert_array_equal(ids[unmasked], restored[unmasked])

    seg_a = restored[1:a_len + 1].tolist()
    seg_b = restored[a_len + 2:length - 1].tolist()
    docs_a, docs_b = docs_containing(seg_a), docs_containing(seg_b)
    assert docs_a and docs_b, "segments must be contiguous corpus text"
    label = int(ex["next_sentence_labels"][0])
    labels.append(label)
    if label == 0:
      # Actual next: B follows A in the same document (both may be trimmed).
      assert any(j >= i + len(seg_a)
                 for d in docs_a & docs_b
                 for i in occurrences(seg_a, DOC_IDS[d])
                 for j in occurrences(seg_b, DOC_IDS[d]))
    elif len(docs_a) == 1 and len(docs_b) == 1:
      # Random next: B comes from another document.
      assert docs_a != docs_b

    num_masked += k
    replaced_by_mask += int((ids[positions] == MASK).sum())
    kept += int((ids[positions] == originals).sum())

  assert num_masked > 500
  assert 0.74 < replaced_by_mask / num_masked < 0.86
  assert 0.05 < kept / num_masked < 0.16  # 10% kept (+ rare random hits)
  assert 0.3 < np.mean(labels) < 0.8


def test_same_seed_same_bytes_other_seed_differs(files, records):
  again = str(files["root"] / "again.tfrecord")
  other = str(files["root"] / "other.tfrecord")
  kwargs = dict(max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PRED,
                dupe_factor=10)
  # A comma-separated string of inputs works too.
  pretraining_data.create_pretraining_data(
      ",".join(files["inputs"]), files["vocab"], again, random_seed=3,
      **kwargs)
  pretraining_data.create_pretraining_data(
      files["inputs"], files["vocab"], other, random_seed=4, **kwargs)
  read = lambda p: open(p, "rb").read()
  assert read(again) == read(records["output"])
  assert read(other) != read(records["output"])
  assert not [f for f in os.listdir(files["root"]) if ".tmp-" in f]


@pytest.mark.parametrize("change, message", [
    (dict(input_files=["MISSING"]), r"Input file '.*missing\.txt' does not"),
    (dict(input_files=["A", "MISSING"]), r"missing\.txt' does not exist"),
    (dict(input_files=["EMPTY"]), r"empty\.txt' is empty"),
    (dict(vocab_file="NOT_VOCAB"), r"words\.txt' is not a BERT WordPiece"),
    (dict(vocab_file="MISSING"), r"Vocabulary file '.*missing\.txt' does"),
    (dict(max_seq_length=7), "max_seq_length must be >= 8, got 7"),
    (dict(masked_lm_prob=0.0), r"masked_lm_prob must be in \(0, 1\), got 0"),
    (dict(masked_lm_prob=1.0), r"masked_lm_prob must be in \(0, 1\), got 1"),
    (dict(max_predictions_per_seq=0), "max_predictions_per_seq must be >= 1"),
    (dict(output_file="A"), "is also an input file"),
    (dict(input_files=["A", "LATIN1"]),
     r"latin1\.txt:2: not UTF-8 text \(byte 0xe9 at offset 16\)"),
    (dict(input_files=["BINARY"]),
     r"binary\.bin:2: not UTF-8 text \(byte 0x80 at offset 128\)"),
])
def test_bad_inputs_raise_before_writing(files, tmp_path, change, message):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n  \n\n")
  not_vocab = tmp_path / "words.txt"
  not_vocab.write_text("the\ndog\n")
  latin1 = tmp_path / "latin1.txt"
  latin1.write_bytes("the dog.\nthe caf\u00e9 runs.\n".encode("latin-1"))
  binary = tmp_path / "binary.bin"
  binary.write_bytes(bytes(range(256)) * 4)
  names = {"MISSING": str(tmp_path / "missing.txt"), "EMPTY": str(empty),
           "NOT_VOCAB": str(not_vocab), "A": files["inputs"][0],
           "LATIN1": str(latin1), "BINARY": str(binary)}
  output = str(tmp_path / "out" / "x.tfrecord")
  kwargs = dict(input_files=files["inputs"], vocab_file=files["vocab"],
                output_file=output, max_seq_length=SEQ_LEN,
                max_predictions_per_seq=MAX_PRED)
  for key, value in change.items():
    kwargs[key] = ([names.get(v, v) for v in value] if isinstance(value, list)
                   else names.get(value, value))
  before = open(files["inputs"][0], "rb").read()
  with pytest.raises(ValueError, match=message):
    pretraining_data.create_pretraining_data(**kwargs)
  assert not os.path.exists(tmp_path / "out")
  assert open(files["inputs"][0], "rb").read() == before


def test_cli_rejects_bad_flags_before_learning_a_vocab(files, tmp_path):
  output = tmp_path / "cli" / "x.tfrecord"
  base = dict(input_files=files["inputs"], output_file=str(output),
              vocab_file=None, vocab_size=100, do_lower_case=True,
              max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PRED,
              masked_lm_prob=0.15, dupe_factor=1, short_seq_prob=0.1,
              random_seed=1)
  for change, message in [(dict(max_seq_length=4), "max_seq_length"),
                          (dict(vocab_size=3), "--vocab_size"),
                          (dict(masked_lm_prob=1.5), "masked_lm_prob"),
                          (dict(input_files=[str(tmp_path / "no.txt")]),
                           r"no\.txt")]:
    with pytest.raises(ValueError, match=message):
      cli.run(**{**base, **change})
    assert not output.parent.exists()


def test_cli_learns_vocab_next_to_output(files, tmp_path):
  output = tmp_path / "cli" / "train.tfrecord"
  # Another process with another hash seed than this one.
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
             PYTHONHASHSEED="4321")
  result = watchdog.run(
      [sys.executable, "-m", "realformer_tf.data.create_pretraining_data",
       "--input_files=" + ",".join(files["inputs"]),
       f"--output_file={output}", "--vocab_size=100",
       f"--max_seq_length={SEQ_LEN}", f"--max_predictions_per_seq={MAX_PRED}"],
      env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  vocab = tokenization.load_vocab(str(output.parent / "vocab.txt"))
  assert vocab[:5] == RESERVED
  count = int(result.stdout.strip().splitlines()[-1])
  assert count == sum(1 for _ in tf.data.TFRecordDataset(str(output)))
  assert count >= NUM_DOCS

  # The same run in this process writes the same bytes (vocabulary learning
  # and record serialization do not depend on the hash seed).
  here = tmp_path / "here" / "train.tfrecord"
  assert cli.run(
      input_files=files["inputs"], output_file=str(here), vocab_file=None,
      vocab_size=100, do_lower_case=True, max_seq_length=SEQ_LEN,
      max_predictions_per_seq=MAX_PRED, masked_lm_prob=0.15, dupe_factor=1,
      short_seq_prob=0.1, random_seed=12345) == count
  assert (here.parent / "vocab.txt").read_bytes() == (
      output.parent / "vocab.txt").read_bytes()
  assert here.read_bytes() == output.read_bytes()


def test_real_wikitext_with_bert_vocab(tmp_path):
  """About the real files: BERT's ids, and "the" everywhere in real English."""
  corpus = shared_data.real(shared_data.WIKITEXT_VALID)
  vocab = shared_data.real(shared_data.BERT_VOCAB)
  with open(corpus, encoding="utf-8") as f:
    head = [next(f) for _ in range(300)]
  small = tmp_path / "wiki_head.txt"
  small.write_text("".join(head), encoding="utf-8")
  output = str(tmp_path / "wiki.tfrecord")
  count = pretraining_data.create_pretraining_data(
      [str(small)], vocab, output, max_seq_length=128,
      max_predictions_per_seq=20)
  assert count > 20
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=output, seq_length=128, max_predictions_per_seq=20,
      global_batch_size=2, is_training=False, drop_remainder=False)
  n = 0
  the_count = 0
  for ex in examples(pretrain_dataloader.BertPretrainDataLoader(config)
                     .load()):
    n += 1
    ids = ex["input_word_ids"]
    assert ids[0] == 101  # [CLS]
    assert ((ids >= 0) & (ids < 30522)).all()
    length = int(ex["input_mask"].sum())
    k = int(ex["masked_lm_weights"].sum())
    restored = ids[:length].copy()
    restored[ex["masked_lm_positions"][:k]] = ex["masked_lm_ids"][:k]
    assert (restored == 102).sum() == 2 and restored[-1] == 102  # [SEP]
    assert ((ex["masked_lm_ids"][:k] > 0) & (ex["masked_lm_ids"][:k] < 30522)
            ).all()
    the_count += int((restored == 1996).sum())  # "the"
  assert n == count
  assert the_count > count  # Real English: "the" is everywhere.


def parse_records(path):
  spec = {name: tf.io.VarLenFeature(tf.int64) for name in (
      "input_ids", "input_mask", "segment_ids", "masked_lm_positions",
      "masked_lm_ids", "next_sentence_labels")}
  spec["masked_lm_weights"] = tf.io.VarLenFeature(tf.float32)
  return [{k: tf.sparse.to_dense(v).numpy().tolist()
           for k, v in tf.io.parse_single_example(record, spec).items()}
          for record in tf.data.TFRecordDataset(path)]


def test_records_equal_model_gardens_script_for_the_same_seed(files, records):
  """Model Garden's own reading, instance creation and writer, same seed."""
  mg = pretraining_data.mg_create_pretraining_data
  tokenizer = mg.tokenization.FullTokenizer(files["vocab"], do_lower_case=True)
  instances = mg.create_training_instances(
      files["inputs"], tokenizer, mg.get_processor_text_fn(False, True),
      SEQ_LEN, 10, 0.1, 0.15, MAX_PRED, random.Random(3))
  output = str(files["root"] / "model_garden.tfrecord")
  mg.write_instance_to_example_files(instances, tokenizer, SEQ_LEN, MAX_PRED,
                                     [output], False, False)
  assert parse_records(output) == parse_records(records["output"])


def test_model_garden_flags_stay_off_the_global_flags():
  assert "max_ngram_size" not in flags.FLAGS
  assert pretraining_data.import_without_global_flags(
      "official.nlp.data.create_pretraining_data") is (
          pretraining_data.mg_create_pretraining_data)


def test_cli_refuses_a_users_vocab_txt(files, tmp_path):
  """38.5: without --vocab_file, a vocab.txt in the output folder that this
  command did not write is refused (naming --vocab_file and --overwrite)
  and nothing is written; --overwrite replaces it; one it wrote is replaced
  without asking."""
  out = tmp_path / "cli"
  out.mkdir()
  users = out / "vocab.txt"
  users.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nmine\n")
  before = file_trees.files_under(out)
  args = dict(input_files=files["inputs"],
              output_file=str(out / "train.tfrecord"), vocab_file=None,
              vocab_size=100, do_lower_case=True, max_seq_length=SEQ_LEN,
              max_predictions_per_seq=MAX_PRED, masked_lm_prob=0.15,
              dupe_factor=1, short_seq_prob=0.1, random_seed=1)
  with pytest.raises(ValueError, match=(
      rf"{re.escape(str(users))} exists and was not written by this command"
      rf".*Pass --vocab_file={re.escape(str(users))} to tokenize with it, or "
      "--overwrite to replace it")):
    cli.run(**args)
  assert file_trees.files_under(out) == before
  cli.run(**args, overwrite=True)
  assert users.read_text() != before["vocab.txt"][0].decode()
  learned = file_trees.files_under(out)
  cli.run(**dict(args, random_seed=2))  # Ours now: replaced, same bytes.
  assert file_trees.files_under(out)["vocab.txt"][0] == (
      learned["vocab.txt"][0])


def _cli_args(files, output_file, **change):
  return dict(dict(input_files=files["inputs"], output_file=output_file,
                   vocab_file=None, vocab_size=100, do_lower_case=True,
                   max_seq_length=SEQ_LEN, max_predictions_per_seq=MAX_PRED,
                   masked_lm_prob=0.15, dupe_factor=1, short_seq_prob=0.1,
                   random_seed=1), **change)


def test_a_ram_output_writes_nothing_locally_and_its_set_reads_back(
    files, tmp_path, monkeypatch):
  """TensorFlow's in-memory file system stands for gs:// (no network)."""
  monkeypatch.chdir(tmp_path)
  output = "ram://pretraining_test/out/train.tfrecord"
  count = cli.run(**_cli_args(files, output))
  assert os.listdir(tmp_path) == []
  meta_path = "ram://pretraining_test/out/train_pretraining_meta_data.json"
  meta = output_sets.read_manifest(meta_path)
  output_sets.check_set(meta_path, meta)
  assert sorted(meta["files"]) == ["train.tfrecord", "vocab.txt"]
  assert meta["vocab_file"] == "ram://pretraining_test/out/vocab.txt"
  assert meta["input_files"] == files["inputs"]
  assert count == meta["num_examples"] == sum(
      1 for _ in tf.data.TFRecordDataset(output)) > 0


def test_an_unreachable_cloud_output_is_one_refusal_writing_nothing(
    files, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  file_trees.assert_unreachable_refused(
      lambda output: cli.run(**_cli_args(files, output)), "train.tfrecord",
      tmp_path)


def test_gz_and_bz2_inputs_give_the_plain_texts_records(files, tmp_path):
  plain = str(tmp_path / "plain" / "train.tfrecord")
  packed = str(tmp_path / "packed" / "train.tfrecord")
  inputs = [tmp_path / "a.txt.gz", tmp_path / "b.txt.bz2"]
  for source, target, compress in zip(files["inputs"], inputs,
                                      (gzip.compress, bz2.compress)):
    target.write_bytes(compress(open(source, "rb").read()))
  for input_files, output in ((files["inputs"], plain),
                              (list(map(str, inputs)), packed)):
    cli.run(**_cli_args(files, output, input_files=input_files))
  assert open(packed, "rb").read() == open(plain, "rb").read()
  assert open(os.path.join(os.path.dirname(packed), "vocab.txt")).read() == (
      open(os.path.join(os.path.dirname(plain), "vocab.txt")).read())


@pytest.mark.parametrize("name, data, message", [
    ("gz_as.txt", gzip.compress(b"the dog.\n", mtime=0), r"gz_as\.txt: a "
     r"gzip-compressed file, not text: name it \*\.gz to have it read "
     "decompressed, or decompress it."),
    ("bz2_as.txt", bz2.compress(b"the dog.\n"), r"bz2_as\.txt: a "
     r"bzip2-compressed file, not text: name it \*\.bz2"),
    ("x.txt.xz", lzma.compress(b"the dog.\n"), r"x\.txt\.xz: a xz-compressed "
     r"file, not text: decompress it first \(\.gz and \.bz2 files are read"),
    ("bad.txt.gz", b"\x1f\x8b\x08" + bytes(20), r"bad\.txt\.gz'"),
])
def test_a_compressed_file_read_as_text_is_named_as_one(files, tmp_path, name,
                                                        data, message):
  (tmp_path / name).write_bytes(data)
  output = tmp_path / "out" / "train.tfrecord"
  with pytest.raises(ValueError, match=message):
    cli.run(**_cli_args(files, str(output),
                        input_files=[str(tmp_path / name)]))
  assert not output.parent.exists()


def test_one_document_is_refused_before_records_are_written(files, tmp_path):
  """Model Garden would take its "random" next sentences from the document
  itself, still labelled random."""
  text = tmp_path / "one.txt"
  text.write_text("\n".join(LINES[:LINES.index("")]) + "\n")
  output = tmp_path / "out" / "train.tfrecord"
  for vocab_file in (files["vocab"], None):
    with pytest.raises(ValueError, match=re.escape(
        f"The input ({text}) has 1 document(s); at least 2 are needed for "
        "random next sentences from another document (separate documents "
        "with a blank line).")):
      cli.run(**_cli_args(files, str(output), input_files=[str(text)],
                          vocab_file=vocab_file))
    assert not output.exists() and not (output.parent / "vocab.txt").exists()
