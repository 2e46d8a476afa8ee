"""core.arguments: tf_keras binding and configs, checks, unknown names."""

import pytest

from realformer_tf.core import arguments

_IDENTITY = {"initializer": lambda v: v, "activation": lambda v: v}


def _bind(*args, **kwargs):
  return arguments.BLOCK.bind(arguments.TF_KERAS, "Blk", args, kwargs,
                              _IDENTITY)


def test_positional_and_keyword_arguments_bind_to_keys():
  values, rest = _bind(4, 32, norm_first=True, name="b")
  assert rest == {"name": "b"}
  assert (values["num_attention_heads"], values["inner_dim"],
          values["norm_first"], values["score_dtype"]) == (4, 32, True, "auto")
  assert "attention_implementation" not in values  # Keras 3 only.


def test_model_garden_aliases_are_taken():
  values, _ = _bind(2, intermediate_size=8, dropout_rate=0.1,
                    attention_dropout_rate=0.2)
  assert (values["inner_dim"], values["output_dropout"],
          values["attention_dropout"]) == (8, 0.1, 0.2)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(num_attention_heads=2), TypeError, "Blk needs inner_dim"),
    (dict(num_attention_heads=0, inner_dim=8), ValueError,
     "Blk: num_attention_heads must be a positive int, got 0"),
    (dict(num_attention_heads=2, inner_dim=8, output_dropout=1.5), ValueError,
     r"Blk: output_dropout must be a rate in \[0, 1\), got 1.5"),
    (dict(num_attention_heads=2, inner_dim=8, score_dtype="half"), ValueError,
     "score_dtype must be one of"),
    (dict(num_attention_heads=2, inner_dim=8, intermediate_size=8), TypeError,
     "got 'inner_dim' twice"),
    # None is taken only where it is the default (issue 39 item 4: it
    # passed, and failed later inside Keras' output-shape code).
    (dict(num_attention_heads=2, inner_dim=8, score_dtype=None), ValueError,
     r"Blk: score_dtype must be one of .*got None"),
    (dict(num_attention_heads=2, inner_dim=8, output_dropout=None),
     ValueError, "Blk: output_dropout must be a rate"),
])
def test_bad_arguments_are_named(kwargs, error, message):
  with pytest.raises(error, match=message):
    _bind(**kwargs)


def test_config_round_trips():
  values, _ = _bind(4, 32)
  config = arguments.BLOCK.config(arguments.TF_KERAS, values, _IDENTITY)
  assert _bind(**config)[0] == values
  assert "norm_epsilon" in config and "layer_norm_epsilon" not in config


def test_renamed_and_replaced_specs_keep_keys():
  spec = arguments.BLOCK.only("inner_dim", "norm_first").replace(
      norm_first=True).renamed(inner_dim="intermediate_size")
  values, _ = spec.bind(arguments.TF_KERAS, "S", (), dict(intermediate_size=8),
                        _IDENTITY)
  assert values == {"inner_dim": 8, "norm_first": True}
  assert list(spec.signature(arguments.TF_KERAS).parameters) == [
      "intermediate_size", "norm_first", "kwargs"]


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
