"""core.arguments: the checks by either face's names, unknown names."""

import pytest

from realformer_tf.core import arguments


@pytest.mark.parametrize("values, message", [
    (dict(num_attention_heads=0),
     "Blk: num_attention_heads must be a positive int, got 0"),
    (dict(num_heads=0), "Blk: num_heads must be a positive int, got 0"),
    (dict(output_dropout=1.5),
     r"Blk: output_dropout must be a rate in \[0, 1\), got 1.5"),
    (dict(attention_dropout_rate=1.0),
     r"Blk: attention_dropout_rate must be a rate in \[0, 1\), got 1.0"),
    (dict(norm_epsilon=0), "Blk: norm_epsilon must be a positive number"),
    (dict(type_vocab_size=0), "Blk: type_vocab_size must be a positive int"),
    (dict(score_dtype="half"), "Blk: score_dtype must be one of"),
    # None is refused too (issue 39 item 4: it passed, and failed later
    # inside Keras' output-shape code).
    (dict(score_dtype=None), r"Blk: score_dtype must be one of .*got None"),
    (dict(output_dropout=None), "Blk: output_dropout must be a rate"),
])
def test_bad_values_are_named_by_either_face_s_name(values, message):
  with pytest.raises(ValueError, match=message):
    arguments.check("Blk", **values)


def test_good_values_pass():
  arguments.check("Blk", num_attention_heads=2, inner_dim=8, dropout=0.1,
                  layer_norm_epsilon=1e-6, residual_attention="mean",
                  layer_index=3, score_dtype="auto")


@pytest.mark.parametrize("typo, closest", [
    ("droput", "dropout"), ("num_head", "num_heads"), ("nmae", "name"),
    ("score_dtyp", "score_dtype")])
def test_an_unknown_keyword_names_the_closest_valid_one(typo, closest):
  with pytest.raises(TypeError, match=(
      f"Blk got an unexpected keyword argument '{typo}': did you mean "
      f"'{closest}'")):
    arguments.refuse_unknown("Blk", {typo: 1}, ("name", "dtype"),
                             ("num_heads", "dropout", "score_dtype"))


@pytest.mark.parametrize("old, renamed, closest", [
    # difflib alone would offer 'intermediate_dim' and 'vocabulary_size'.
    ("intermediate_activation", {"intermediate_activation": "activation"},
     "activation"),
    ("type_vocab_size", {"type_vocab_size": "num_segments"}, "num_segments"),
    # The first of the names that is valid here.
    ("rate", {"rate": ("attention_dropout", "dropout")}, "dropout"),
])
def test_an_other_face_s_name_names_its_valid_name(old, renamed, closest):
  with pytest.raises(TypeError, match=(
      f"unexpected keyword argument '{old}': did you mean '{closest}'")):
    arguments.refuse_unknown(
        "Blk", {old: 1}, ("name",),
        ("intermediate_dim", "activation", "vocabulary_size", "num_segments",
         "dropout"), renamed)


def test_an_unknown_keyword_with_no_close_name_lists_the_valid_ones():
  with pytest.raises(TypeError, match=(
      "unexpected keyword argument 'xyzzy': it takes num_heads, "
      "intermediate_dim, name\\.$")):
    arguments.refuse_unknown("Blk", dict(xyzzy=1, name="b"), ("name",),
                             ("num_heads", "intermediate_dim"))
  arguments.refuse_unknown("Blk", dict(name="b"), ("name",))  # Base: taken.


def test_keyword_names_are_the_named_parameters():
  class Base:
    def __init__(self, a, *args, b=1, **kwargs):
      pass
  assert arguments.keyword_names(Base, Base) == ("a", "b")
