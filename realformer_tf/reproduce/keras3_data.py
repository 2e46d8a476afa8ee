"""The Keras 3 face's data, in pure Python and NumPy: the corpus split and
tokenized as the quickstart does, packed once into one file written whole;
then each step's masked batch as a function of (seed, step), the same in every
architecture and process, so a resumed run sees an uninterrupted one's."""

import dataclasses
import hashlib
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from realformer_tf.core import ownership
from realformer_tf.core import writes
from realformer_tf.data import corpus_text
from realformer_tf.data import wordpiece
from realformer_tf.reproduce import plan as plan_lib

SEQUENCES_FILE = "sequences.npz"
VOCAB_FILE = "vocab.txt"
MANIFEST_FILE = "data.json"  # Lists the two: one output set of ours.
EVAL_FRACTION = 0.05  # The quickstart's.
MASK_RATE = 0.15
# Bump when the way the sequences are made changes, so old ones are rebuilt.
_FORMAT_VERSION = 1
_PAD, _CLS, _SEP, _MASK = (wordpiece.RESERVED_TOKENS.index(t) for t in (
    wordpiece.PAD, wordpiece.CLS, wordpiece.SEP, wordpiece.MASK))


@dataclasses.dataclass
class Sequences:
  """Packed token ids, `[num, seq_length]` int32, 0-padded; the vocabulary."""
  train: np.ndarray
  eval: np.ndarray
  vocab: List[str]
  source: str

  @property
  def vocab_size(self) -> int:
    return len(self.vocab)


def _key(corpus: Sequence[str], vocab_size: int, seq_length: int,
         seed: int) -> Dict:
  """What the sequences depend on: the inputs' bytes, the arguments."""
  files = list(corpus) or [corpus_text.STDLIB_CORPUS_FILE]
  digests = []
  for path in files:
    with open(path, "rb") as f:
      digests.append(hashlib.sha256(f.read()).hexdigest())
  return dict(format_version=_FORMAT_VERSION, corpus=[
      dict(path=os.path.abspath(p), sha256=d) for p, d in zip(files, digests)],
              stdlib=not corpus, vocab_size=vocab_size,
              seq_length=seq_length, eval_fraction=EVAL_FRACTION, seed=seed)


def pack(documents: Sequence[List[str]], tokenizer: wordpiece.WordPieceTokenizer,
         seq_length: int) -> np.ndarray:
  """Each document's ids, cut into `seq_length - 2` pieces, as
  `[CLS] piece [SEP]` rows padded with 0."""
  rows = []
  width = seq_length - 2
  for document in documents:
    ids = [i for sentence in document for i in tokenizer(sentence)]
    for start in range(0, len(ids), width):
      rows.append([_CLS] + ids[start:start + width] + [_SEP])
  packed = np.zeros((len(rows), seq_length), np.int32)
  for r, row in enumerate(rows):
    packed[r, :len(row)] = row
  return packed


def _load(path: str, key: Dict) -> Optional[Sequences]:
  """The sequences in `path` if built for `key`, else None; a ValueError if
  `path` is no sequences file of ours."""
  if not os.path.exists(path):
    return None
  try:
    with np.load(path) as npz:
      stored = json.loads(bytes(npz["key"]).decode("utf-8"))
      if stored != key:
        return None
      return Sequences(train=npz["train"], eval=npz["eval"],
                       vocab=json.loads(bytes(npz["vocab"]).decode("utf-8")),
                       source=str(json.loads(bytes(npz["source"]))))
  except (OSError, ValueError, KeyError) as e:
    raise ValueError(f"{path} is not a sequences file of this command "
                     f"({type(e).__name__}: {e}); move it away.") from e


def _bytes(value) -> np.ndarray:
  return np.frombuffer(json.dumps(value).encode("utf-8"), np.uint8)


def _paths(data_dir: str) -> List[str]:
  return [os.path.join(data_dir, name) for name in (VOCAB_FILE,
                                                    SEQUENCES_FILE)]


def check(data_dir: str) -> None:
  """Refuses (before anything is written) a vocabulary or sequences file in
  `data_dir` that no manifest of ours lists (`ownership.check_ours`)."""
  ownership.check_ours(_paths(data_dir),
                       os.path.join(data_dir, MANIFEST_FILE), writes.OS_OPS)


