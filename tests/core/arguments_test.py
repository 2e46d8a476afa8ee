"""core.arguments: binding, old names, checks and configs, per face."""

import warnings

import pytest

from realformer_tf.core import arguments

_IDENTITY = {"initializer": lambda v: v, "activation": lambda v: v}


def _bind(face, *args, **kwargs):
  return arguments.BLOCK.bind(face, "Blk", args, kwargs, _IDENTITY)


def test_each_face_binds_its_names_to_one_set_of_keys():
  tf_values, rest = _bind(arguments.TF_KERAS, 4, 32, norm_first=True,
                          name="b")
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # The new names do not warn.
    k3_values, _ = _bind(arguments.KERAS3, num_heads=4, intermediate_dim=32,
                         normalize_first=True)
  assert rest == {"name": "b"}
  assert tf_values["score_dtype"] == k3_values["score_dtype"] == "auto"
  shared = set(tf_values) & set(k3_values)
  assert {k: tf_values[k] for k in shared} == {k: k3_values[k] for k in shared}
  assert set(tf_values) ^ set(k3_values) == {"recompute",
                                             "attention_implementation"}


def test_model_garden_aliases_on_tf_keras_old_names_warn_on_keras3():
  values, _ = _bind(arguments.TF_KERAS, 2, intermediate_size=8,
                    dropout_rate=0.1, attention_dropout_rate=0.2)
  assert (values["inner_dim"], values["output_dropout"],
          values["attention_dropout"]) == (8, 0.1, 0.2)
  with pytest.warns(DeprecationWarning,
                    match="Blk: 'norm_epsilon' is deprecated, use "
                    "'layer_norm_epsilon'"):
    values, _ = _bind(arguments.KERAS3, num_heads=2, intermediate_dim=8,
                      norm_epsilon=1e-6)
  assert values["norm_epsilon"] == 1e-6


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(num_heads=2), TypeError, "Blk needs intermediate_dim"),
    (dict(num_heads=0, intermediate_dim=8), ValueError,
     "Blk: num_heads must be a positive int, got 0"),
    (dict(num_heads=2, intermediate_dim=8, dropout=1.5), ValueError,
     r"Blk: dropout must be a rate in \[0, 1\), got 1.5"),
    (dict(num_heads=2, intermediate_dim=8, score_dtype="half"), ValueError,
     "score_dtype must be one of"),
    (dict(num_heads=2, intermediate_dim=8, inner_dim=8), TypeError,
     "got 'intermediate_dim' twice"),
    # None is taken only where it is the default (issue 39 item 4: it
    # passed, and failed later inside Keras' output-shape code).
    (dict(num_heads=2, intermediate_dim=8, score_dtype=None), ValueError,
     r"Blk: score_dtype must be one of .*got None"),
    (dict(num_heads=2, intermediate_dim=8, dropout=None), ValueError,
     "Blk: dropout must be a rate"),
])
def test_bad_arguments_are_named(kwargs, error, message):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    with pytest.raises(error, match=message):
      _bind(arguments.KERAS3, **kwargs)


def test_config_round_trips_in_each_face_s_names():
  for face in (arguments.TF_KERAS, arguments.KERAS3):
    values, _ = _bind(face, 4, 32)
    config = arguments.BLOCK.config(face, values, _IDENTITY)
    assert _bind(face, **config)[0] == values
  assert "layer_norm_epsilon" in config and "norm_epsilon" not in config


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
    arguments.BLOCK.bind(arguments.KERAS3, "Blk", (),
                         dict(num_heads=2, intermediate_dim=8, **{typo: 1}),
                         _IDENTITY, base=("name", "dtype"))


def test_an_unknown_keyword_with_no_close_name_lists_the_valid_ones():
  with pytest.raises(TypeError, match=(
      "unexpected keyword argument 'xyzzy': it takes num_heads, "
      "intermediate_dim, .*, attention_implementation, name\\.$")):
    arguments.BLOCK.bind(arguments.KERAS3, "Blk", (),
                         dict(num_heads=2, intermediate_dim=8, xyzzy=1),
                         _IDENTITY, base=("name",))


def test_base_keywords_and_old_names_pass_through_the_check():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    values, rest = arguments.BLOCK.bind(
        arguments.KERAS3, "Blk", (),
        dict(num_heads=2, intermediate_dim=8, name="b", dropout_rate=0.2),
        _IDENTITY, base=("name",))
  assert rest == {"name": "b"} and values["output_dropout"] == 0.2


def test_signature_has_keyword_only_names_after_the_spec():
  class Base:
    def __init__(self, a, *args, b=1, **kwargs):
      pass
  assert arguments.keyword_names(Base, Base) == ("a", "b")
  parameters = arguments.BLOCK.signature(arguments.KERAS3,
                                         ("dtype",)).parameters
  assert list(parameters)[:2] == ["num_heads", "intermediate_dim"]
  assert list(parameters)[-2:] == ["dtype", "kwargs"]
  assert parameters["dtype"].kind is parameters["dtype"].KEYWORD_ONLY
