r"""Parallel text -> a SentencePiece model and the records Model Garden's WMT
loader reads, for `realformer/translation` on one's own data.

  python -m realformer_tf.data.translation --train_files=train.tsv \
    --dev_files=dev.tsv --output_dir=/data/my_mt --vocab_size=8000

Every line is checked (errors name `file:line`) before one output set is
published: `sentencepiece.model`/`.vocab` and `train`/`dev.tf_record`.
"""

import os
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags
import sentencepiece as spm
import tensorflow as tf

from realformer_tf import cli
from realformer_tf import utils
from realformer_tf.data import output_sets

# Model Garden's reserved ids: `TranslationTask`'s loss ignores 0 and the WMT
# loader pads with 0 and ends a truncated sentence with 1.
SPECIAL_IDS = {"pad_id": 0, "eos_id": 1, "unk_id": 2, "bos_id": -1}
MODEL_NAME = "sentencepiece.model"
# The set's manifest: `convert`'s result, and the files it wrote.
META_DATA = "translation_meta_data.json"

Pair = Tuple[str, str]


def check_sentencepiece_model(path: str,
                              key: str = "task.sentencepiece_model_path"
                              ) -> Dict[str, int]:
  """The model's {pad_id, eos_id, unk_id, bos_id}, if `TranslationTask` can
  train with it (SentencePiece's defaults, unk 0 and eos 2, train without an
  error and learn nothing: unk is dropped from the loss as padding); else a
  ValueError naming `key`, the path and the ids found."""
  if not path:
    raise ValueError(f"{key} is empty: set it to a SentencePiece model (pad "
                     "id 0, eos id 1), e.g. from python -m "
                     "realformer_tf.data.translation.")
  if not tf.io.gfile.exists(path):
    raise ValueError(f"{key}={path!r} does not exist.")
  processor = spm.SentencePieceProcessor()
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      processor.LoadFromSerializedProto(f.read())
  except (RuntimeError, OSError, tf.errors.OpError) as e:
    raise ValueError(f"{key}={path!r} is not a SentencePiece model "
                     f"({type(e).__name__}: {e}).") from None
  ids = {name: getattr(processor, name)() for name in SPECIAL_IDS}
  if ids["pad_id"] != 0 or ids["eos_id"] != 1:
    raise ValueError(
        f"{key}={path!r}: pad id is {ids['pad_id']}, eos id is "
        f"{ids['eos_id']} (unk {ids['unk_id']}, bos {ids['bos_id']}); the "
        "translation task needs pad 0 and eos 1 (the loss ignores id 0 as "
        "padding; the loader ends truncated sentences with id 1). Retrain "
        "with pad_id=0 eos_id=1 unk_id=2 bos_id=-1, or use python -m "
        "realformer_tf.data.translation.")
  return ids


def _lines(path: str) -> List[Tuple[int, str]]:
  """(line number, text) of each line of `path`, UTF-8 checked."""
  with tf.io.gfile.GFile(path, "rb") as f:
    data = f.read()
  if data.startswith(b"\xef\xbb\xbf"):
    data = data[3:]
  if not data:
    raise ValueError(f"{path}: the file is empty.")
  raw = data.split(b"\n")
  if raw[-1] == b"":  # The final line end.
    raw.pop()
  lines = []
  for number, line in enumerate(raw, 1):
    if line.endswith(b"\r"):
      line = line[:-1]
    try:
      lines.append((number, line.decode("utf-8")))
    except UnicodeDecodeError as e:
      raise ValueError(f"{path}:{number}: not valid UTF-8 (byte "
                       f"{e.start + 1} of the line); save the file as UTF-8."
                       ) from None
  return lines


def _check_side(text: str, where: str, side: str) -> str:
  if not text.strip():
    raise ValueError(f"{where}: the {side} sentence is empty.")
  return text


def read_pairs(files: Sequence[str]) -> List[Pair]:
  """(source, target) pairs of a TSV file or of two parallel text files; a
  ValueError names `file:line` of the first bad line."""
  files = [f for f in files if f]
  if len(files) == 1:
    pairs = []
    for number, line in _lines(files[0]):
      where = f"{files[0]}:{number}"
      columns = line.split("\t")
      if len(columns) != 2:
        raise ValueError(
            f"{where}: expected source<TAB>target, found {len(columns)} "
            f"column(s) ({len(columns) - 1} tabs).")
      pairs.append((_check_side(columns[0], where, "source"),
                    _check_side(columns[1], where, "target")))
    return pairs
  if len(files) == 2:
    source, target = (_lines(f) for f in files)
    if len(source) != len(target):
      raise ValueError(
          f"Parallel files of different lengths: {files[0]} has "
          f"{len(source)} lines, {files[1]} has {len(target)}.")
    return [(_check_side(s, f"{files[0]}:{n}", "source"),
             _check_side(t, f"{files[1]}:{n}", "target"))
            for (n, s), (_, t) in zip(source, target)]
  raise ValueError(f"Expected one TSV file or two parallel files "
                   f"(source,target); got {len(files)}: {list(files)}.")


