"""`run`: `subprocess.run` for long command lines on a slow, shared machine.

A fixed `timeout=` fails a run that is only slow (issue 39: the README walk
hit its 900 s on 2 cores shared with other work). `run` stops a process only
when it has made no progress for `stall_s` (no output on stdout or stderr
and no CPU time used by it or its children: hung, not slow) or when it has
run for `cap_s` (a generous bound on a loop that never ends). Either raises
`subprocess.TimeoutExpired` with the output so far and the reason.
"""

import subprocess
import threading
import time
from typing import Optional, Sequence

import psutil

STALL_S = 600       # no output and no CPU time for this long: hung
CAP_S = 3 * 3600    # at most, progress or not


def _cpu_seconds(process: psutil.Process) -> float:
  """CPU time of `process` and its live children (0 once gone)."""
  total = 0.0
  try:
    for p in [process] + process.children(recursive=True):
      try:
        times = p.cpu_times()
        total += times.user + times.system
      except psutil.Error:
        pass
  except psutil.Error:
    pass
  return total


def run(args: Sequence[str], *, stall_s: float = STALL_S,
        cap_s: float = CAP_S, check: bool = False,
        poll_s: float = 1.0, **popen_kwargs) -> subprocess.CompletedProcess:
  """Runs `args` to completion with stdout and stderr captured (text),
  as `subprocess.run(args, capture_output=True, text=True, ...)`, under the
  watchdog above; `popen_kwargs` go to `subprocess.Popen` (cwd, env)."""
  process = subprocess.Popen(args, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             **popen_kwargs)
  chunks = {"stdout": [], "stderr": []}
  last_output = [time.monotonic()]

  def read(name, stream):
    for line in iter(stream.readline, ""):
      chunks[name].append(line)
      last_output[0] = time.monotonic()
    stream.close()

  readers = [threading.Thread(target=read, args=(n, getattr(process, n)),
                              daemon=True) for n in chunks]
  for reader in readers:
    reader.start()
  watched = psutil.Process(process.pid)
  start = last_progress = time.monotonic()
  cpu = 0.0
  reason: Optional[str] = None
  while process.poll() is None:
    time.sleep(poll_s)
    now, used = time.monotonic(), _cpu_seconds(watched)
    if used > cpu:
      cpu, last_progress = used, now
    last_progress = max(last_progress, last_output[0])
    if now - last_progress > stall_s:
      reason = f"no output and no CPU time for {stall_s:.0f} s"
    elif now - start > cap_s:
      reason = f"still running after {cap_s:.0f} s"
    if reason:
      for p in watched.children(recursive=True) + [watched]:
        try:
          p.kill()
        except psutil.Error:
          pass
      process.wait()
      break
  for reader in readers:
    reader.join()
  stdout, stderr = "".join(chunks["stdout"]), "".join(chunks["stderr"])
  if reason:
    raise subprocess.TimeoutExpired(
        args, cap_s, output=stdout, stderr=f"{stderr}\n[watchdog] {reason}")
  result = subprocess.CompletedProcess(args, process.returncode, stdout,
                                       stderr)
  if check:
    result.check_returncode()
  return result