def prepare(data_dir: str, corpus: Sequence[str], vocab_size: int,
            seq_length: int, seed: int = 0) -> Sequences:
  """Builds (or reuses) the vocabulary and packed sequences in `data_dir`
  from `corpus`, BERT-format files (empty: the stdlib corpus), its documents
  split by `seed`; `seq_length` counts [CLS] and [SEP]."""
  key = _key(corpus, vocab_size, seq_length, seed)
  vocab_path, path = _paths(data_dir)
  writes.sweep(data_dir, writes.OS_OPS)  # Before the cache: a killed run.
  cached = _load(path, key)
  if cached is not None:
    print(f"Data: {path} is up to date.", flush=True)
    return cached
  documents = ([d for p in corpus for d in corpus_text.text_documents(p)]
               if corpus else corpus_text.stdlib_documents())
  source = ", ".join(corpus) or "the quickstart's stdlib corpus"
  train_docs, eval_docs = corpus_text.split_documents(documents,
                                                      EVAL_FRACTION, seed)
  print(f"Data: {source}, {len(documents)} documents ({len(eval_docs)} held "
        f"out); learning a WordPiece vocabulary of up to {vocab_size} "
        "tokens.", flush=True)
  vocab = wordpiece.learn_vocab(
      wordpiece.count_words(s for d in train_docs for s in d), vocab_size,
      upper_thresh=wordpiece.QUICKSTART_UPPER_THRESH)
  tokenizer = wordpiece.WordPieceTokenizer(vocab)
  sequences = Sequences(train=pack(train_docs, tokenizer, seq_length),
                        eval=pack(eval_docs, tokenizer, seq_length),
                        vocab=vocab, source=source)
  for split in ("train", "eval"):
    if not len(getattr(sequences, split)):
      raise ValueError(f"{source}: no {split} text after the split.")
  with writes.output_set(os.path.join(data_dir, MANIFEST_FILE),
                         plan_lib.WRITER, writes.OS_OPS, writes.size_of,
                         _paths(data_dir)) as outputs:
    writes.OS_OPS.write(outputs.stage(vocab_path),
                        "".join(token + "\n" for token in vocab))
    with open(outputs.stage(path), "wb") as f:
      np.savez(f, train=sequences.train, eval=sequences.eval,
               vocab=_bytes(vocab), source=_bytes(source), key=_bytes(key))
    outputs.commit({})
  print(f"Data: {len(vocab)} WordPiece tokens, {len(sequences.train)} train "
        f"and {len(sequences.eval)} held-out sequences of {seq_length} in "
        f"{path}.", flush=True)
  return sequences


def mask(ids: np.ndarray, rng: np.random.Generator, vocab_size: int,
         max_predictions: int) -> Dict[str, np.ndarray]:
  """BERT's masking of `ids` [batch, seq] (create_pretraining_data.py's
  `create_masked_lm_predictions`, vectorised): per row, round(15%) of its
  tokens ([CLS] and [SEP] counted, at least 1, at most `max_predictions`),
  drawn among those that are not [PAD], [CLS] or [SEP]; each becomes [MASK]
  (80%), a random non-special token (10%) or stays (10%). Mask positions
  ascend, 0-padded; mask_weights is 1.0 at a real one."""
  batch, seq = ids.shape
  lengths = (ids != _PAD).sum(axis=1)
  candidate = (ids != _PAD) & (ids != _CLS) & (ids != _SEP)
  count = np.minimum(np.minimum(max_predictions, candidate.sum(axis=1)),
                     np.maximum(1, np.round(lengths * MASK_RATE))).astype(int)
  keys = np.where(candidate, rng.random((batch, seq)), 2.0)
  chosen = np.arange(max_predictions) < count[:, None]
  picked = np.argsort(keys, axis=1, kind="stable")[:, :max_predictions]
  positions = np.sort(np.where(chosen, picked, seq), axis=1)
  chosen = positions < seq
  positions = np.where(chosen, positions, 0)
  rows = np.arange(batch)[:, None]
  targets = np.where(chosen, ids[rows, positions], 0)
  draw = rng.random((batch, max_predictions))
  replacement = np.where(
      draw < 0.8, _MASK, np.where(draw < 0.9, targets, rng.integers(
          len(wordpiece.RESERVED_TOKENS), vocab_size,
          (batch, max_predictions))))
  token_ids = ids.copy()
  token_ids[np.broadcast_to(rows, positions.shape)[chosen],
            positions[chosen]] = replacement[chosen]
  return dict(token_ids=token_ids, segment_ids=np.zeros_like(ids),
              padding_mask=(ids != _PAD).astype(np.int32),
              mask_positions=positions.astype(np.int32),
              mask_ids=targets.astype(np.int32),
              mask_weights=chosen.astype(np.float32))


