"""`benchmarks/timing.py`: waited and pipelined seconds, on a scripted clock."""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import timing  # pylint: disable=g-import-not-at-top,wrong-import-position


class _Clock:

  def __init__(self, readings):
    self.readings = list(readings)

  def perf_counter(self):
    return self.readings.pop(0)


def test_waited_is_each_calls_seconds(monkeypatch):
  clock = _Clock([0, 2, 10, 15])
  monkeypatch.setattr(timing, "time", clock)
  calls = []
  assert timing.waited(lambda: calls.append(1), 2) == [2, 5]
  assert calls == [1, 1] and not clock.readings


def test_pipelined_waits_once_after_all_dispatches(monkeypatch):
  monkeypatch.setattr(timing, "time", _Clock([1, 9]))
  events = []
  per_step = timing.pipelined(lambda: events.append("d"),
                              lambda: events.append("w"), 4)
  assert per_step == 2 and events == ["d", "d", "d", "d", "w"]


def test_alternate_median_and_error():
  assert timing.alternate("ab", 0) == ["a", "b"]
  assert timing.alternate("ab", 3) == ["b", "a"]
  assert timing.median_ms([0.001, 0.003, 0.002]) == 2.0
  assert timing.error(ValueError("x" * 400)) == ("ValueError: " + "x" * 400)[:300]


def test_parser_keeps_the_usage_lines_and_lists():
  p = timing.parser("One line.\n\nusage:\n  python x.py --a=1,2\n")
  p.add_argument("--a", type=timing.str_list, default="3")
  assert p.description == "One line."
  assert "python x.py --a=1,2" in p.format_help()
  assert p.parse_args(["--a=1,2,"]).a == ["1", "2"]
  assert p.parse_args([]).a == ["3"]
