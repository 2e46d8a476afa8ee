"""Quiets TensorFlow's start-up notices on a machine without a GPU driver
(`TF_CPP_MIN_LOG_LEVEL=1` unless set). No TensorFlow import here.
"""

import os
from typing import MutableMapping

# What the NVIDIA kernel driver shows when it is loaded.
NVIDIA_DRIVER = "/proc/driver/nvidia/version"


def quiet(environ: MutableMapping[str, str] = os.environ,
          driver: str = NVIDIA_DRIVER) -> bool:
  """Sets TF_CPP_MIN_LOG_LEVEL=1 (not 3: real errors stay) without an NVIDIA
  `driver` if unset; returns whether it set it."""
  if os.path.exists(driver) or "TF_CPP_MIN_LOG_LEVEL" in environ:
    return False
  environ["TF_CPP_MIN_LOG_LEVEL"] = "1"
  return True
