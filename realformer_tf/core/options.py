"""RealFormer's options, their validation, and the score dtype and mask rules.

Dtypes are names ("float32", "bfloat16", ...), so both faces use them as
they are: TensorFlow and Keras 3 take dtype names wherever they take dtypes.
"""

RESIDUAL_MODES = ("sum", "mean", "none")
SCORE_DTYPES = ("auto", "float32", "compute")
ATTENTION_IMPLEMENTATIONS = ("auto", "reference", "pallas")

# Keras' additive mask value (so "none" matches MultiHeadAttention bit for
# bit); under float16, half its lowest value keeps `score + bias` finite.
MASK_ADDER = -1e9
MASK_ADDER_FLOAT16 = -32752.0


def one_of(name: str, value, choices):
  """`value` if it is one of `choices`, else a ValueError naming `name`."""
  if value not in choices:
    raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
  return value


def validate_residual_attention(value: str) -> str:
  return one_of("residual_attention", value, RESIDUAL_MODES)


def validate_score_dtype(value: str) -> str:
  return one_of("score_dtype", value, SCORE_DTYPES)


def validate_attention_implementation(value: str) -> str:
  return one_of("attention_implementation", value, ATTENTION_IMPLEMENTATIONS)


def resolve_score_dtype(score_dtype: str, compute_dtype: str) -> str:
  """The dtype name of the running score sum of a layer computing in `compute_dtype`.

  "auto" is the compute dtype under bfloat16 (float32's range, half the
  bytes) and float32 otherwise (a float16 sum over layers overflows).
  """
  if validate_score_dtype(score_dtype) == "float32":
    return "float32"
  if score_dtype == "compute" or compute_dtype == "bfloat16":
    return compute_dtype
  return "float32"


def mask_adder(dtype: str) -> float:
  """The additive bias of a masked position in logits of `dtype`."""
  return MASK_ADDER_FLOAT16 if dtype == "float16" else MASK_ADDER


def check_positive_int(name: str, value) -> int:
  if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
    raise ValueError(f"{name} must be a positive int, got {value!r}.")
  return value


def check_layer_index(value) -> int:
  if not isinstance(value, int) or isinstance(value, bool) or value < 0:
    raise ValueError(f"layer_index must be an int >= 0, got {value!r}.")
  return value


def float_or_nan(value) -> float:
  """`float(value)`, or NaN (refused by every range check) for a non-number."""
  try:
    return float("nan") if isinstance(value, bool) else float(value)
  except (TypeError, ValueError):
    return float("nan")


def check_rate(name: str, value) -> float:
  if not 0.0 <= float_or_nan(value) < 1.0:
    raise ValueError(f"{name} must be a rate in [0, 1), got {value!r}.")
  return float(value)


def block_width(owner: str, shape, num_heads: int) -> int:
  """The known width of a `[batch, seq, width]` shape that `num_heads` divide."""
  shape = tuple(shape)
  if len(shape) != 3 or shape[-1] is None:
    raise ValueError(f"{owner}: expects hidden of shape [batch, seq, width] "
                     f"with a known width, got {shape}.")
  if shape[-1] % num_heads:
    raise ValueError(f"{owner}: width {shape[-1]} is not divisible by "
                     f"num_attention_heads={num_heads}.")
  return shape[-1]
