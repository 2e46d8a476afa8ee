"""Isolation for the Keras 3 tests: each starts from Keras' default global
dtype policy and a fixed seed, whatever an earlier test left behind."""

import keras
import pytest


@pytest.fixture(autouse=True)
def keras_defaults():
  policy = keras.config.dtype_policy()
  keras.utils.set_random_seed(0)
  yield
  keras.config.set_dtype_policy(policy)
