"""The keras3 face's attention analysis on JAX, TensorFlow unimportable: a
backbone with zeroed query and key kernels attends uniformly (entropy ln(n)
per unpadded token, JSD 0, |S| 0); the held-out batches hold no filler."""
import json
import math
import subprocess
import sys

import numpy as np

from tests.helpers import keras3_reproduction
from tests.helpers import no_tensorflow

_SNIPPET = """
import json, sys, types
import keras, numpy as np
from realformer_tf.reproduce import keras3_analysis, keras3_data, keras3_face
from realformer_tf.reproduce import plan as plan_lib
assert keras.config.backend() == "jax" and sys.modules["tensorflow"] is None
size = plan_lib.SIZES["tiny"]
backbone = keras3_face.build_model(size, "realformer", 50, "float32",
                                   0).backbone
for block in backbone.transformer_layers:
  for dense in (block._attention_layer._query_dense,
                block._attention_layer._key_dense):
    for w in dense.weights:
      w.assign(np.zeros(w.shape))
ids = np.full((5, 12), 7, np.int32)
lengths = [12, 3, 7, 1, 12]
for row, n in enumerate(lengths):
  ids[row, n:] = 0
batch = dict(token_ids=ids, segment_ids=np.zeros_like(ids),
             padding_mask=(ids != 0).astype(np.int32))
result = keras3_analysis.attention_stats(backbone, [batch, batch]).to_json()
sequences = keras3_data.Sequences(
    train=np.ones((40, 32), np.int32), eval=np.ones((13, 32), np.int32),
    vocab=["x"] * 50, source="s")
plan = types.SimpleNamespace(size=size, data=dict(sequences=sequences))
rows = [len(b["token_ids"]) for b in keras3_analysis.held_out_batches(plan)]
print(json.dumps(dict(result=result, rows=rows)))
"""


def test_uniform_attention_gives_log_n_and_no_divergence():
  out = subprocess.run(
      [sys.executable, "-c", _SNIPPET], cwd=no_tensorflow.REPO_ROOT,
      env=no_tensorflow.env(keras3_reproduction.jax_env()),
      capture_output=True, text=True, timeout=300, check=False)
  assert out.returncode == 0, out.stderr[-3000:]
  got = json.loads(out.stdout.strip().splitlines()[-1])
  result = got["result"]
  lengths = [12, 3, 7, 1, 12]
  assert result["num_examples"] == 10
  assert result["num_tokens"] == 2 * sum(lengths)
  for layer in result["entropy"]:
    for head in layer["heads"]:
      assert head["count"] == 2 * sum(lengths)
      assert math.isclose(head["max"], math.log(12), rel_tol=1e-6)
      assert abs(head["min"]) < 1e-6  # The one-token example.
      # Per token ln(n): the mean over the tokens of sum(n ln n) / sum(n).
      want = sum(n * math.log(n) for n in lengths) / sum(lengths)
      np.testing.assert_allclose(head["mean"], want, rtol=1e-6)
  assert [l["layer"] for l in result["jsd"]] == [1]
  assert all(h["max"] < 1e-6 for h in result["jsd"][0]["heads"])
  for magnitude in result["score_magnitude"]:
    assert magnitude["max_abs"] == 0.0 and magnitude["mean_abs"] == 0.0
    # Heads x unpadded (query, key) pairs, both batches.
    assert magnitude["count"] == 2 * 2 * sum(n * n for n in lengths)
  # All 13 held-out sequences (tiny analyses up to 16), in batches of the
  # training batch (8), without the evaluation's filler rows.
  assert got["rows"] == [8, 5]
