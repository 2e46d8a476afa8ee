"""`realformer_tf.cli`: how every command ends.

Issue 38 item 12: a refusal was the last line of a ~25-line traceback
through absl's app.py. `cli.run` prints it alone, the last line, exit status
1; --traceback adds the traceback; anything else stays a crash. In process
(`cli.run` and what it raises), in a bare Python (the exit status and the
whole of stderr) and on real commands, each refused before it writes.
"""

import os
import sys
import textwrap

from absl import app
from absl import flags
import pytest

from realformer_tf import cli
from tests.helpers import reproduce_inputs
from tests.helpers import train_runs
from tests.helpers import watchdog

MESSAGE = "--output_dir='o': no way. Pass a new --output_dir."

pytestmark = pytest.mark.usefixtures("no_traceback_flag")


def _raises(error):
  def main(argv):
    del argv
    raise error
  return main


def _run(monkeypatch, main, *args, **kwargs):
  """`cli.run(main)` on the command line `args`: its exit code."""
  monkeypatch.setattr(sys, "argv", ["prog", *args])
  with pytest.raises(SystemExit) as ended:
    cli.run(main, **kwargs)
  return ended.value.code


@pytest.mark.parametrize("error", [
    ValueError(MESSAGE), FileNotFoundError(MESSAGE), FileExistsError(MESSAGE),
    NotADirectoryError(MESSAGE), IsADirectoryError(MESSAGE)])
def test_a_refusal_is_its_message_alone(monkeypatch, capsys, error):
  assert _run(monkeypatch, _raises(error)) == 1
  out, err = capsys.readouterr()
  assert (out, err) == ("", MESSAGE + "\n")


def test_an_os_error_names_its_path(monkeypatch, capsys, tmp_path):
  def main(argv):
    del argv
    with open(tmp_path / "missing.txt", encoding="utf-8"):
      pass

  assert _run(monkeypatch, main) == 1
  assert capsys.readouterr().err == (
      f"[Errno 2] No such file or directory: '{tmp_path / 'missing.txt'}'\n")


def test_a_message_less_refusal_prints_its_type(monkeypatch, capsys):
  assert _run(monkeypatch, _raises(ValueError())) == 1
  assert capsys.readouterr().err == "ValueError\n"


def test_traceback_flag_adds_where_it_was_raised(monkeypatch, capsys):
  assert _run(monkeypatch, _raises(ValueError(MESSAGE)), "--traceback") == 1
  err = capsys.readouterr().err
  assert err.startswith("Traceback (most recent call last):\n"), err
  assert "in main\n    raise error\n" in err
  assert err.endswith(f"\nValueError: {MESSAGE}\n{MESSAGE}\n"), err


def test_refusals_are_the_callers_types(monkeypatch, capsys):
  """train.py adds its own (`train_lib.REFUSALS`); `()` refuses nothing."""
  class Busy(RuntimeError):
    pass

  assert _run(monkeypatch, _raises(Busy(MESSAGE)),
              refusals=cli.REFUSALS + (Busy,)) == 1
  assert capsys.readouterr().err == MESSAGE + "\n"
  monkeypatch.setattr(sys, "argv", ["prog"])
  with pytest.raises(ValueError, match="no way"):
    cli.run(_raises(ValueError(MESSAGE)), refusals=())


def test_a_crash_is_raised_as_app_run_raises_it(monkeypatch, capsys):
  """Not a refusal: out of `run` unchanged, for Python to print with its
  traceback (`test_the_process_ends_as_python_ends_it`)."""
  monkeypatch.setattr(sys, "argv", ["prog", "--traceback"])
  with pytest.raises(RuntimeError, match="a bug"):
    cli.run(_raises(RuntimeError("a bug")))
  assert capsys.readouterr().err == ""


@pytest.mark.parametrize("body, code", [
    (lambda: None, None), (lambda: sys.exit(3), 3),
    (lambda: sys.exit("bad flag value"), "bad flag value")])
def test_sys_exit_is_kept(monkeypatch, capsys, body, code):
  assert _run(monkeypatch, lambda argv: body()) == code
  assert capsys.readouterr().err == ""


def test_usage_error_is_absl_s(monkeypatch, capsys):
  """absl prints the usage and the error and exits with its code."""
  assert _run(monkeypatch, _raises(app.UsageError("--x: bad", exitcode=2)),
              "--traceback") == 2
  err = capsys.readouterr().err
  assert err.rstrip("\n").endswith("--x: bad"), err
  assert "Traceback" not in err


