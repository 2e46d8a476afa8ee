"""Statistics over seeds, without TensorFlow (the Keras 3 reproduction's
report uses them where TensorFlow is not installed)."""

from typing import Dict, Sequence

import numpy as np


def median_std(values: Sequence[float]) -> Dict[str, object]:
  """{"median", "std" (NumPy's, ddof=0), "values"} over seeds."""
  values = [float(v) for v in values]
  return {"median": float(np.median(values)), "std": float(np.std(values)),
          "values": values}
