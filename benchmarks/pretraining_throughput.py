r"""Pre-training data throughput on a large corpus: CPU seconds per MB.

`--write_corpus` writes the corpus first: WikiText-2's articles, then the
docstrings of a site-packages tree (`ast`, nothing imported), `--mb` MB in
`--files` files, the last held out. Timed: counting and learning a vocabulary
(in process; ids checked against tensorflow-text's on held-out lines), records
(seq 128) by the single-process command and by Beam per worker count (fresh
processes), `BertPretrainDataLoader` on the shards. One JSON object.

usage:
  python benchmarks/pretraining_throughput.py --write_corpus --corpus_dir=/tmp/c60
  python benchmarks/pretraining_throughput.py --corpus_dir=/tmp/c60 --workers=1,2
"""

import ast
import glob
import json
import os
import resource
import subprocess
import sys
import sysconfig
import time

import tensorflow as tf

from official.nlp.data import pretrain_dataloader
from realformer_tf.data import corpus_text
from realformer_tf.data import pretraining_data
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

import timing  # pylint: disable=g-bad-import-order  (benchmarks/)

# The commands timed run this checkout's modules.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--corpus_dir", required=True)
  p.add_argument("--write_corpus", action="store_true",
                 help="Write the corpus into --corpus_dir first.")
  p.add_argument("--mb", type=float, default=60.0, help="Corpus size.")
  p.add_argument("--files", type=int, default=17, help="Corpus files.")
  p.add_argument("--site_packages", default=sysconfig.get_paths()["purelib"])
  p.add_argument("--held_out", type=int, default=20000, help="Lines checked.")
  p.add_argument("--workers", type=timing.str_list, default="1",
                 help="Beam worker counts.")
  p.add_argument("--num_shards", type=int, default=8)
  p.add_argument("--batches", type=int, default=300,
                 help="Input-pipeline batches timed.")
  return p

SEQ, PRED, BATCH = 128, 20, 32
GB16 = 16e9


def _timed(command):
  """(wall s, CPU s of the child) of a command run to success."""
  env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2",
             CUDA_VISIBLE_DEVICES="")
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  subprocess.run(command, env=env, check=True, capture_output=True,
                 cwd=REPO_ROOT)
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  return wall, (after.ru_utime - before.ru_utime +
                after.ru_stime - before.ru_stime)


def _documents(site_packages, wikitext):
  """Documents (lists of sentences): WikiText-2's articles, then each
  docstring of each module under `site_packages`, in path order."""
  for path in sorted(glob.glob(os.path.join(wikitext, "*.txt"))):
    with open(path, encoding="utf-8") as f:
      articles = f.read().split("\n = ")[1:]
    for article in articles:
      yield [line.strip() for line in article.splitlines() if line.strip()]
  for path in sorted(glob.glob(os.path.join(site_packages, "**", "*.py"),
                               recursive=True)):
    try:
      with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
      continue
    for node in ast.walk(tree):
      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                           ast.AsyncFunctionDef)):
        lines = [l.strip() for l in (ast.get_docstring(node) or "").split("\n")]
        if any(lines):
          yield [l for l in lines if l]


def write_corpus(corpus_dir, mb, files, site_packages, wikitext):
  """Writes `files` files of about `mb` MB in all; returns their paths."""
  os.makedirs(corpus_dir, exist_ok=True)
  per_file, paths, out = mb * 1e6 / files, [], None
  for document in _documents(site_packages, wikitext):
    if out is None or out.tell() >= per_file:
      if out:
        out.close()
      if len(paths) == files:
        break
      paths.append(os.path.join(corpus_dir, f"part{len(paths):02d}.txt"))
      out = open(paths[-1], "w", encoding="utf-8")
    out.write("\n".join(document) + "\n\n")
  else:
    out.close()
  return paths


def _row(name, megabytes, wall, cpu):
  return dict(name=name, wall_s=round(wall, 1), cpu_s=round(cpu, 1),
              mb_per_s=round(megabytes / wall, 3),
              hours_for_16gb=round(GB16 / 1e6 / (megabytes / wall) / 3600, 1))


def main():
  args = _parser().parse_args()
  work = args.corpus_dir
  if args.write_corpus:
    write_corpus(work, args.mb, args.files, args.site_packages,
                 os.path.join(corpus_text.default_data_dir(), "corpus",
                              "wikitext-2"))
  *files, held_out = sorted(glob.glob(os.path.join(work, "*.txt")))
  megabytes = sum(os.path.getsize(p) for p in files) / 1e6
  vocab = os.path.join(work, "vocab", "vocab.txt")
  if os.path.exists(vocab):  # Ours, from the last call.
    os.remove(vocab)
  os.makedirs(os.path.dirname(vocab), exist_ok=True)
  start, cpu = time.perf_counter(), time.process_time()
  tokens = tokenization.learn_vocab(wordpiece.count_words(
      line for path in files for line in pretraining_data.read_lines(path)),
      8000, vocab)
  rows = [dict(name="counting + vocabulary learning, in this process",
               wall_s=round(time.perf_counter() - start, 1),
               cpu_s=round(time.process_time() - cpu, 1))]
  lines = [l for l in pretraining_data.read_lines(held_out) if l.strip()][
      :args.held_out]
  served = tokenization.make_tokenizer(vocab).tokenize(
      tf.constant(lines)).merge_dims(-2, -1).to_list()
  face = wordpiece.WordPieceTokenizer(tokens)
  rows[0].update(tokens=len(tokens), ids_equal_tensorflow_text=round(
      sum(face(l) == ids for l, ids in zip(lines, served)) / len(lines), 4))
  options = [f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
             f"--vocab_file={vocab}", "--random_seed=1"]
  single = os.path.join(work, "single", "train.tfrecord")
  rows.append(_row("single process", megabytes, *_timed(
      [sys.executable, "-m", "realformer_tf.data.create_pretraining_data",
       "--input_files=" + ",".join(files), f"--output_file={single}"] +
      options)))
  prefix = ""
  for workers in map(int, args.workers):
    prefix = os.path.join(work, f"beam{workers}", "train")
    mode = "in_memory" if workers == 1 else "multi_processing"
    rows.append(_row(f"beam, {workers} worker(s) ({mode})", megabytes,
                     *_timed([
                         sys.executable, "-m",
                         "realformer_tf.data.beam_pretraining_data",
                         "--input_files=" + ",".join(files),
                         f"--output_prefix={prefix}",
                         f"--num_shards={args.num_shards}",
                         f"--direct_num_workers={workers}",
                         f"--direct_running_mode={mode}"] + options)))
  config = pretrain_dataloader.BertPretrainDataConfig(
      input_path=f"{prefix}-*", seq_length=SEQ, max_predictions_per_seq=PRED,
      global_batch_size=BATCH, is_training=True, seed=1)
  iterator = iter(pretrain_dataloader.BertPretrainDataLoader(config).load())
  for _ in range(20):  # Warm-up: fill the shuffle buffer and prefetch.
    next(iterator)
  start = time.perf_counter()
  for _ in range(args.batches):
    next(iterator)
  elapsed = time.perf_counter() - start
  rows.append(dict(name=f"input pipeline (BertPretrainDataLoader, seq {SEQ},"
                   f" batch {BATCH})", examples_per_s=round(
                       args.batches * BATCH / elapsed)))
  print(json.dumps(dict(corpus_mb=round(megabytes, 2), cpus=os.cpu_count(),
                        load_average=os.getloadavg(), rows=rows), indent=1))


if __name__ == "__main__":
  main()
