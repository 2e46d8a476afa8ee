"""Median and population std over seeds."""
import numpy as np
import pytest

from realformer_tf.training import seed_stats


def test_median_and_population_std_match_numpy():
  values = [0.31, 0.35, 0.2, 0.4]
  stat = seed_stats.median_std(values)
  assert stat["median"] == pytest.approx(np.median(values))
  assert stat["median"] == pytest.approx(0.33)
  assert stat["std"] == pytest.approx(np.std(values, ddof=0))
  assert stat["std"] != pytest.approx(np.std(values, ddof=1))
  assert stat["values"] == values
