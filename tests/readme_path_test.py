"""The README's "Fine-tuning and serving, from the quickstart" commands, run as written.

The shell blocks are read from README.md, so the test follows the README:
command 1 of "Two commands" runs first (the block starts from its run and
must not pre-train again), then the block. The only changes are tiny sizes
(a small quickstart model on a generated corpus, a few steps per run), the
outputs under tmp_path instead of /tmp, and $HOME: the data the README asks
the user to bring (MRPC TSVs, SQuAD JSONs) is written, handmade, where the
block reads it.
"""
import json
import os
import random
import re

import yaml

from official.core import exp_factory
from realformer_tf.configs import experiments
from tests.helpers import train_runs as utils
from tests.helpers import watchdog

README = os.path.join(utils.REPO_ROOT, "README.md")
SECTION = "## Fine-tuning and serving, from the quickstart"
COMMAND_ONE = "pip install -e . && "

# The quickstart at test size; the sequence length and positions stay the
# real config's, which the README's block relies on.
_REAL_QUICKSTART = exp_factory.get_exp_config(experiments.QUICKSTART)
SEQ_LENGTH = _REAL_QUICKSTART.task.train_data.seq_length
MAX_POSITIONS = _REAL_QUICKSTART.task.model.encoder.any.max_position_embeddings
QUICKSTART_YAML = {
    "task": {
        "model": {"encoder": {"type": "any", "any": {
            "hidden_size": 32, "num_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": MAX_POSITIONS}}},
        "train_data": {"seq_length": SEQ_LENGTH, "max_predictions_per_seq": 5,
                       "global_batch_size": 8},
        "validation_data": {"seq_length": SEQ_LENGTH,
                            "max_predictions_per_seq": 5,
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


def _readme():
  with open(README, encoding="utf-8") as f:
    return f.read()


def _sh_block(text, after):
  """The first sh block after `after`, continuation lines joined."""
  start = text.index(after)
  block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
  return [c.strip() for c in block.replace("\\\n", " ").splitlines()
          if c.strip()]


def readme_commands():
  """The commands of the README section's sh block."""
  return _sh_block(_readme(), SECTION)


def command_one():
  """Command 1 of "Two commands" without its install: the quickstart run."""
  line, = [c for c in _sh_block(_readme(), "## Two commands")
           if c.startswith(COMMAND_ONE)]
  return line[len(COMMAND_ONE):]


def _model_dir(command):
  return re.search(r"--model_dir=(\S+)", command).group(1)


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


def _adapt(command, tmp):
  """Test sizes and paths for one README command."""
  command = command.replace("/tmp/", f"{tmp}/")
  command = command.replace('--params_override="',
                            f'--params_override="{FINETUNE_OVERRIDES}')
  return command.replace("trainer.train_steps=2000", "trainer.train_steps=4")


def test_readme_block_starts_from_command_one_and_its_sizes():
  """Fails when the block and command 1 or the quickstart config disagree."""
  first, commands = command_one(), readme_commands()
  assert "--experiment=realformer/quickstart" in first, first
  assert not [c for c in commands if "realformer/quickstart" in c], (
      "the block pre-trains again", commands)
  pre = re.match(r"PRE=(\S+?);", commands[0])
  assert pre and pre.group(1) == _model_dir(first), (commands[0], first)
  text = _readme()
  prose = text[text.index(SECTION):text.index("```sh", text.index(SECTION))]
  prose = " ".join(prose.split())
  assert f"`{_model_dir(first)}`" in prose, prose
  assert f"sequences of {SEQ_LENGTH} tokens" in prose, prose
  assert f"{MAX_POSITIONS} position embeddings" in prose, prose
  lengths = [int(n) for c in commands
             for n in re.findall(r"seq_length=(\d+)", c)]
  assert lengths and max(lengths) <= MAX_POSITIONS, lengths
  # The prose's numbers "repeat to the digit": every fine-tuning run is seeded.
  trains = [c for c in commands if c.startswith("python train.py")]
  assert len(trains) == 2 and all(
      re.search(r"task\.train_data\.seed=\d+", c) for c in trains), trains
  assert "`task.train_data.seed`" in " ".join(text.split()), SECTION
  # Each fine-tuned model is exported and served.
  for run in ("rf_mrpc", "rf_squad"):
    export = [c for c in commands if "serving.export" in c and run in c]
    assert len(export) == 1, (run, commands)
    export_dir = re.search(r"--export_dir=(\S+)", export[0]).group(1)
    assert [c for c in commands if f"saved_model_cli run --dir {export_dir}"
            in c], (run, commands)


def test_readme_quickstart_to_served_model(tmp_path):
  tmp = str(tmp_path)
  commands = readme_commands()
  assert [c.split()[0] for c in commands].count("python") == 8, commands
  quickstart_yaml = utils.write_yaml(os.path.join(tmp, "q.yaml"),
                                     QUICKSTART_YAML)
  corpus = _corpus(os.path.join(tmp, "corpus.txt"))
  # What the README asks the user to bring, where its block reads it.
  home = os.path.join(tmp, "home")
  _mrpc(os.path.join(home, "data", "glue"))
  os.makedirs(os.path.join(home, "data", "squad"))
  for name in ("train", "dev"):
    _squad(os.path.join(home, "data", "squad", f"{name}-v1.1.json"))

  first = (_adapt(command_one(), tmp) + f" --config_file={quickstart_yaml}"
           f" --quickstart_input_files={corpus}")
  script = "set -euo pipefail\n" + "\n".join(
      [first] + [_adapt(c, tmp) for c in commands])
  assert "/tmp/" not in script.replace(tmp, "")
  env = dict(utils.subprocess_env(), HOME=home)
  env.pop("DATA", None)    # the block's default, $HOME/data, is what we wrote
  # No fixed timeout (900 s was hit on 2 loaded cores, issue 39): stopped
  # only when hung (watchdog: no output, no CPU time).
  proc = watchdog.run(["bash", "-c", script], cwd=utils.REPO_ROOT, env=env)
  assert proc.returncode == 0, (script, proc.stdout[-3000:],
                                proc.stderr[-5000:])

  # The fine-tuned runs inherited the quickstart's encoder and vocabulary.
  with open(os.path.join(tmp, "realformer_quickstart", "params.yaml")) as f:
    pre = yaml.safe_load(f)["task"]["model"]["encoder"]["any"]
  for run in ("rf_mrpc", "rf_squad"):
    with open(os.path.join(tmp, run, "params.yaml")) as f:
      task = yaml.safe_load(f)["task"]
    for key in ("vocab_size", "hidden_size", "num_layers"):
      assert task["model"]["encoder"]["any"][key] == pre[key], (run, key)
    assert task["train_data"]["seed"] == 1, run
    assert os.path.exists(os.path.join(tmp, run, "final_eval.json")), run
  with open(os.path.join(tmp, "rf_mrpc", "final_eval.json")) as f:
    mrpc = json.load(f)
  assert 0.0 <= mrpc["metrics"]["accuracy"] <= 1.0, mrpc
  # The served MRPC model classified the README's pair: one class id, 0 or 1,
  # and two probabilities.
  class_ids = re.findall(r"output key class_ids:\s*\[(\S+)\]", proc.stdout)
  assert class_ids and class_ids[0] in ("0", "1"), proc.stdout[-3000:]
  # NumPy pads columns to one width: "[[0.49999997 0.5       ]]".
  served_mrpc = proc.stdout[proc.stdout.find("output key class_ids"):][:600]
  assert re.search(r"output key probabilities:\s*\[\[\s*\S+\s+\S+\s*\]\]",
                   proc.stdout), served_mrpc
  # The served SQuAD model answered the README's question with a span of the
  # context it was served (the README's, not the training CONTEXT; a tiny
  # model's span need not be right).
  served = re.search(r'context=\["(.*?)"\]', script)
  assert served, script
  answer = re.search(r"answer_text.*?\[b'(.*?)'\]", proc.stdout, re.S)
  assert answer, proc.stdout[-3000:]
  assert answer.group(1).lower() in served.group(1).lower(), answer.group(1)
