"""`run_and_exit`: Python's exit status and output, then `os._exit`.

In process, with `os._exit` and the atexit run recorded instead; that a real
train.py ends with its summary is `tests/train_test.py`'s quickstart test.
"""

import signal
import sys

from absl import logging
import pytest

from realformer_tf.training import process_exit
from realformer_tf.training import stop_signals

pytestmark = pytest.mark.usefixtures("no_traceback_flag")


def _stopped_by(signum):
  def body():
    raise stop_signals.Stopped(signum)
  return body


@pytest.mark.parametrize("body, code, stderr", [
    (lambda: None, 0, ""),
    (lambda: sys.exit(3), 3, ""),
    (lambda: sys.exit("bad flag value"), 1, "bad flag value\n"),
    # A refusal (`cli.REFUSALS` by default): its message alone.
    (lambda: int("x"), 1, "invalid literal for int() with base 10: 'x'\n"),
    (lambda: {}["x"], 1, "KeyError: 'x'\n"),  # A crash: its traceback.
    # Reported by train_lib in one line: no traceback, the shell's codes.
    (_stopped_by(signal.SIGTERM), 143, ""),
    (_stopped_by(signal.SIGINT), 130, ""),
])
def test_exit_status_and_output_as_python(monkeypatch, capsys, body, code,
                                          stderr):
  calls = []
  monkeypatch.setattr(sys, "argv", ["train.py"])
  monkeypatch.setattr(process_exit.atexit, "_run_exitfuncs",
                      lambda: calls.append("atexit callbacks"))
  monkeypatch.setattr(process_exit.os, "_exit", calls.append)

  def main(argv):
    assert argv == ["train.py"]
    print("main ran", end="")  # Flushed before the exit.
    body()

  process_exit.run_and_exit(main)
  assert calls == ["atexit callbacks", code]
  out, err = capsys.readouterr()
  assert out == "main ran"
  assert err.endswith(stderr)
  assert err.startswith("Traceback") == stderr.startswith("KeyError"), err


@pytest.mark.parametrize("show_traceback", [False, True])
def test_a_refusal_is_its_message_alone_unless_asked(monkeypatch, capsys,
                                                     show_traceback):
  """Issue 38 item 12: every train.py refusal was the last line of a
  ~25-line traceback. A refusal type prints its message alone (the last
  line), exit status 1 (`cli.run`); the traceback only with --traceback; a
  crash still has its traceback."""
  calls = []
  monkeypatch.setattr(sys, "argv",
                      ["train.py"] + ["--traceback"] * show_traceback)
  monkeypatch.setattr(process_exit.atexit, "_run_exitfuncs", lambda: None)
  monkeypatch.setattr(process_exit.os, "_exit", calls.append)

  class Busy(RuntimeError):  # As train_lib.REFUSALS' own types.
    pass

  def refused(argv):
    del argv
    raise Busy("--model_dir='d': no way. Use a new --model_dir.")

  process_exit.run_and_exit(refused, (Busy,))
  err = capsys.readouterr().err
  assert calls == [1]
  assert err.endswith("\n--model_dir='d': no way. Use a new --model_dir.\n"
                      if show_traceback else
                      "--model_dir='d': no way. Use a new --model_dir.\n")
  assert err.startswith("Traceback") == show_traceback, err

  def crashed(argv):
    del argv
    raise KeyError("bug")

  process_exit.run_and_exit(crashed, (Busy,))
  assert calls == [1, 1]
  assert capsys.readouterr().err.startswith("Traceback")


@pytest.mark.parametrize("verbosity, said", [
    (logging.INFO, ["main ran", "could not join the save thread"]),
    # --v=1: every log, as asked.
    (logging.DEBUG, ["main ran", "Joining the async save thread.",
                     "could not join the save thread"]),
])
def test_the_atexit_callbacks_info_logs_do_not_follow_the_last_line(
    monkeypatch, caplog, verbosity, said):
  """TensorFlow's async checkpointer logged "Joining the async save thread."
  after a worker's one-line "lost a worker ..."; a warning still prints."""
  monkeypatch.setattr(sys, "argv", ["train.py"])
  monkeypatch.setattr(process_exit.os, "_exit", lambda code: None)

  def teardown():
    logging.info("Joining the async save thread.")
    logging.warning("could not join the save thread")

  monkeypatch.setattr(process_exit.atexit, "_run_exitfuncs", teardown)
  before = logging.get_verbosity()
  try:
    logging.set_verbosity(verbosity)
    process_exit.run_and_exit(lambda argv: logging.info("main ran"))
  finally:
    logging.set_verbosity(before)
  assert [r.getMessage() for r in caplog.records] == said
