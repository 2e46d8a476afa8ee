"""Modules renamed in 0.1 keep their old import paths for one release, with a warning."""
import importlib
import sys

import pytest

# old module -> (new module, a public name both expose)
RENAMED = {
    "realformer_tf.layers.realformer_block":
        ("realformer_tf.layers.encoder_block", "RealFormerEncoderBlock"),
    "realformer_tf.layers.realformer_decoder_block":
        ("realformer_tf.layers.decoder_block", "RealFormerDecoderBlock"),
    "realformer_tf.networks.realformer_encoder":
        ("realformer_tf.networks.encoder", "RealFormerEncoder"),
    "realformer_tf.networks.realformer_decoder":
        ("realformer_tf.networks.decoder", "RealFormerDecoder"),
    "realformer_tf.networks.realformer_seq2seq":
        ("realformer_tf.networks.seq2seq", "RealFormerSeq2SeqEncoder"),
    "realformer_tf.serving.serving_modules":
        ("realformer_tf.serving.heads", "MaskedLMServing"),
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_path_warns_and_gives_the_same_objects(old):
  new, name = RENAMED[old]
  sys.modules.pop(old, None)
  with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {new}"):
    old_module = importlib.import_module(old)
  assert getattr(old_module, name) is getattr(importlib.import_module(new), name)
