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
