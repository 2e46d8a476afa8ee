"""Parallel text -> SentencePiece model + WMT records (data.translation)."""

import os

import pytest
import sentencepiece as spm
import tensorflow as tf

from official.nlp.data import wmt_dataloader
from realformer_tf.data import output_sets
from realformer_tf.data import translation
from tests.helpers import translation as ttu

# 8 words + the special pieces: a word model covers the corpus.
SMALL = dict(vocab_size=len(ttu.WORDS) + 3, model_type="word")


def _write(path, data: bytes):
  with open(path, "wb") as f:
    f.write(data)
  return str(path)


def _tsv(sources, targets):
  return "".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)).encode()


def _load(result, src_lang="src", tgt_lang="tgt"):
  """The dev records as Model Garden's WMT loader reads them (the sentences
  detokenized back)."""
  config = wmt_dataloader.WMTDataConfig(
      input_path=result["dev_file"], src_lang=src_lang, tgt_lang=tgt_lang,
      sentencepiece_model_path=result["sentencepiece_model"],
      is_training=False, static_batch=True, max_seq_length=16,
      global_batch_size=result["dev_examples"])
  batch = next(iter(wmt_dataloader.WMTDataLoader(config).load()))
  processor = spm.SentencePieceProcessor(
      model_file=result["sentencepiece_model"])
  decode = lambda ids: processor.DecodeIds([int(i) for i in ids if i > 1])  # pylint: disable=unnecessary-lambda-assignment
  return ([decode(r) for r in batch["inputs"].numpy()],
          [decode(r) for r in batch["targets"].numpy()])


def test_tsv_and_parallel_files_give_records_the_wmt_loader_reads(tmp_path):
  sources, targets = ttu.make_corpus(200, seed=0)
  dev_sources, dev_targets = ttu.make_corpus(6, seed=1)
  # TSV with a BOM and CRLF line ends; the dev set as parallel files.
  train = _write(tmp_path / "train.tsv", b"\xef\xbb\xbf" + _tsv(
      sources, targets).replace(b"\n", b"\r\n"))
  dev = [_write(tmp_path / "dev.src", "\n".join(dev_sources).encode()),
         _write(tmp_path / "dev.tgt", "\n".join(dev_targets).encode())]
  out = str(tmp_path / "out")
  result = translation.convert([train], out, dev_files=dev, **SMALL)
  assert result["special_ids"] == {"pad_id": 0, "eos_id": 1, "unk_id": 2,
                                   "bos_id": -1}
  assert (result["train_examples"], result["dev_examples"]) == (200, 6)
  longest = max(len(s.split()) for s in dev_sources) + 1  # + EOS
  assert result["dev_max_tokens"] == {"source": longest, "target": longest}
  assert sorted(os.listdir(out)) == [
      "dev.tf_record", "sentencepiece.model", "sentencepiece.vocab",
      "train.tf_record", translation.META_DATA]
  meta = os.path.join(out, translation.META_DATA)
  output_sets.check_set(meta, output_sets.read_manifest(meta))
  assert output_sets.read_manifest(meta)["train_examples"] == 200
  assert _load(result) == (dev_sources, dev_targets)
  first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(
      result["train_file"]))).numpy())
  assert sorted(first.features.feature) == ["src", "tgt"]
  assert first.features.feature["src"].bytes_list.value == [
      sources[0].encode()]

  # An existing model reused (its ids checked), other feature names.
  again = translation.convert(
      dev, str(tmp_path / "again"), dev_files=[train], src_lang="en",
      tgt_lang="de", sentencepiece_model=result["sentencepiece_model"])
  assert again["train_examples"] == 6
  assert _load(again, "en", "de") == (sources[:200], targets[:200])


@pytest.mark.parametrize("content, files, message", [
    (b"red blue\tblue red\nred gold\n", None,
     r"train.tsv:2: expected source<TAB>target, found 1 column\(s\)"),
    (b"red\tblue\tgold\n", None, r"train.tsv:1: .*found 3 column"),
    (b"red\tblue\n \tgold\n", None, r"train.tsv:2: the source sentence is "
     "empty"),
    (b"red\tblue\nred\t\r\n", None, r"train.tsv:2: the target sentence is "
     "empty"),
    (b"red\tblue\ngr\xfcn\tgold\n", None, r"train.tsv:2: not valid UTF-8 "
     r"\(byte 3 of the line\)"),
    (b"", None, r"train.tsv: the file is empty"),
    (b"red\nblue\n", b"der\n", r"a.txt has 2 lines, .*b.txt has 1"),
    (b"red\n\nblue\n", b"der\neulb\nder\n", r"a.txt:2: the source sentence "
     "is empty"),
])
def test_bad_rows_are_named_before_anything_is_written(tmp_path, content,
                                                       files, message):
  if files is None:
    inputs = [_write(tmp_path / "train.tsv", content)]
  else:
    inputs = [_write(tmp_path / "a.txt", content),
              _write(tmp_path / "b.txt", files)]
  out = tmp_path / "out"
  # A good dev split first: the train error still comes before any write.
  dev = _write(tmp_path / "dev.tsv", b"red\tder\n")
  with pytest.raises(ValueError, match=message):
    translation.convert(inputs, str(out), dev_files=[dev], **SMALL)
  assert not out.exists()


def test_a_model_with_sentencepiece_default_ids_is_refused(tmp_path):
  text = _write(tmp_path / "text.txt", "\n".join(ttu.WORDS).encode())
  prefix = str(tmp_path / "default")
  spm.SentencePieceTrainer.Train(input=text, model_prefix=prefix,
                                 model_type="word", vocab_size=11,
                                 hard_vocab_limit=False, minloglevel=2)
  with pytest.raises(ValueError, match=(
      r"task.sentencepiece_model_path='.*default.model': pad id is -1, eos "
      r"id is 2 \(unk 0, bos 1\); the translation task needs pad 0 and eos "
      r"1 .* python -m realformer_tf.data.translation")):
    translation.check_sentencepiece_model(prefix + ".model")
  # Refused as --sentencepiece_model too, before anything is written.
  tsv = _write(tmp_path / "train.tsv", b"red\tder\n")
  with pytest.raises(ValueError, match="--sentencepiece_model=.*pad id is -1"):
    translation.convert([tsv], str(tmp_path / "out"),
                        sentencepiece_model=prefix + ".model")
  assert not (tmp_path / "out").exists()
  with pytest.raises(ValueError, match="not a SentencePiece model"):
    translation.check_sentencepiece_model(text)
  with pytest.raises(ValueError, match="does not exist"):
    translation.check_sentencepiece_model(str(tmp_path / "nope.model"))
  with pytest.raises(ValueError, match="is empty"):
    translation.check_sentencepiece_model("")


def test_a_vocabulary_too_large_for_the_text_is_named(tmp_path):
  tsv = _write(tmp_path / "train.tsv", b"red\tder\n")
  with pytest.raises(ValueError, match=r"SentencePiece training failed "
                     r"\(vocab_size=500.*small --vocab_size"):
    translation.convert([tsv], str(tmp_path / "out"), vocab_size=500)
  assert not (tmp_path / "out").exists()
