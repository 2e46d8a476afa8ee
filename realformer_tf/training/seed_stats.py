"""Statistics over seeds and the GLUE grid summary, without TensorFlow (the
Keras 3 reproduction uses them where TensorFlow is not installed)."""

import math
from typing import Dict, Optional, Sequence

import numpy as np

from realformer_tf.data import glue_tasks


def median_std(values: Sequence[float]) -> Dict[str, object]:
  """{"median", "std" (NumPy's, ddof=0), "values"} over seeds."""
  values = [float(v) for v in values]
  return {"median": float(np.median(values)), "std": float(np.std(values)),
          "values": values}


def summarize_task(task: str, results: Sequence[Dict],
                   main: Optional[str] = None) -> Dict:
  """{"task", "main_metric", "grid": [point], "best": point, "score"}: each
  point's median/std over seeds, the best by the median of `main` (default:
  the GLUE task's), its mean of medians."""
  groups = {}
  for result in sorted(results, key=lambda r: r["seed"]):
    key = (float(result["epochs"]), float(result["learning_rate"]))
    groups.setdefault(key, []).append(result)
  grid = []
  for (epochs, lr), group in sorted(groups.items()):
    values = {name: [float(r["metrics"][name]) for r in group
                     if name in r["metrics"]]
              for name in sorted(set().union(*(r["metrics"] for r in group)))}
    grid.append({"epochs": epochs, "learning_rate": lr,
                 "num_seeds": len(group), "seeds": [r["seed"] for r in group],
                 "metrics": {name: median_std(v)
                             for name, v in values.items()}})
  if main is None:
    spec = glue_tasks.get_task(task)
    task, main = spec.name, spec.main_metric
    if task == "mnli" and not any(main in p["metrics"] for p in grid):
      main = "accuracy"  # Evaluated on one dev file (no split_names).
  ranked = [p for p in grid if main in p["metrics"]
            and not math.isnan(p["metrics"][main]["median"])]
  if not ranked:
    raise ValueError(f"No {task} result has the main metric {main!r}.")
  # Highest median; ties go to the first point in (epochs, lr) order.
  best = max(ranked, key=lambda p: p["metrics"][main]["median"])
  score = float(np.mean([m["median"] for m in best["metrics"].values()]))
  return {"task": task, "main_metric": main, "grid": grid, "best": best,
          "score": score}


def summarize(by_task: Dict[str, Sequence[Dict]]) -> Dict:
  """Task summaries plus GLUE Overall (mean of the task scores present)."""
  tasks = {t: summarize_task(t, r) for t, r in sorted(by_task.items()) if r}
  overall = (float(np.mean([s["score"] for s in tasks.values()]))
             if tasks else float("nan"))
  return {"tasks": tasks, "overall": overall,
          "overall_tasks": sorted(tasks),
          "complete": sorted(tasks) == sorted(glue_tasks.GLUE_TASKS)}
