"""Tests of tests/helpers/watchdog.py: a slow process runs to its end, a hung
one is stopped with the reason, whatever the machine's load."""

import subprocess
import sys

import pytest

from tests.helpers import watchdog


def _python(code):
  return [sys.executable, "-c", code]


def test_slow_but_printing_runs_past_the_stall_window():
  # 4 s of run time, a line a second, 2 s of stall allowed.
  out = watchdog.run(_python(
      "import time\nfor i in range(4):\n  print(i, flush=True)\n"
      "  time.sleep(1)\nimport sys; print('done', file=sys.stderr)"),
                     stall_s=2, poll_s=0.2)
  assert out.returncode == 0
  assert out.stdout.split() == ["0", "1", "2", "3"]
  assert out.stderr.strip() == "done"


def test_silent_but_computing_runs_past_the_stall_window():
  out = watchdog.run(_python(
      "import time\nend = time.time() + 4\nn = 0\n"
      "while time.time() < end: n += 1\nprint('spun')"),
                     stall_s=2, poll_s=0.2)
  assert out.stdout.strip() == "spun"


def test_hung_process_is_stopped_with_its_output_so_far():
  with pytest.raises(subprocess.TimeoutExpired) as caught:
    watchdog.run(_python(
        "import time\nprint('started', flush=True)\ntime.sleep(60)"),
                 stall_s=2, poll_s=0.2)
  assert caught.value.output == "started\n"
  assert "[watchdog] no output and no CPU time for 2 s" in caught.value.stderr


def test_cap_stops_a_process_that_never_ends():
  with pytest.raises(subprocess.TimeoutExpired) as caught:
    watchdog.run(_python(
        "import time\nwhile True:\n  print('.', flush=True)\n"
        "  time.sleep(0.1)"), stall_s=60, cap_s=2, poll_s=0.2)
  assert "[watchdog] still running after 2 s" in caught.value.stderr


def test_check_raises_on_failure():
  with pytest.raises(subprocess.CalledProcessError):
    watchdog.run(_python("raise SystemExit(3)"), check=True)
