"""What every benchmark here times with: waited and pipelined steps, medians.

Pure Python (no TensorFlow, JAX or torch), so the GPU machine's suites and
the TF tools share it. A waited step includes its wait for the device; a
pipelined run dispatches steps back to back and waits once at the end.
"""

import argparse
import statistics
import time


def waited(step, n):
  """Seconds of each of `n` calls of `step` (which waits for its result)."""
  times = []
  for _ in range(n):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return times


def pipelined(dispatch, wait, n):
  """Seconds per step of `n` calls of `dispatch`, then one call of `wait`."""
  start = time.perf_counter()
  for _ in range(n):
    dispatch()
  wait()
  return (time.perf_counter() - start) / n


def median_ms(times):
  return 1000 * statistics.median(times)


def alternate(items, round_index):
  """`items` in order on even rounds, reversed on odd ones, so that drift
  hits every model of an interleaved comparison alike."""
  items = list(items)
  return items if round_index % 2 == 0 else items[::-1]


def error(e):
  """An exception as a table cell: its type and the start of its message."""
  return f"{type(e).__name__}: {e}"[:300]


def rss_bytes(key):
  """This process's current (VmRSS) or peak (VmHWM) resident memory; VmHWM,
  unlike ru_maxrss, is not inherited across fork + exec."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f"{key} not in /proc/self/status")


def parser(doc):
  """An argparse parser whose description is the module docstring's first
  paragraph and whose epilog is the rest (the tool's usage lines)."""
  first, _, rest = doc.strip().partition("\n\n")
  return argparse.ArgumentParser(
      description=first, epilog=rest or None,
      formatter_class=argparse.RawDescriptionHelpFormatter)


def str_list(text):
  """A comma-separated flag value as a list of its non-empty items."""
  return [s for s in text.split(",") if s]
