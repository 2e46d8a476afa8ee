r"""Pre-training data throughput: MB of text per second, examples per second.

Writes BERT-Base records (seq 128, 20 predictions) from `--copies` copies of
the quickstart's ~1 MB stdlib corpus with the single-process command and
with the Beam pipeline at each worker count (1: `in_memory`, more:
`multi_processing`), each a fresh process (wall and CPU seconds); then times
Model Garden's `BertPretrainDataLoader` reading the Beam shards (batch 32).
Prints one JSON object.

usage:
  python benchmarks/pretraining_throughput.py --copies=5 --workers=1,2,4
"""

import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from official.nlp.data import pretrain_dataloader
from realformer_tf.data import pretraining_data
from realformer_tf.data import quickstart_corpus
from realformer_tf.data import tokenization
from realformer_tf.data import wordpiece

import timing  # pylint: disable=g-bad-import-order  (benchmarks/)

# The commands timed run this checkout's modules.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parser():
  p = timing.parser(__doc__)
  p.add_argument("--copies", type=int, default=5,
                 help="Corpus files, each the stdlib corpus.")
  p.add_argument("--workers", type=timing.str_list, default="1,2,4",
                 help="Beam worker counts.")
  p.add_argument("--num_shards", type=int, default=8)
  p.add_argument("--batches", type=int, default=300,
                 help="Input-pipeline batches timed.")
  p.add_argument("--work_dir", default="",
                 help="Scratch folder (default: a temp one).")
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


def _row(name, megabytes, wall, cpu):
  return dict(name=name, wall_s=round(wall, 1), cpu_s=round(cpu, 1),
              mb_per_s=round(megabytes / wall, 3),
              hours_for_16gb=round(GB16 / 1e6 / (megabytes / wall) / 3600, 1))


def main():
  args = _parser().parse_args()
  work = args.work_dir or tempfile.mkdtemp(prefix="throughput_")
  os.makedirs(work, exist_ok=True)
  with gzip.open(quickstart_corpus.STDLIB_CORPUS_FILE, "rb") as f:
    text = f.read()
  files = []
  for i in range(args.copies):
    files.append(os.path.join(work, f"corpus{i}.txt"))
    with open(files[-1], "wb") as f:
      f.write(text)
  megabytes = len(text) * len(files) / 1e6
  vocab = os.path.join(work, "vocab.txt")
  start = time.perf_counter()
  tokenization.learn_vocab(wordpiece.count_words(
      line for path in files for line in pretraining_data.read_lines(path)),
      8000, vocab)
  rows = [dict(name="vocabulary learning (not in the rows below)",
               wall_s=round(time.perf_counter() - start, 1))]
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
  if not args.work_dir:
    shutil.rmtree(work)


if __name__ == "__main__":
  main()
