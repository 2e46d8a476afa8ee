"""docs/names.md's tables against both faces' signatures and the Keras 3
face's pointers from Model Garden's names to keras-hub's."""

import inspect
import os
import re

import pytest

from official.nlp.modeling import networks as mg_networks
from realformer_tf.core import arguments
from realformer_tf.keras3 import backbone as k3_backbone
from realformer_tf.keras3 import decoder_backbone as k3_decoder_backbone
from realformer_tf.keras3 import decoder_block as k3_decoder
from realformer_tf.keras3 import encoder_block as k3_encoder
from realformer_tf.layers import decoder_block as tf_decoder
from realformer_tf.layers import encoder_block as tf_encoder
from realformer_tf.networks import encoder as tf_network

_NAMES_MD = os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                         "names.md")


def _names(cell):
  """The backticked names of a cell, outside parentheses (notes, values)."""
  return re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", cell))


def _rows(title):
  """`(tf_keras names, their other names, Keras 3 names, decoder only,
  encoder backbone only)` per row of the table under heading `title`."""
  text = open(_NAMES_MD).read().split(f"## {title}")[1].split("\n## ")[0]
  rows = []
  for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("| ") or cells[0].startswith("tf_keras"):
      continue
    first, last = cells[0], cells[-1]
    aliases = _names(cells[1]) if len(cells) == 3 else re.findall(
        r"\(`(\w+)`\)", first)
    tf_names = _names(first)
    k3_names = tf_names if last.startswith("the same") else _names(last)
    rows.append((tf_names, aliases, k3_names, first.startswith("decoder:"),
                 "encoder backbone only" in last))
  return rows


def _parameters(cls):
  return {name for name, p in inspect.signature(cls).parameters.items()
          if p.kind is not p.VAR_KEYWORD} - {"dtype"}


def _pairs(rows):
  """`(Model Garden name, keras-hub name)` of each row whose names differ."""
  for tf_names, aliases, k3_names, *_ in rows:
    if not (tf_names and k3_names):
      continue
    k3_names = k3_names * len(tf_names) if len(k3_names) == 1 else k3_names
    for tf_name, k3_name in zip(tf_names, k3_names):
      yield tf_name, k3_name
    for alias in aliases:
      yield alias, k3_names[0]


def _points_to(model_garden_name, keras_hub_name):
  renamed = arguments.MODEL_GARDEN_NAMES.get(model_garden_name, ())
  return keras_hub_name == model_garden_name or keras_hub_name in (
      (renamed,) if isinstance(renamed, str) else renamed)


def test_the_block_table_is_each_face_s_signature():
  rows = _rows("Blocks")
  for face, (encoder_cls, decoder_cls) in enumerate((
      (tf_encoder.RealFormerEncoderBlock, tf_decoder.RealFormerDecoderBlock),
      (k3_encoder.RealFormerEncoderBlock, k3_decoder.RealFormerDecoderBlock))):
    names = lambda decoder: {n for row in rows if decoder or not row[3]
                             for n in row[2 * face]}
    assert _parameters(encoder_cls) == names(False), encoder_cls
    assert _parameters(decoder_cls) == names(True), decoder_cls


def test_the_stack_table_is_the_backbones_signatures():
  rows = _rows("Encoder and backbones")
  k3_names = {n for row in rows for n in row[2]}
  assert _parameters(k3_backbone.RealFormerBackbone) == k3_names
  assert _parameters(k3_decoder_backbone.RealFormerDecoderBackbone) == (
      k3_names - {n for row in rows if row[4] for n in row[2]})
  # The tf_keras encoder: BertEncoderV2's arguments, in its order and with
  # its defaults, then the table's others.
  ours = inspect.signature(tf_network.RealFormerEncoder).parameters
  theirs = inspect.signature(mg_networks.BertEncoderV2).parameters
  assert _parameters(tf_network.RealFormerEncoder) == _parameters(
      mg_networks.BertEncoderV2) | {n for row in rows for n in row[0]}
  assert list(ours)[:len(theirs) - 1] == list(theirs)[:-1]
  assert [n for n, p in theirs.items()
          if isinstance(p.default, (bool, int, float, str, type(None))) and
          ours[n].default != p.default] == []


@pytest.mark.parametrize("title", ["Blocks", "Encoder and backbones"])
def test_each_model_garden_name_points_to_its_keras_hub_name(title):
  pairs = list(_pairs(_rows(title)))
  assert [p for p in pairs if not _points_to(*p)] == []
  if title == "Encoder and backbones":  # Every pointer is in the tables.
    documented = {tf for tf, _ in pairs} | {
        tf for tf, _ in _pairs(_rows("Blocks"))}
    assert set(arguments.MODEL_GARDEN_NAMES) <= documented


def test_a_model_garden_name_is_refused_naming_the_keras_hub_one():
  for tf_name, k3_name in _pairs(_rows("Encoder and backbones")):
    if tf_name != k3_name:
      with pytest.raises(TypeError, match=f"'{tf_name}': did you mean "
                         f"'{k3_name}'"):
        k3_backbone.RealFormerBackbone(
            vocabulary_size=10, num_layers=1, num_heads=1, hidden_dim=4,
            intermediate_dim=4, **{tf_name: 1})
