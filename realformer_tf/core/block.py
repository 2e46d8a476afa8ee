"""The Post-LN / Pre-LN body of a Transformer block, written once.

Every block of both faces (encoder; decoder with and without cross
attention) is a chain of sub-layers (attention, cross attention,
feed-forward), each wrapped the same way:

    Post-LN (BERT, RealFormer):  hidden = norm(hidden + sublayer(hidden))
    Pre-LN:                      hidden = hidden + sublayer(norm(hidden))
"""


def residual_add(ops, source, output):
  """`source + output`, in float32 if either is (Model Garden adds a float32
  LayerNorm output and a low-precision sub-layer output in float32)."""
  source_dtype, output_dtype = ops.dtype(source), ops.dtype(output)
  if source_dtype != output_dtype:
    dtype = "float32" if "float32" in (source_dtype, output_dtype) else (
        output_dtype)
    source, output = ops.cast(source, dtype), ops.cast(output, dtype)
  return ops.add(source, output)


def chain(*layers):
  """`inputs -> layers[-1](...layers[0](inputs))`: a feed-forward sub-layer."""
  def sublayer(inputs):
    for layer in layers:
      inputs = layer(inputs)
    return inputs
  return sublayer


def residual_sublayers(ops, hidden, sublayers, norm_first: bool, crop=None):
  """`hidden` through `(norm, sublayer)` pairs, Post-LN or Pre-LN.

  Args:
    ops: An ops namespace (see `core.attention`).
    hidden: `[batch, seq, width]`.
    sublayers: `(norm, sublayer)` pairs: the LayerNorm around the sub-layer
      and the sub-layer, `inputs -> output` (its dropout included).
    norm_first: Pre-LN (True) or Post-LN.
    crop: Applied to the first residual source when the first sub-layer
      returns fewer rows (the encoder's `output_range`).

  Returns:
    The block's output.
  """
  for i, (norm, sublayer) in enumerate(sublayers):
    output = sublayer(norm(hidden) if norm_first else hidden)
    source = crop(hidden) if crop is not None and i == 0 else hidden
    hidden = residual_add(ops, source, output)
    if not norm_first:
      hidden = norm(hidden)
  return hidden