class Batches:
  """Every step's masked batch, the same in every process; `seed` seeds the
  epoch orders and masks."""

  def __init__(self, sequences: Sequences, batch_size: int,
               max_predictions: int, seed: int):
    if len(sequences.train) < batch_size:
      raise ValueError(
          f"{sequences.source}: {len(sequences.train)} train sequences, "
          f"fewer than one batch of {batch_size}; give more text (--corpus).")
    self.sequences, self.batch_size = sequences, batch_size
    self.max_predictions, self.seed = max_predictions, seed
    self.steps_per_epoch = len(sequences.train) // batch_size
    self._order = (None, None)  # (epoch, permutation)

  def train_batch(self, step: int) -> Dict[str, np.ndarray]:
    """The batch of step `step` (0-based): epoch `step // steps_per_epoch`
    in its own seeded order (the remainder dropped), masks seeded by step."""
    epoch, index = divmod(step, self.steps_per_epoch)
    if self._order[0] != epoch:
      self._order = (epoch, np.random.default_rng(
          [self.seed, 0, epoch]).permutation(len(self.sequences.train)))
    rows = self._order[1][index * self.batch_size:
                          (index + 1) * self.batch_size]
    return mask(self.sequences.train[rows],
                np.random.default_rng([self.seed, 1, step]),
                self.sequences.vocab_size, self.max_predictions)

  def train_batches(self, start: int, count: int) -> Dict[str, np.ndarray]:
    """Steps `start`..`start + count - 1`, stacked: [count, batch, ...]."""
    batches = [self.train_batch(s) for s in range(start, start + count)]
    return {k: np.stack([b[k] for b in batches]) for k in batches[0]}

  def eval_batches(self, max_sequences: int) -> List[Dict[str, np.ndarray]]:
    """The held-out set (at most `max_sequences`), masked once, in batches;
    the last one filled up with weight-0 copies of its first row."""
    ids = self.sequences.eval[:max_sequences]
    masked = mask(ids, np.random.default_rng([self.seed, 2]),
                  self.sequences.vocab_size, self.max_predictions)
    batches = []
    for start in range(0, len(ids), self.batch_size):
      batch = {k: v[start:start + self.batch_size] for k, v in masked.items()}
      short = self.batch_size - len(batch["token_ids"])
      if short:
        batch = {k: np.concatenate([v, np.repeat(v[:1], short, axis=0)])
                 for k, v in batch.items()}
        batch["mask_weights"][-short:] = 0.0
      batches.append(batch)
    return batches


def passes(plan: plan_lib.Plan, sequences: Sequences) -> float:
  """How many times each training sequence was seen, on average."""
  return plan.train_steps * plan.size.batch_size / max(len(sequences.train), 1)


def passes_line(plan: plan_lib.Plan, sequences: Sequences) -> str:
  """What the number of passes over the corpus makes of the numbers."""
  n = passes(plan, sequences)
  if n < 0.95:  # "seen about 0.0 times" says nothing
    return (f"Data passes: {plan.train_steps * plan.size.batch_size} "
            f"sequences of the {len(sequences.train)} training sequences, "
            f"{100 * n:.1f}% of one pass.")
  line = (f"Data passes: each of the {len(sequences.train)} training "
          f"sequences was seen about {n:.1f} times (new masks each time).")
  if n > 2:
    line += (" A corpus this small is memorized: training accuracy climbs "
             "past held-out accuracy, so the held-out numbers compare how "
             "each architecture generalizes from a small corpus, not the "
             "paper's one-pass pre-training regime.")
  return line


def digest(previous: str, batch: Dict[str, np.ndarray]) -> str:
  """A running SHA-256 of the batches seen: previous digest, then the
  batch's arrays in name order (equal digests: the same batches)."""
  h = hashlib.sha256(previous.encode("ascii"))
  for name in sorted(batch):
    h.update(np.ascontiguousarray(batch[name]).tobytes())
  return h.hexdigest()
