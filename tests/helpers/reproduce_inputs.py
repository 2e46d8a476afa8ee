"""A small corpus, GLUE MRPC TSVs, SQuAD v1.1 files and options for the
reproduction's tests."""
import json
import os
import random

from realformer_tf.reproduce import plan as plan_lib

_WORDS = ("the cat sat on a mat while dogs ran far away from home and "
          "birds sang in tall green trees near the old river bank").split()


def write_corpus(path, num_documents=24, seed=0):
  rng = random.Random(seed)
  lines = []
  for _ in range(num_documents):
    for _ in range(6):
      lines.append(" ".join(rng.choice(_WORDS)
                            for _ in range(rng.randint(5, 12))) + " .")
    lines.append("")
  with open(path, "w") as f:
    f.write("\n".join(lines))


def write_mrpc(glue_dir, rows=40, seed=0):
  rng = random.Random(seed)
  os.makedirs(os.path.join(glue_dir, "MRPC"))
  for split in ("train", "dev"):
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i in range(rows):
      a = " ".join(rng.choice(_WORDS) for _ in range(6))
      lines.append(f"{i % 2}\t{i}\t{i}\t{a}\t{a if i % 2 else a[::-1]}")
    with open(os.path.join(glue_dir, "MRPC", f"{split}.tsv"), "w") as f:
      f.write("\n".join(lines) + "\n")


def write_squad(squad_dir, questions=24, seed=0):
  """train-v1.1.json and dev-v1.1.json: a question a paragraph over the
  corpus' words, the answer one to three words of it; every third context
  long enough for several windows at tiny size."""
  rng = random.Random(seed)
  os.makedirs(squad_dir)
  for split, name in plan_lib.SQUAD_FILES:
    paragraphs = []
    for i in range(questions):
      words = [rng.choice(_WORDS) for _ in range(60 if i % 3 == 0 else 20)]
      start = rng.randrange(len(words) - 3)
      answer = " ".join(words[start:start + rng.randint(1, 3)])
      paragraphs.append({"context": " ".join(words) + " .", "qas": [{
          "id": f"{split}{i}", "question": f"where is the {words[start]} ?",
          "answers": [{"text": answer,
                       "answer_start": len(" ".join(words[:start] + [""]))}]}]})
    with open(os.path.join(squad_dir, name), "w") as f:
      json.dump({"version": "1.1", "data": [{"title": split,
                                             "paragraphs": paragraphs}]}, f)


def options(tmp, **kwargs) -> plan_lib.Options:
  """tf_keras face options on a corpus written under `tmp`, 4 steps, MRPC
  from tmp/glue."""
  corpus = os.path.join(tmp, "corpus.txt")
  if not os.path.exists(corpus):
    write_corpus(corpus)
  defaults = dict(output_dir=os.path.join(tmp, "out"), face="tf_keras",
                  corpus=(corpus,),
                  glue_dir=os.path.join(tmp, "glue"), glue_tasks=("mrpc",),
                  train_steps=4)
  defaults.update(kwargs)
  return plan_lib.Options(**defaults)


def tree(root):
  """Every path under `root` with its size and mtime (what a run changes)."""
  return {os.path.join(d, n): (os.path.getsize(os.path.join(d, n)),
                               os.path.getmtime(os.path.join(d, n)))
          for d, _, names in os.walk(root) for n in names}
