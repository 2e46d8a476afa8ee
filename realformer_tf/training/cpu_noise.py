"""Quiets TensorFlow's start-up notices on a machine without a GPU driver.

A CPU run of train.py began with lines that say nothing about the run
(issue 39): "Could not find cuda drivers on your machine, GPU will not be
used", "This TensorFlow binary is optimized to use available CPU
instructions ...", the oneDNN notice, and at every end of an evaluation
pass "Local rendezvous is aborting with status: OUT_OF_RANGE: End of
sequence". All are INFO lines of TensorFlow's C++ log, so on a machine with
no NVIDIA driver `quiet` sets `TF_CPP_MIN_LOG_LEVEL=1`, which drops INFO
and keeps every warning and error; a value you set is kept.

Not quieted: "failed call to cuInit: ... UNKNOWN ERROR (303)", which
TensorFlow's CUDA plugin logs at ERROR level whenever it finds no driver
(`CUDA_VISIBLE_DEVICES=""` does not avoid it, checked on TF 2.20); only
level 3 hides it, and that would hide real errors too.

No TensorFlow import here: train.py calls `quiet` before TensorFlow loads.
"""

import os
from typing import MutableMapping

# What the NVIDIA kernel driver shows when it is loaded.
NVIDIA_DRIVER = "/proc/driver/nvidia/version"


def quiet(environ: MutableMapping[str, str] = os.environ,
          driver: str = NVIDIA_DRIVER) -> bool:
  """Sets TF_CPP_MIN_LOG_LEVEL=1 when there is no NVIDIA driver (`driver`
  absent) and it is unset; returns whether it set it."""
  if os.path.exists(driver) or "TF_CPP_MIN_LOG_LEVEL" in environ:
    return False
  environ["TF_CPP_MIN_LOG_LEVEL"] = "1"
  return True
