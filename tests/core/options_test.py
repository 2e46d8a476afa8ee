"""core.options: validators name the argument and value; the score dtype rule."""

import ast
import pathlib

import pytest

from realformer_tf.core import options


@pytest.mark.parametrize("score_dtype, compute, want", [
    ("auto", "float32", "float32"), ("auto", "float16", "float32"),
    ("auto", "bfloat16", "bfloat16"), ("float32", "bfloat16", "float32"),
    ("compute", "float16", "float16"), ("compute", "bfloat16", "bfloat16"),
    ("compute", "float32", "float32")])
def test_resolve_score_dtype(score_dtype, compute, want):
  assert options.resolve_score_dtype(score_dtype, compute) == want


@pytest.mark.parametrize("validate, value, message", [
    (options.validate_residual_attention, "avg",
     r"residual_attention must be one of \('sum', 'mean', 'none'\), got 'avg'"),
    (options.validate_score_dtype, "half", "score_dtype must be one of .*'half'"),
    (options.validate_attention_implementation, "cuda",
     "attention_implementation must be one of .*'cuda'"),
    (options.check_layer_index, -1, "layer_index must be an int >= 0, got -1"),
    (lambda v: options.check_positive_int("num_heads", v), True,
     "num_heads must be a positive int, got True"),
    (lambda v: options.check_rate("dropout", v), 1.0,
     r"dropout must be a rate in \[0, 1\), got 1.0"),
])
def test_bad_values_are_named(validate, value, message):
  with pytest.raises(ValueError, match=message):
    validate(value)


def test_mask_adder_and_block_width():
  assert options.mask_adder("float16") == -32752.0
  assert options.mask_adder("bfloat16") == options.mask_adder("float32") == -1e9
  assert options.block_width("blk", (2, 5, 16), 4) == 16
  with pytest.raises(ValueError, match="blk: width 16 is not divisible by "
                     "num_attention_heads=3"):
    options.block_width("blk", (2, 5, 16), 3)
  with pytest.raises(ValueError, match=r"known width, got \(2, 5, None\)"):
    options.block_width("blk", (2, 5, None), 4)


def test_core_imports_no_framework_and_nothing_of_ours_above_it():
  """The core is pure Python over an ops namespace (the Pallas kernel's
  modules import jax, guarded)."""
  root = pathlib.Path(options.__file__).parent
  for path in root.glob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if isinstance(node, ast.ImportFrom)
               else [])
      for name in names:
        top = name.split(".")[0]
        assert top not in ("tensorflow", "tf_keras", "keras", "keras_hub",
                           "official"), (path.name, name)
        if top == "realformer_tf":
          assert name.startswith("realformer_tf.core"), (path.name, name)
