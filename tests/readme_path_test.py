"""The README's "From the quickstart to a served model" commands, run as written.

The shell block is read from README.md, so the test follows the README: the
only changes are tiny sizes (a small quickstart model on a generated corpus,
a few steps per run) and paths (a handmade MRPC and SQuAD under tmp_path
instead of the real data, the outputs under tmp_path instead of /tmp).
"""
import json
import os
import random
import re
import subprocess

import yaml

from tests import train_test_utils as utils

README = os.path.join(utils.REPO_ROOT, "README.md")
SECTION = "From the quickstart to a served model"

# The quickstart at test size (seq 32 instead of 64); the README's later
# commands inherit this encoder from the run.
QUICKSTART_YAML = {
    "task": {
        "model": {"encoder": {"type": "any", "any": {
            "hidden_size": 32, "num_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "max_position_embeddings": 64}}},
        "train_data": {"seq_length": 32, "max_predictions_per_seq": 5,
                       "global_batch_size": 8},
        "validation_data": {"seq_length": 32, "max_predictions_per_seq": 5,
                            "global_batch_size": 8}},
    "trainer": {
        "train_steps": 4, "steps_per_loop": 2, "summary_interval": 2,
        "checkpoint_interval": 2, "validation_interval": 4,
        "validation_steps": 2,
        "optimizer_config": {
            "learning_rate": {"polynomial": {"decay_steps": 4}},
            "warmup": {"polynomial": {"warmup_steps": 1}}}}}
FINETUNE_OVERRIDES = ("trainer.train_steps=4,trainer.steps_per_loop=2,"
                      "trainer.checkpoint_interval=2,trainer.validation_steps=2,"
                      "task.train_data.global_batch_size=4,"
                      "task.validation_data.global_batch_size=4,")

WORDS = ("the broncos panthers bowl game team won beat city stadium river "
         "north south old new large small people music art war king").split()
CONTEXT = ("Super Bowl 50 was won by the Denver Broncos, who beat the "
           "Carolina Panthers at Levi's Stadium in Santa Clara.")


def readme_commands():
  """The commands of the README section's sh block, continuation lines joined."""
  with open(README, encoding="utf-8") as f:
    text = f.read()
  start = text.index(SECTION)
  block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
  return [c.strip() for c in block.replace("\\\n", " ").splitlines()
          if c.strip()]


def _corpus(path):
  rng = random.Random(0)
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(40):
      for _ in range(4):
        f.write(" ".join(rng.choice(WORDS) for _ in range(10)) + " .\n")
      f.write("\n")
  return path


def _mrpc(glue_dir):
  os.makedirs(os.path.join(glue_dir, "MRPC"))
  rng = random.Random(1)
  for name, rows in (("train.tsv", 16), ("dev.tsv", 8)):
    lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i in range(rows):
      a, b = (" ".join(rng.choice(WORDS) for _ in range(6)) for _ in "ab")
      lines.append(f"{i % 2}\t{i}\t{i + 100}\t{a} .\t{b} .")
    with open(os.path.join(glue_dir, "MRPC", name), "w") as f:
      f.write("\n".join(lines) + "\n")


def _squad(path):
  qas = [{"id": f"q{i}", "question": q,
          "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]}
         for i, (q, a) in enumerate([
             ("Who won Super Bowl 50?", "Denver Broncos"),
             ("Who lost?", "Carolina Panthers"),
             ("Where was it played?", "Levi's Stadium"),
             ("In which city?", "Santa Clara")])]
  with open(path, "w") as f:
    json.dump({"version": "1.1", "data": [{"title": "SB", "paragraphs": [
        {"context": CONTEXT, "qas": qas}]}]}, f)


def _adapt(command, tmp, quickstart_yaml, corpus):
  """Test sizes and paths for one README command."""
  command = command.replace("/tmp/", f"{tmp}/")
  command = command.replace("../shared/data/glue", f"{tmp}/glue")
  command = re.sub(r"(?<![\w/-])(train|dev)-v1\.1\.json", rf"{tmp}/\1-v1.1.json",
                   command)
  command = command.replace("--max_seq_length=64", "--max_seq_length=32")
  command = command.replace("--doc_stride=32", "--doc_stride=16")
  command = re.sub(r"seq_length=64", "seq_length=32", command)
  command = command.replace("doc_stride=32", "doc_stride=16")
  if "realformer/quickstart" in command:
    command += (f" --config_file={quickstart_yaml}"
                f" --quickstart_input_files={corpus}")
  command = command.replace('--params_override="',
                            f'--params_override="{FINETUNE_OVERRIDES}')
  return command.replace("trainer.train_steps=2000", "trainer.train_steps=4")


def test_readme_quickstart_to_served_model(tmp_path):
  tmp = str(tmp_path)
  commands = readme_commands()
  assert [c.split()[0] for c in commands].count("python") >= 7, commands
  quickstart_yaml = utils.write_yaml(os.path.join(tmp, "q.yaml"),
                                     QUICKSTART_YAML)
  corpus = _corpus(os.path.join(tmp, "corpus.txt"))
  _mrpc(os.path.join(tmp, "glue"))
  for name in ("train", "dev"):
    _squad(os.path.join(tmp, f"{name}-v1.1.json"))

  script = "set -euo pipefail\n" + "\n".join(
      _adapt(c, tmp, quickstart_yaml, corpus) for c in commands)
  assert "/tmp/" not in script.replace(tmp, "")
  proc = subprocess.run(["bash", "-c", script], cwd=utils.REPO_ROOT,
                        env=utils.subprocess_env(), capture_output=True,
                        text=True, timeout=900)
  assert proc.returncode == 0, (script, proc.stdout[-3000:],
                                proc.stderr[-5000:])

  # The fine-tuned runs inherited the quickstart's encoder and vocabulary.
  with open(os.path.join(tmp, "rf_quick", "params.yaml")) as f:
    pre = yaml.safe_load(f)["task"]["model"]["encoder"]["any"]
  for run in ("rf_mrpc", "rf_squad"):
    with open(os.path.join(tmp, run, "params.yaml")) as f:
      encoder = yaml.safe_load(f)["task"]["model"]["encoder"]["any"]
    for key in ("vocab_size", "hidden_size", "num_layers"):
      assert encoder[key] == pre[key], (run, key)
    assert os.path.exists(os.path.join(tmp, run, "final_eval.json")), run
  with open(os.path.join(tmp, "rf_mrpc", "final_eval.json")) as f:
    mrpc = json.load(f)
  assert 0.0 <= mrpc["metrics"]["accuracy"] <= 1.0, mrpc
  # The served model answered the README's question with a span of the
  # context it was served (the README's, not the training CONTEXT; a tiny
  # model's span need not be right).
  served = re.search(r'context=\["(.*?)"\]', script)
  assert served, script
  answer = re.search(r"answer_text.*?\[b'(.*?)'\]", proc.stdout, re.S)
  assert answer, proc.stdout[-3000:]
  assert answer.group(1).lower() in served.group(1).lower(), answer.group(1)