def train_sentencepiece(pairs: Sequence[Pair], prefix: str, vocab_size: int,
                        model_type: str = "unigram",
                        character_coverage: float = 1.0) -> None:
  """Trains a SentencePiece model on both sides of `pairs` with
  `SPECIAL_IDS` as `<prefix>.model` and `.vocab`; a ValueError names the
  settings SentencePiece refuses (a vocabulary larger than the text allows).
  """
  text = prefix + ".txt"
  with open(text, "w", encoding="utf-8") as f:
    for source, target in pairs:
      f.write(f"{source}\n{target}\n")
  try:
    spm.SentencePieceTrainer.Train(
        input=text, model_prefix=prefix, vocab_size=vocab_size,
        model_type=model_type, character_coverage=character_coverage,
        minloglevel=2, **SPECIAL_IDS)
  except RuntimeError as e:
    raise ValueError(
        f"SentencePiece training failed (vocab_size={vocab_size}, "
        f"model_type={model_type!r}): {e}. A small corpus needs a small "
        "--vocab_size.") from None


def write_records(path: str, pairs: Sequence[Pair], src_lang: str,
                  tgt_lang: str) -> None:
  """`pairs` as `tf.train.Example`s (`WMTDataLoader._decode`'s features)."""
  with tf.io.TFRecordWriter(path) as writer:
    for source, target in pairs:
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          src_lang: tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[source.encode("utf-8")])),
          tgt_lang: tf.train.Feature(bytes_list=tf.train.BytesList(
              value=[target.encode("utf-8")]))})).SerializeToString())


def convert(train_files: Sequence[str], output_dir: str,
            dev_files: Optional[Sequence[str]] = None,
            vocab_size: int = 8000, model_type: str = "unigram",
            character_coverage: float = 1.0, src_lang: str = "src",
            tgt_lang: str = "tgt",
            sentencepiece_model: Optional[str] = None) -> Dict[str, object]:
  """Reads and checks every split, then publishes the model and the records
  as one set; returns its manifest's {sentencepiece_model, special_ids,
  <split>_file, <split>_examples, <split>_max_tokens}."""
  if not output_dir:
    raise ValueError("--output_dir is required.")
  if not src_lang or src_lang == tgt_lang:
    raise ValueError(f"--src_lang={src_lang!r} and --tgt_lang={tgt_lang!r} "
                     "must be two different non-empty feature names.")
  if sentencepiece_model:
    check_sentencepiece_model(sentencepiece_model, "--sentencepiece_model")
  elif vocab_size < 4:
    raise ValueError(f"--vocab_size={vocab_size} must be >= 4 (3 special "
                     "pieces and one more).")
  splits = {"train": read_pairs(train_files or [])}
  if dev_files:
    splits["dev"] = read_pairs(dev_files)
  model_path = os.path.join(output_dir, MODEL_NAME)
  records = {split: os.path.join(output_dir, f"{split}.tf_record")
             for split in splits}
  with tempfile.TemporaryDirectory() as work:
    sources = {}  # Final path -> the file copied there.
    if not sentencepiece_model:
      train_sentencepiece(splits["train"], os.path.join(work, "sp"),
                          vocab_size, model_type, character_coverage)
      sources = {model_path: os.path.join(work, "sp.model"),
                 os.path.splitext(model_path)[0] + ".vocab": os.path.join(
                     work, "sp.vocab")}
    elif os.path.abspath(sentencepiece_model) != os.path.abspath(model_path):
      sources = {model_path: sentencepiece_model}
    model = sources.get(model_path, model_path)
    result = {"sentencepiece_model": model_path,
              "special_ids": check_sentencepiece_model(model, model_path)}
    processor = spm.SentencePieceProcessor(model_file=model)
    with output_sets.output_set(os.path.join(output_dir, META_DATA),
                                "realformer_tf.data.translation",
                                [*sources, *records.values()]) as outputs:
      for path, source in sources.items():
        tf.io.gfile.copy(source, outputs.stage(path), overwrite=True)
      for split, pairs in splits.items():
        write_records(outputs.stage(records[split]), pairs, src_lang,
                      tgt_lang)
        result.update({f"{split}_file": records[split],
                       f"{split}_examples": len(pairs),
                       f"{split}_max_tokens": max_tokens(processor, pairs)})
      outputs.commit(result)
  return result


def max_tokens(processor: spm.SentencePieceProcessor,
               pairs: Sequence[Pair]) -> Dict[str, int]:
  """The longest source and target in tokens, EOS included: training drops
  pairs longer than `train_data.max_seq_length` (`WMTDataLoader.
  _filter_max_length`) and evaluation cuts them, so set it from these."""
  return {side: 1 + max(len(ids) for ids in processor.EncodeAsIds(
      [pair[i] for pair in pairs])) for i, side in enumerate(("source",
                                                             "target"))}


def define_flags():
  flags.DEFINE_list("train_files", None, "A source<TAB>target TSV, or two "
                    "parallel text files: source,target.")
  flags.DEFINE_list("dev_files", None, "The dev split, as --train_files.")
  flags.DEFINE_string("output_dir", None, "Where the model and records go.")
  flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size.")
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe", "word",
                                              "char"], "SentencePiece model.")
  flags.DEFINE_float("character_coverage", 1.0, "SentencePiece character "
                     "coverage (0.9995 for large character sets).")
  flags.DEFINE_string("src_lang", "src", "Feature name of the source side.")
  flags.DEFINE_string("tgt_lang", "tgt", "Feature name of the target side.")
  flags.DEFINE_string("sentencepiece_model", None, "Use this model (pad 0, "
                      "eos 1) instead of training one.")
  flags.mark_flags_as_required(["train_files", "output_dir"])


main = utils.flags_main(convert)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
