"""A synthetic parallel corpus (target = reversed source) for translation tests."""

import os

import numpy as np
import sacrebleu
import sentencepiece as spm
import tensorflow as tf

WORDS = ("red", "blue", "green", "gold", "pink", "gray", "teal", "lime")


def make_corpus(num, seed, min_len=3, max_len=6):
  """(sources, targets): random word sequences and their reversals."""
  rng = np.random.default_rng(seed)
  sources, targets = [], []
  for _ in range(num):
    words = list(rng.choice(WORDS, size=rng.integers(min_len, max_len + 1)))
    sources.append(" ".join(words))
    targets.append(" ".join(reversed(words)))
  return sources, targets


def write_records(path, sources, targets, src_lang="src", tgt_lang="tgt"):
  with tf.io.TFRecordWriter(path) as writer:
    for src, tgt in zip(sources, targets):
      feature = {
          src_lang: tf.train.Feature(
              bytes_list=tf.train.BytesList(value=[src.encode()])),
          tgt_lang: tf.train.Feature(
              bytes_list=tf.train.BytesList(value=[tgt.encode()]))}
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def train_sentencepiece(directory, lines):
  """A word-level sentencepiece model with Model Garden's ids (pad 0, eos 1)."""
  text = os.path.join(directory, "sp_input.txt")
  with open(text, "w") as f:
    f.write("\n".join(lines) + "\n")
  prefix = os.path.join(directory, "sp")
  spm.SentencePieceTrainer.Train(
      input=text, model_prefix=prefix, model_type="word",
      vocab_size=len(WORDS) + 3, hard_vocab_limit=False, bos_id=-1,
      pad_id=0, eos_id=1, unk_id=2, minloglevel=2)
  return prefix + ".model"


def chance_bleu(sources, targets, seed=0):
  """SacreBLEU of a random permutation of each source (right words, random order)."""
  rng = np.random.default_rng(seed)
  guesses = [" ".join(rng.permutation(s.split())) for s in sources]
  return sacrebleu.corpus_bleu(guesses, [targets]).score
