"""Test-wide setup: quiet TF logs, deterministic CPU runs, shared data path."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
