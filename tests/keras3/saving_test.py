"""`.keras` files written whole (`save_model`) and damaged ones named for
what they are (`load_model`), on every backend."""

import os

import keras
import numpy as np
import pytest

from realformer_tf.keras3 import saving
from realformer_tf.keras3 import backbone as backbone_lib
from tests.helpers import keras3_encoders as utils


def _model():
  return backbone_lib.RealFormerBackbone(**utils.TINY)


def test_save_then_load_round_trip(tmp_path):
  model = _model()
  path = saving.save_model(model, str(tmp_path / "m.keras"))
  assert os.listdir(tmp_path) == ["m.keras"]
  inputs = utils.backbone_inputs()
  utils.assert_outputs_close(
      utils.to_numpy(saving.load_model(path)(inputs)),
      utils.to_numpy(model(inputs)))


def test_a_failed_save_leaves_the_previous_file(tmp_path, monkeypatch):
  path = saving.save_model(_model(), str(tmp_path / "m.keras"))
  before = open(path, "rb").read()

  def killed(self, filepath, **kwargs):
    with open(filepath, "wb") as f:
      f.write(b"PK\x03\x04half")
    raise KeyboardInterrupt("killed")

  monkeypatch.setattr(keras.Model, "save", killed)
  with pytest.raises(KeyboardInterrupt):
    saving.save_model(_model(), path)
  assert os.listdir(tmp_path) == ["m.keras"]
  assert open(path, "rb").read() == before
  with pytest.raises(ValueError, match="does not end in .keras"):
    saving.save_model(_model(), str(tmp_path / "m.h5"))


def test_a_half_written_file_is_named_for_what_it_is(tmp_path):
  path = saving.save_model(_model(), str(tmp_path / "m.keras"))
  data = open(path, "rb").read()
  half = str(tmp_path / "half.keras")
  with open(half, "wb") as f:
    f.write(data[:len(data) // 2])
  # keras.saving.load_model alone says "File not found".
  with pytest.raises(ValueError, match=rf"half.keras \({len(data) // 2} "
                     r"bytes\) is not a complete \.keras file.*no zip "
                     "directory.*killed part way"):
    saving.load_model(half)
  open(half, "wb").close()
  with pytest.raises(ValueError, match=r"\(0 bytes\).*is empty"):
    saving.load_model(half)
  with pytest.raises(FileNotFoundError, match="gone.keras does not exist"):
    saving.load_model(str(tmp_path / "gone.keras"))
  with pytest.raises(ValueError, match="is a directory"):
    saving.load_model(str(tmp_path))
  flipped = bytearray(data)
  flipped[len(data) // 3] ^= 0xFF  # Inside a member: its CRC fails.
  with open(half, "wb") as f:
    f.write(bytes(flipped))
  with pytest.raises(ValueError, match="damaged .keras archive"):
    saving.load_model(half)
  np.testing.assert_equal(saving.check_keras_file(path), None)