def test_run_kwargs_go_to_app_run(monkeypatch, capsys):
  """As beam_pretraining_data's: unknown flags pass to `main`."""
  seen = []

  def main(argv):
    seen.append(argv)
    raise ValueError(MESSAGE)

  assert _run(monkeypatch, main, "--runner=DirectRunner", flags_parser=(
      lambda argv: flags.FLAGS(argv, known_only=True))) == 1
  assert seen == [["prog", "--runner=DirectRunner"]]
  assert capsys.readouterr().err == MESSAGE + "\n"


_PROGRAM = textwrap.dedent("""
    import sys
    from realformer_tf import cli
    ERRORS = {"refusal": ValueError, "crash": RuntimeError}
    def main(argv):
      raise ERRORS[argv[1]]("--output_dir='o': no way.")
    cli.run(main)
""")


@pytest.mark.parametrize("args, last_line, traceback_printed", [
    (["refusal"], "--output_dir='o': no way.", False),
    (["refusal", "--traceback"], "--output_dir='o': no way.", True),
    (["crash"], "RuntimeError: --output_dir='o': no way.", True),
    (["crash", "--traceback"], "RuntimeError: --output_dir='o': no way.",
     True),
])
def test_the_process_ends_as_python_ends_it(args, last_line,
                                            traceback_printed):
  """A refusal: status 1, its message alone (nothing of the `SystemExit`
  raised while handling it); a crash: Python's traceback, status 1."""
  result = watchdog.run([sys.executable, "-c", _PROGRAM, *args],
                        cwd=train_runs.REPO_ROOT,
                        env=train_runs.subprocess_env())
  assert result.returncode == 1
  if traceback_printed:
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert result.stderr.endswith(f"\n{last_line}\n"), result.stderr
  else:
    assert result.stderr == f"{last_line}\n"
  assert "During handling" not in result.stderr


def _cases(root):
  """(module, flags, the refusal's message) of real commands, each refused
  before it writes, on inputs under `root`."""
  root = str(root)
  run_dir = os.path.join(root, "run")
  os.makedirs(run_dir)
  with open(os.path.join(run_dir, "params.yaml"), "w") as f:
    f.write("task: {}\n")
  vocab = train_runs.write_vocab(os.path.join(root, "vocab.txt"))
  reproduce_inputs.write_mrpc(os.path.join(root, "glue"))
  a_file = os.path.join(root, "a_file")
  with open(a_file, "w") as f:
    f.write("not a directory\n")
  missing = os.path.join(root, "missing")
  return {
      "serving.export": (
          [f"--model_dir={missing}", f"--export_dir={run_dir}"],
          f"{missing}/params.yaml not found: is '{missing}' a model_dir "
          "written by train.py?"),
      "checkpoints.convert": (
          [f"--tf1_checkpoint={missing}", f"--bert_config_file={missing}",
           f"--output_dir={run_dir}"],
          f"tf1_checkpoint='{missing}' is not a readable checkpoint: "
          f"{missing}.index does not exist."),
      "data.glue": (
          ["--task=mrpc", f"--vocab_file={vocab}", f"--output_dir={a_file}",
           f"--glue_dir={os.path.join(root, 'glue')}"],
          f"--output_dir='{a_file}' is a file, not a directory: pass the "
          "directory to write mrpc_meta_data.json and its set's files in."),
      # process_exit.run_and_exit's way (SIGTERM/SIGINT: 143/130).
      "training.sweep": (
          [f"--model_dir_root={os.path.join(root, 'runs')}", "--task=mrpc",
           f"--data_dir={missing}"],
          f"{missing}/mrpc_meta_data.json: meta data not found; write it "
          "with `python -m realformer_tf.data.glue`."),
  }


@pytest.mark.parametrize("module", ["serving.export", "checkpoints.convert",
                                    "data.glue", "training.sweep"])
def test_a_command_s_refusal_is_its_message_alone(tmp_path, module):
  args, message = _cases(tmp_path)[module]
  before = reproduce_inputs.tree(str(tmp_path))
  result = watchdog.run(
      [sys.executable, "-m", f"realformer_tf.{module}", *args],
      cwd=train_runs.REPO_ROOT, env=train_runs.subprocess_env())
  assert result.returncode == 1, result.stderr[-3000:]
  assert result.stderr.rstrip("\n").splitlines()[-1] == message, (
      result.stderr[-3000:])
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  assert reproduce_inputs.tree(str(tmp_path)) == before  # Nothing written.
