"""Tests for the per-path attention analysis of RealFormer encoder-decoders."""

import json
import os
import re

from matplotlib import image as mpimg
import numpy as np
from scipy import stats as scipy_stats
import tensorflow as tf

from realformer_tf.analysis import decoder_paths
from realformer_tf.networks import decoder as decoder_lib
from realformer_tf.networks import seq2seq as seq2seq_lib


def _model():
  return seq2seq_lib.build_seq2seq_transformer(
      vocab_size=20, embedding_width=16,
      encoder=seq2seq_lib.RealFormerSeq2SeqEncoder(
          num_layers=2, num_attention_heads=2, intermediate_size=32),
      decoder=decoder_lib.RealFormerDecoder(
          num_layers=3, num_attention_heads=2, intermediate_size=32),
      eos_id=1)


class DecoderPathsTest(tf.test.TestCase):

  def test_per_path_statistics_and_figures(self):
    model = _model()
    inputs = np.array([[3, 4, 5, 1], [6, 7, 1, 0]], np.int32)
    targets = np.array([[8, 9, 1], [10, 1, 0]], np.int32)
    model({"inputs": inputs, "targets": targets})
    result = decoder_paths.path_statistics(model, inputs, targets)
    self.assertCountEqual(decoder_paths.PATHS, result)
    layers = {"encoder_self": 2, "decoder_self": 3, "cross": 3}
    queries = {"encoder_self": 7, "decoder_self": 5, "cross": 5}
    for path, stat in result.items():
      self.assertLen(stat["entropy"], layers[path])
      self.assertLen(stat["jsd"], layers[path] - 1)
      for heads in stat["entropy"] + stat["jsd"]:
        self.assertLen(heads, 2)
        self.assertTrue(all(len(h) == queries[path] for h in heads))
    # Decoder self-attention is causal: the first query sees one key.
    first = [h[0] for h in result["decoder_self"]["entropy"][0]]
    self.assertAllClose([0.0, 0.0], first, atol=1e-6)
    # Cross-attention entropy equals scipy's on the unpadded source keys.
    probs = decoder_paths._attention(model, inputs, targets)["cross"][0][0]  # pylint: disable=protected-access
    want = scipy_stats.entropy(probs.numpy()[1, 0, 0, :3])
    self.assertAllClose(want, result["cross"]["entropy"][0][0][3], atol=1e-5)
    files = decoder_paths.write_path_figures(result, self.get_temp_dir())
    self.assertEqual(sorted(os.path.basename(f) for f in files), sorted(
        f"{p}_{m}.png" for p in decoder_paths.PATHS for m in ("entropy",
                                                              "jsd")))
    # violin_figure's size at 100 dpi: 7 in wide (two heads), 1.6 in per
    # row (at least two rows) plus the header and footer.
    for name, rows in (("encoder_self_entropy", 2), ("encoder_self_jsd", 1),
                       ("decoder_self_entropy", 3), ("cross_jsd", 2)):
      png = mpimg.imread(os.path.join(self.get_temp_dir(), f"{name}.png"))
      header = 1.15 + 0.22 * (3 if name.endswith("jsd") else 2)
      self.assertEqual(png.shape[:2], (
          round(100 * (header + 1.6 * max(rows, 2) + 0.55)), 700), name)

  def test_figures_are_one_set_that_replaces_only_its_own(self):
    out = os.path.join(self.get_temp_dir(), "figures")
    statistics = {"cross": {"entropy": [[np.array([0.1, 0.5, 0.9])]],
                            "jsd": []}}
    file, = decoder_paths.write_path_figures(statistics, out)
    self.assertEqual(os.path.basename(file), "cross_entropy.png")
    decoder_paths.write_path_figures(statistics, out)  # Ours: replaced.
    manifest = os.path.join(out, decoder_paths.MANIFEST)
    with open(manifest) as f:
      self.assertEqual(list(json.load(f)["files"]), ["cross_entropy.png"])
    os.remove(manifest)  # The figure is nobody's we know now.
    with open(file, "rb") as f:
      before = f.read()
    with self.assertRaisesRegex(FileExistsError, re.escape(
        f"{file} exists and no manifest of realformer_tf lists it")):
      decoder_paths.write_path_figures(statistics, out)
    with open(file, "rb") as f:
      self.assertEqual(f.read(), before)
    self.assertEqual(os.listdir(out), ["cross_entropy.png"])


if __name__ == "__main__":
  tf.test.main()
